"""The base of the generated spec records (``_provider_spec.py``).

A record is what a frozen dataclass is (built by keyword, compared and hashed
by value, never assigned to), but defining a record class builds no method:
``@dataclass`` compiles six per class, most of the cost of importing the spec.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from typing import ClassVar, dataclass_transform


@dataclass_transform(kw_only_default=True, frozen_default=True)
class Record:
    """A frozen record whose fields are its class's annotations, in order."""

    __slots__ = ()
    record_fields: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls) -> None:
        # Since 3.10 a class's own annotations, never its base's.
        cls.record_fields = tuple(cls.__annotations__)

    def __init__(self, **values: object) -> None:
        if values.keys() != set(self.record_fields):
            expected = ", ".join(self.record_fields)
            raise TypeError(f"{type(self).__name__} takes exactly the fields {expected}")
        for name in self.record_fields:
            object.__setattr__(self, name, values[name])

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.record_fields)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record) or type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.record_fields)
        return f"{type(self).__name__}({fields})"
