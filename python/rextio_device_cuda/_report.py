"""Probe report schema 1: the public records, which validate themselves, and the parser.

Records reject invalid values whether parsed or constructed directly; every
refusal is a ``CudaProbeError`` with ``PROBE_SCHEMA_INVALID``. The parser adds
``PROBE_OUTPUT_INVALID`` for bytes that are not a bounded UTF-8 JSON text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any, ClassVar, Final

from rextio_device_cuda import _codes
from rextio_device_cuda._errors import CudaProbeError, is_path_free, is_reason_code
from rextio_device_cuda._provider_spec import PROVIDER_SPEC

_REPORT: Final = PROVIDER_SPEC.probe_report
MAX_OUTPUT_BYTES: Final[int] = _REPORT.max_output_bytes
_TARGET_FIELD: Final = re.compile(_REPORT.target_field_pattern, re.ASCII)
_STATUS: Final = _REPORT.statuses
_STATUSES: Final[frozenset[str]] = frozenset(
    (_STATUS.complete, _STATUS.unavailable, _STATUS.unsupported, _STATUS.error)
)
_COMPLETE: Final[str] = _STATUS.complete
_MAX_DEVICES: Final[int] = _REPORT.max_devices
_INT32: Final = (-(2**31), 2**31 - 1)
_DEVICE_COUNT_RANGE: Final[tuple[int, int]] = (0, _MAX_DEVICES)
_ORDINAL_RANGE: Final[tuple[int, int]] = (0, _REPORT.max_device_ordinal)
_MAX_NAME_CHARS: Final[int] = _REPORT.max_device_name_chars
_MAX_REASON_CHARS: Final[int] = _REPORT.max_loader_reason_chars
_DRIVER_RANGE: Final[tuple[int, int]] = _REPORT.driver_version_range
_MAJOR_RANGE: Final[tuple[int, int]] = _REPORT.compute_major_range
_MINOR_RANGE: Final[tuple[int, int]] = _REPORT.compute_minor_range
# A loader rule's name (``mode``, ``writable-directory``): never a path.
_RULE_NAME: Final = re.compile(r"[a-z][a-z-]{0,31}", re.ASCII)
# Unicode category Cc, the set the probe strips (Rust's char::is_control).
_CONTROL_CHARACTER: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")


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
    return PurePosixPath(text).is_absolute() or PureWindowsPath(text).is_absolute()


@dataclass(frozen=True, slots=True)
class ProbeTarget:
    """The (os, arch, environment) a probe says it was built for."""

    os: str
    arch: str
    environment: str

    def __post_init__(self) -> None:
        """Each field is 1..=32 ASCII alphanumerics, ``_`` or ``-``."""
        fields = (("os", self.os), ("arch", self.arch), ("environment", self.environment))
        for name, value in fields:
            if not isinstance(value, str) or _TARGET_FIELD.fullmatch(value) is None:
                raise schema_error(f"target.{name} is malformed")


def expected_probe_target(target_triple: str) -> ProbeTarget:
    """The probe target a capability's triple requires (``UNSUPPORTED_TARGET`` otherwise)."""
    targets = PROVIDER_SPEC.probe_targets
    spec = targets.get(target_triple) if isinstance(target_triple, str) else None
    if spec is None:
        raise CudaProbeError(_codes.UNSUPPORTED_TARGET)
    return ProbeTarget(os=spec.os, arch=spec.arch, environment=spec.environment)


@dataclass(frozen=True, slots=True)
class CudaDeviceRecord:
    """One device row of a probe report."""

    ordinal: int
    name: str
    compute_major: int
    compute_minor: int
    sm: str

    def __post_init__(self) -> None:
        """Validate the row exactly as the parser does."""
        _require(_is_int_in(self.ordinal, _ORDINAL_RANGE), "device ordinal out of range")
        _require(_is_device_name(self.name), "device name is malformed")
        _require(_is_int_in(self.compute_major, _MAJOR_RANGE), "compute_major out of range")
        _require(_is_int_in(self.compute_minor, _MINOR_RANGE), "compute_minor out of range")
        _require(
            self.sm == f"sm_{self.compute_major}{self.compute_minor}",
            "sm does not match the compute capability",
        )


def _is_loader_reason(reason: object) -> bool:
    return (
        isinstance(reason, str)
        and 1 <= len(reason) <= _MAX_REASON_CHARS
        and _CONTROL_CHARACTER.search(reason) is None
        and _is_valid_unicode(reason)
        and is_path_free(reason)
    )


def _is_device_name(name: object) -> bool:
    return (
        isinstance(name, str)
        and 1 <= len(name) <= _MAX_NAME_CHARS
        and _CONTROL_CHARACTER.search(name) is None
        and _is_valid_unicode(name)
        and not _is_absolute_path(name)
    )


