"""Probe report schema 1: the checks, the bounded parser, the preflight's own records.

Every check of schema 1 lives here once, as functions over a record's
attributes: the public frozen dataclasses of ``_report`` run them from
``__post_init__``, and the plain records below (what a preflight parses the
probe's output into) run them from ``__init__``. A preflight therefore never
defines a dataclass: defining the public ones costs about 0.6 ms each, paid
at import by every `rextio generate`, and they load only when a public name
is used. Every refusal is a ``CudaProbeError`` with ``PROBE_SCHEMA_INVALID``;
the parser adds ``PROBE_OUTPUT_INVALID`` for bytes that are not a bounded
UTF-8 JSON text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Any, Final

from rextio_device_cuda import _codes
from rextio_device_cuda._errors import CudaProbeError, is_reason_code
from rextio_device_cuda._provider_spec import PROVIDER_SPEC

if TYPE_CHECKING:
    from typing import Protocol, TypeVar

_REPORT: Final = PROVIDER_SPEC.probe_report
MAX_OUTPUT_BYTES: Final[int] = _REPORT.max_output_bytes
_TARGET_FIELD: Final = re.compile(_REPORT.target_field_pattern, re.ASCII)
_STATUS: Final = _REPORT.statuses
_STATUSES: Final[frozenset[str]] = frozenset(
    (_STATUS.complete, _STATUS.unavailable, _STATUS.unsupported, _STATUS.error)
)
_COMPLETE: Final[str] = _STATUS.complete
_MAX_DEVICES: Final[int] = _REPORT.max_devices
_MAX_ORDINAL: Final[int] = _REPORT.max_device_ordinal
_MAX_NAME_CHARS: Final[int] = _REPORT.max_device_name_chars
_DRIVER_RANGE: Final[tuple[int, int]] = _REPORT.driver_version_range
_MAJOR_RANGE: Final[tuple[int, int]] = _REPORT.compute_major_range
_MINOR_RANGE: Final[tuple[int, int]] = _REPORT.compute_minor_range
_INT32: Final = (-(2**31), 2**31 - 1)
_DEVICE_COUNT_RANGE: Final[tuple[int, int]] = (0, _MAX_DEVICES)
_ORDINAL_RANGE: Final[tuple[int, int]] = (0, _MAX_ORDINAL)
SCHEMA_VERSION: Final[str] = _REPORT.schema_version
PROBE_NAME: Final[str] = _REPORT.probe
# Unicode category Cc, the set the probe strips (Rust's char::is_control):
# U+0000-U+001F and U+007F-U+009F (a set, not a pattern to compile at import).
_CONTROL_CHARACTERS: Final[frozenset[str]] = frozenset(
    chr(code) for code in (*range(0x00, 0x20), *range(0x7F, 0xA0))
)

# The records' fields, in 0.1.0's order (``_report`` checks its dataclasses
# against these at import) and in the order the probe prints them.
TARGET_FIELDS: Final[tuple[str, ...]] = ("os", "arch", "environment")
DEVICE_FIELDS: Final[tuple[str, ...]] = (
    "ordinal",
    "name",
    "compute_major",
    "compute_minor",
    "sm",
)
REPORT_FIELDS: Final[tuple[str, ...]] = (
    "target",
    "platform_supported",
    "status",
    "reason_code",
    "driver_loaded",
    "driver_version",
    "device_count",
    "cuda_result",
    "devices",
)


def schema_error(detail: str) -> CudaProbeError:
    """``PROBE_SCHEMA_INVALID`` for the broken rule ``detail``."""
    return CudaProbeError(
        _codes.PROBE_SCHEMA_INVALID, detail, facts=f"the probe's report breaks schema 1: {detail}"
    )


def _output_error(detail: str) -> CudaProbeError:
    return CudaProbeError(
        _codes.PROBE_OUTPUT_INVALID, detail, facts=f"the probe's output is {detail}"
    )


def _is_int_in(value: object, bounds: tuple[int, int]) -> bool:
    # Booleans are not integers in the probe schema.
    return type(value) is int and bounds[0] <= value <= bounds[1]


def _require(condition: bool, detail: str) -> None:
    if not condition:
        raise schema_error(detail)


def _is_valid_unicode(text: str) -> bool:
    # A JSON escape such as "\ud800" decodes to a lone surrogate: not a
    # character, and it could never be written out as UTF-8 later.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_absolute_path(text: str) -> bool:
    # Both flavours need a root, and a root is a separator: text without one
    # cannot be absolute, so the (costly) pure-path parse is skipped.
    if "/" not in text and "\\" not in text:
        return False
    return PurePosixPath(text).is_absolute() or PureWindowsPath(text).is_absolute()


if TYPE_CHECKING:  # the shapes the checks read; no Protocol class is built at run time

    class _TargetFields(Protocol):
        @property
        def os(self) -> str: ...
        @property
        def arch(self) -> str: ...
        @property
        def environment(self) -> str: ...

    class _DeviceFields(Protocol):
        @property
        def ordinal(self) -> int: ...
        @property
        def name(self) -> str: ...
        @property
        def compute_major(self) -> int: ...
        @property
        def compute_minor(self) -> int: ...
        @property
        def sm(self) -> str: ...

    class _ReportFields(Protocol):
        @property
        def target(self) -> object: ...
        @property
        def platform_supported(self) -> bool: ...
        @property
        def status(self) -> str: ...
        @property
        def reason_code(self) -> str | None: ...
        @property
        def driver_loaded(self) -> bool: ...
        @property
        def driver_version(self) -> int | None: ...
        @property
        def device_count(self) -> int | None: ...
        @property
        def cuda_result(self) -> int | None: ...
        @property
        def devices(self) -> tuple[Any, ...]: ...


def check_target(record: _TargetFields) -> None:
    """Each field is 1..=32 ASCII alphanumerics, ``_`` or ``-``."""
    for name in TARGET_FIELDS:
        value = getattr(record, name)
        if not isinstance(value, str) or _TARGET_FIELD.fullmatch(value) is None:
            raise schema_error(f"target.{name} is malformed")


def check_device(record: _DeviceFields) -> None:
    """A device row's rules, in the order the parser has always applied them."""
    _require(_is_int_in(record.ordinal, _ORDINAL_RANGE), "device ordinal out of range")
    name = record.name
    _require(
        isinstance(name, str)
        and 1 <= len(name) <= _MAX_NAME_CHARS
        and _CONTROL_CHARACTERS.isdisjoint(name)
        and _is_valid_unicode(name)
        and not _is_absolute_path(name),
        "device name is malformed",
    )
    _require(_is_int_in(record.compute_major, _MAJOR_RANGE), "compute_major out of range")
    _require(_is_int_in(record.compute_minor, _MINOR_RANGE), "compute_minor out of range")
    _require(
        record.sm == f"sm_{record.compute_major}{record.compute_minor}",
        "sm does not match the compute capability",
    )


