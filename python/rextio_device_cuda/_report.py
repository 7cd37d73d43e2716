"""Probe report schema 1: the public records, which validate themselves, and the parser.

Records reject invalid values whether parsed or constructed directly; every
refusal is a ``CudaProbeError`` with ``PROBE_SCHEMA_INVALID``. The parser adds
``PROBE_OUTPUT_INVALID`` for bytes that are not a bounded UTF-8 JSON text.
The checks and the parser are ``_probe_schema``'s, shared with the plain
records a preflight parses into: this module (its dataclasses) loads only
when one of its public names is used.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar, Final

from rextio_device_cuda import _codes, _probe_schema
from rextio_device_cuda._errors import CudaProbeError
from rextio_device_cuda._provider_spec import PROVIDER_SPEC

MAX_OUTPUT_BYTES: Final[int] = _probe_schema.MAX_OUTPUT_BYTES


@dataclass(frozen=True)
class ProbeTarget:
    """The (os, arch, environment) a probe says it was built for."""

    os: str
    arch: str
    environment: str

    def __post_init__(self) -> None:
        """Each field is 1..=32 ASCII alphanumerics, ``_`` or ``-``."""
        _probe_schema.check_target(self)


def expected_probe_target(target_triple: str) -> ProbeTarget:
    """The probe target a capability's triple requires (``UNSUPPORTED_TARGET`` otherwise)."""
    targets = PROVIDER_SPEC.probe_targets
    spec = targets.get(target_triple) if isinstance(target_triple, str) else None
    if spec is None:
        raise CudaProbeError(_codes.UNSUPPORTED_TARGET)
    return ProbeTarget(os=spec.os, arch=spec.arch, environment=spec.environment)


@dataclass(frozen=True)
class CudaDeviceRecord:
    """One device row of a probe report."""

    ordinal: int
    name: str
    compute_major: int
    compute_minor: int
    sm: str

    def __post_init__(self) -> None:
        """Validate the row exactly as the parser does."""
        _probe_schema.check_device(self)


@dataclass(frozen=True)
class CudaProbeReport:
    """A schema-1 probe report; ``support_claim`` is always false.

    ``schema_version``, ``probe`` and ``support_claim`` are constants of the
    JSON wire format (the parser checks them), not constructor fields: the
    fields and their order are 0.1.0's.
    """

    schema_version: ClassVar[str] = _probe_schema.SCHEMA_VERSION
    probe: ClassVar[str] = _probe_schema.PROBE_NAME
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

    def __post_init__(self) -> None:
        """Validate every field and the cross-field rules of schema 1."""
        _probe_schema.check_report(self, ProbeTarget, CudaDeviceRecord)


def _field_names(record: type) -> tuple[str, ...]:
    return tuple(item.name for item in fields(record))


# Schema 1's key sets: the wire constants, then the records' fields, in the
# order the probe prints them.
ROOT_KEYS: Final[tuple[str, ...]] = _probe_schema.ROOT_KEYS
TARGET_KEYS: Final[tuple[str, ...]] = _field_names(ProbeTarget)
DEVICE_KEYS: Final[tuple[str, ...]] = _field_names(CudaDeviceRecord)
# The parser builds these records by the schema's field names: they must be
# the same names in the same order (a mismatch fails the import, not a parse).
if (
    (*_probe_schema.WIRE_CONSTANTS, *_field_names(CudaProbeReport)) != ROOT_KEYS
    or TARGET_KEYS != _probe_schema.TARGET_FIELDS
    or DEVICE_KEYS != _probe_schema.DEVICE_FIELDS
    or {
        "schema_version": CudaProbeReport.schema_version,
        "probe": CudaProbeReport.probe,
        "support_claim": CudaProbeReport.support_claim,
    }
    != _probe_schema.WIRE_CONSTANTS
):  # pragma: no cover - a programming error
    raise RuntimeError("the probe report records and the schema's field names differ")


def report_from_json(value: object) -> CudaProbeReport:
    """Build a report from decoded JSON, enforcing the exact key sets."""
    return _probe_schema.build_report(value, ProbeTarget, CudaDeviceRecord, CudaProbeReport)


def parse_probe_report(payload: bytes | str) -> CudaProbeReport:
    """Parse probe stdout into a validated report, or raise ``CudaProbeError``."""
    return report_from_json(_probe_schema.decode(payload))