@dataclass(frozen=True, slots=True)
class CudaProbeReport:
    """A schema-1 probe report; ``support_claim`` is always false.

    ``schema_version``, ``probe`` and ``support_claim`` are constants of the
    JSON wire format (the parser checks them), not constructor fields: the
    fields and their order are 0.1.0's; ``refusing_rule`` came after them in
    0.2.0: the loader rule that refused the first driver image found (a rule
    name such as ``mode``, on an incomplete report only), and
    ``loader_reason``: the dynamic loader's own reason for an image that
    passed review but did not load (path-free, at most
    ``max_loader_reason_chars``, with ``LIBCUDA_SO_LOAD_FAILED`` only); each
    absent from the JSON when None, as every report of a 0.1.0 probe is.
    """

    schema_version: ClassVar[str] = _REPORT.schema_version
    probe: ClassVar[str] = _REPORT.probe
    support_claim: ClassVar[bool] = False

    target: ProbeTarget
    platform_supported: bool
    status: str
    reason_code: str | None
    driver_loaded: bool
    driver_version: int | None
    device_count: int | None
    cuda_result: int | None
    devices: tuple[CudaDeviceRecord, ...]
    refusing_rule: str | None = None
    loader_reason: str | None = None

    def __post_init__(self) -> None:
        """Validate every field, then the cross-field rules of schema 1."""
        _require(isinstance(self.target, ProbeTarget), "target")
        _require(type(self.platform_supported) is bool, "platform_supported")
        _require(isinstance(self.status, str) and self.status in _STATUSES, "status")
        _require(self.reason_code is None or is_reason_code(self.reason_code), "reason_code")
        _require(type(self.driver_loaded) is bool, "driver_loaded")
        _require(
            self.driver_version is None or _is_int_in(self.driver_version, _DRIVER_RANGE),
            "driver_version",
        )
        _require(
            self.device_count is None or _is_int_in(self.device_count, _DEVICE_COUNT_RANGE),
            "device_count",
        )
        _require(self.cuda_result is None or _is_int_in(self.cuda_result, _INT32), "cuda_result")
        devices = self.devices
        _require(
            isinstance(devices, tuple)
            and len(devices) <= _MAX_DEVICES
            and all(isinstance(row, CudaDeviceRecord) for row in devices),
            "devices",
        )
        _require(
            all(row.ordinal == index for index, row in enumerate(devices)),
            "device ordinal differs from its index",
        )
        _require(
            self.refusing_rule is None
            or (
                isinstance(self.refusing_rule, str)
                and _RULE_NAME.fullmatch(self.refusing_rule) is not None
            ),
            "refusing_rule",
        )
        _require(
            self.loader_reason is None
            or (
                self.reason_code == _codes.LIBCUDA_SO_LOAD_FAILED
                and _is_loader_reason(self.loader_reason)
            ),
            "loader_reason",
        )
        if self.status == _COMPLETE:
            self._check_complete()
        else:
            _require(
                self.reason_code is not None and not devices and self.device_count in (None, 0),
                "an incomplete report is inconsistent",
            )

    def _check_complete(self) -> None:
        _require(
            self.reason_code is None
            and self.platform_supported
            and self.driver_loaded
            and self.driver_version is not None
            and self.device_count is not None
            and self.device_count >= 1
            and self.device_count == len(self.devices)
            and self.cuda_result == 0
            and self.refusing_rule is None,
            "a complete report is inconsistent",
        )


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


def _exact_object(
    value: object, keys: frozenset[str], label: str, may_lack: frozenset[str] = frozenset()
) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise schema_error(f"{label} is not an object")
    _require(value.keys() | may_lack == keys, f"{label} keys differ from schema 1")
    return value




def _decode(payload: bytes | str) -> object:
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


# Schema 1's key sets, from the spec; the wire constants are the report's
# keys that are not constructor fields.
_FIELDS: Final = _REPORT.fields
_ROOT_KEYS: Final = frozenset(field.key for field in _FIELDS.report)
_KEYS_IF_SET: Final = frozenset(
    field.key for field in _FIELDS.report if field.kind in ("name_if_set", "text_if_set")
)
_TARGET_KEYS: Final = frozenset(field.key for field in _FIELDS.target)
_DEVICE_KEYS: Final = frozenset(field.key for field in _FIELDS.device)
_WIRE_CONSTANTS: Final[dict[str, object]] = {
    "schema_version": CudaProbeReport.schema_version,
    "probe": CudaProbeReport.probe,
    "support_claim": CudaProbeReport.support_claim,
}
# The keys passed on as they are (the records check their values); a key
# of kind name_if_set is left out when unset, as every 0.1.0 report has it.
_PLAIN_KEYS: Final = _ROOT_KEYS - _WIRE_CONSTANTS.keys() - {"target", "devices"}
# One decoder for every parse; it keeps no state between documents.
_DECODER: Final = json.JSONDecoder(
    object_pairs_hook=_unique_object, parse_constant=_reject_constant, parse_int=_bounded_int
)


def report_from_json(value: object) -> CudaProbeReport:
    """Build a report from decoded JSON, enforcing the exact key sets; the
    records check their values."""
    root = _exact_object(value, _ROOT_KEYS, "report", may_lack=_KEYS_IF_SET)
    # The probe leaves such a key out rather than writing null.
    _require(all(root[key] is not None for key in _KEYS_IF_SET & root.keys()), "null key")
    target = _exact_object(root["target"], _TARGET_KEYS, "target")
    for key, constant in _WIRE_CONSTANTS.items():
        found = root[key]
        # type() first: False == 0 in Python, and "1" is not 1.
        _require(type(found) is type(constant) and found == constant, key)
    devices = root["devices"]
    _require(isinstance(devices, list) and len(devices) <= _MAX_DEVICES, "devices")
    return CudaProbeReport(
        target=ProbeTarget(**target),
        devices=tuple(
            CudaDeviceRecord(**_exact_object(row, _DEVICE_KEYS, "device")) for row in devices
        ),
        **{key: root[key] for key in _PLAIN_KEYS & root.keys()},
    )


def parse_probe_report(payload: bytes | str) -> CudaProbeReport:
    """Parse probe stdout into a validated report, or raise ``CudaProbeError``."""
    return report_from_json(_decode(payload))