def check_report(record: _ReportFields, target_type: type, device_type: type) -> None:
    """Every field of a report and the cross-field rules of schema 1.

    ``target_type`` and ``device_type`` are the record types its target and
    rows must be (the public records for a public report, the plain ones for
    a preflight's).
    """
    _require(isinstance(record.target, target_type), "target")
    _require(type(record.platform_supported) is bool, "platform_supported")
    _require(isinstance(record.status, str) and record.status in _STATUSES, "status")
    _require(record.reason_code is None or is_reason_code(record.reason_code), "reason_code")
    _require(type(record.driver_loaded) is bool, "driver_loaded")
    _require(
        record.driver_version is None or _is_int_in(record.driver_version, _DRIVER_RANGE),
        "driver_version",
    )
    _require(
        record.device_count is None or _is_int_in(record.device_count, _DEVICE_COUNT_RANGE),
        "device_count",
    )
    _require(record.cuda_result is None or _is_int_in(record.cuda_result, _INT32), "cuda_result")
    devices = record.devices
    _require(
        isinstance(devices, tuple)
        and len(devices) <= _MAX_DEVICES
        and all(isinstance(row, device_type) for row in devices),
        "devices",
    )
    _require(
        all(row.ordinal == index for index, row in enumerate(devices)),
        "device ordinal differs from its index",
    )
    if record.status == _COMPLETE:
        _require(
            record.reason_code is None
            and record.platform_supported
            and record.driver_loaded
            and record.driver_version is not None
            and record.device_count is not None
            and record.device_count >= 1
            and record.device_count == len(devices)
            and record.cuda_result == 0,
            "a complete report is inconsistent",
        )
    else:
        _require(
            record.reason_code is not None and not devices and record.device_count in (None, 0),
            "an incomplete report is inconsistent",
        )


