"""The base of the generated spec records (``_provider_spec.py``).

A record is frozen and slotted, built by keyword, compared and hashed by its
fields' values, shown by them, and copied and pickled through its
``__init__``: what ``@dataclass(frozen=True, slots=True, kw_only=True)`` would
build, written once here so that importing the spec compiles no methods. The
generator writes per record only its ``__slots__``, its annotated fields (in
order) and a typed keyword-only ``__init__`` that passes its arguments to
``_set_fields``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import FrozenInstanceError
from typing import ClassVar, NoReturn


class SpecRecord:
    __slots__ = ()
    # The record's fields in the order its class annotates them.
    _fields: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        cls._fields = tuple(cls.__annotations__)

    def _set_fields(self, arguments: dict[str, object]) -> None:
        """Sets every field from ``__init__``'s arguments (its ``locals()``)."""
        for name in self._fields:
            object.__setattr__(self, name, arguments[name])

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self) or not isinstance(other, SpecRecord):
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({fields})"

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> NoReturn:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[object, ...]:
        # copy.copy and pickle rebuild the record by keyword, never by assignment.
        fields = {name: getattr(self, name) for name in self._fields}
        return (_rebuild, (type(self), fields))


def _rebuild(record_type: Callable[..., SpecRecord], fields: dict[str, object]) -> SpecRecord:
    return record_type(**fields)