# -- the preflight's records: plain classes, checked exactly like the public ones --


class Target:
    """A report's target as a preflight holds it (``ProbeTarget``'s fields)."""

    __slots__ = TARGET_FIELDS

    def __init__(self, *, os: str, arch: str, environment: str) -> None:
        self.os = os
        self.arch = arch
        self.environment = environment
        check_target(self)

    def values(self) -> tuple[str, str, str]:
        """``(os, arch, environment)``."""
        return (self.os, self.arch, self.environment)


class Device:
    """One device row as a preflight holds it (``CudaDeviceRecord``'s fields)."""

    __slots__ = DEVICE_FIELDS

    def __init__(
        self, *, ordinal: int, name: str, compute_major: int, compute_minor: int, sm: str
    ) -> None:
        self.ordinal = ordinal
        self.name = name
        self.compute_major = compute_major
        self.compute_minor = compute_minor
        self.sm = sm
        check_device(self)


class Report:
    """A schema-1 report as a preflight holds it (``CudaProbeReport``'s fields)."""

    __slots__ = REPORT_FIELDS
    schema_version: Final = SCHEMA_VERSION
    probe: Final = PROBE_NAME
    support_claim: Final = False

    def __init__(
        self,
        *,
        target: Target,
        platform_supported: bool,
        status: str,
        reason_code: str | None,
        driver_loaded: bool,
        driver_version: int | None,
        device_count: int | None,
        cuda_result: int | None,
        devices: tuple[Device, ...],
    ) -> None:
        self.target = target
        self.platform_supported = platform_supported
        self.status = status
        self.reason_code = reason_code
        self.driver_loaded = driver_loaded
        self.driver_version = driver_version
        self.device_count = device_count
        self.cuda_result = cuda_result
        self.devices = devices
        check_report(self, Target, Device)


# -- the parser --------------------------------------------------------------


class _OutOfRangeInteger:
    """A JSON integer too long for any schema-1 field; it fails every field check."""


# No schema-1 integer is longer than the int32 minimum; a longer literal is
# valid JSON that is out of range, not a reason to convert thousands of digits
# (which Python refuses beyond sys.get_int_max_str_digits()).
_MAX_INTEGER_LITERAL: Final[int] = len(str(_INT32[0]))


def _bounded_int(literal: str) -> int | _OutOfRangeInteger:
    if len(literal) > _MAX_INTEGER_LITERAL:
        return _OutOfRangeInteger()
    return int(literal)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


class _DuplicateKeyError(Exception):
    """A JSON object repeats a key: valid JSON grammar, invalid schema."""


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    # Fewer entries than pairs: some key repeated (found in C, not a Python loop).
    if len(result) != len(pairs):
        raise _DuplicateKeyError("duplicate key")
    return result


def _exact_object(value: object, keys: frozenset[str], label: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise schema_error(f"{label} is not an object")
    _require(value.keys() == keys, f"{label} keys differ from schema 1")
    return value


# Schema 1's key sets: the wire constants, then the records' fields.
WIRE_CONSTANTS: Final[dict[str, object]] = {
    "schema_version": SCHEMA_VERSION,
    "probe": PROBE_NAME,
    "support_claim": False,
}
ROOT_KEYS: Final[tuple[str, ...]] = (*WIRE_CONSTANTS, *REPORT_FIELDS)
_ROOT_KEY_SET: Final[frozenset[str]] = frozenset(ROOT_KEYS)
_TARGET_KEY_SET: Final[frozenset[str]] = frozenset(TARGET_FIELDS)
_DEVICE_KEY_SET: Final[frozenset[str]] = frozenset(DEVICE_FIELDS)
# One decoder for every parse (json.loads with hooks builds a new one per call);
# it keeps no state between documents.
_DECODER: Final = json.JSONDecoder(
    object_pairs_hook=_unique_object, parse_constant=_reject_constant, parse_int=_bounded_int
)

if TYPE_CHECKING:  # type variables cost tens of microseconds each at import
    TargetT = TypeVar("TargetT")
    DeviceT = TypeVar("DeviceT")
    ReportT = TypeVar("ReportT")


def build_report(
    value: object,
    make_target: Callable[..., TargetT],
    make_device: Callable[..., DeviceT],
    make_report: Callable[..., ReportT],
) -> ReportT:
    """Build a report from decoded JSON with the given record types, enforcing
    the exact key sets; the records check their values."""
    root = _exact_object(value, _ROOT_KEY_SET, "report")
    target = _exact_object(root["target"], _TARGET_KEY_SET, "target")
    for key, constant in WIRE_CONSTANTS.items():
        found = root[key]
        # type() first: False == 0 in Python, and "1" is not 1.
        _require(type(found) is type(constant) and found == constant, key)
    devices = root["devices"]
    _require(isinstance(devices, list) and len(devices) <= _MAX_DEVICES, "devices")
    return make_report(
        target=make_target(**target),
        platform_supported=root["platform_supported"],
        status=root["status"],
        reason_code=root["reason_code"],
        driver_loaded=root["driver_loaded"],
        driver_version=root["driver_version"],
        device_count=root["device_count"],
        cuda_result=root["cuda_result"],
        devices=tuple(
            make_device(**_exact_object(row, _DEVICE_KEY_SET, "device")) for row in devices
        ),
    )


def decode(payload: bytes | str) -> object:
    """Probe stdout as decoded JSON: bounded, strict UTF-8, no duplicate key."""
    output: object = payload
    if isinstance(output, str):
        try:
            output = output.encode("utf-8")
        except UnicodeEncodeError as error:
            raise _output_error("not UTF-8") from error
    if not isinstance(output, bytes | bytearray | memoryview):
        raise _output_error("not bytes")
    data = bytes(output)
    if not data:
        raise _output_error("empty")
    if len(data) > MAX_OUTPUT_BYTES:
        raise _output_error("too large")
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as error:
        raise _output_error("not UTF-8") from error
    try:
        return _DECODER.decode(text)
    except _DuplicateKeyError as error:
        raise schema_error("duplicate key") from error
    except (ValueError, RecursionError) as error:
        raise _output_error("not JSON") from error


# A probe prints the same report run after run: the parse of the last few
# outputs is kept. It is a pure function of the bytes (a refusal is raised
# again each time; lru_cache keeps no exception), the records are never
# changed after they are built and never leave the preflight. Only short
# outputs are kept, so the memo holds at most 16 x 4 KiB.
_MEMO_ENTRIES: Final[int] = 16
_MEMO_MAX_BYTES: Final[int] = 4096


@lru_cache(maxsize=_MEMO_ENTRIES)
def _parse_bytes(data: bytes) -> Report:
    return build_report(decode(data), Target, Device, Report)


def parse_plain(payload: bytes | str) -> Report:
    """``parse_probe_report`` into the preflight's plain records: the same
    checks in the same order, so the same refusal for the same bytes."""
    if type(payload) is bytes and len(payload) <= _MEMO_MAX_BYTES:
        return _parse_bytes(payload)
    return build_report(decode(payload), Target, Device, Report)
