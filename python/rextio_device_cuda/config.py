"""Programmatic provider configuration (the manual/test boundary).

Production Core resolution passes these inputs as redacted
``DeviceProviderOptions``; a ``CudaProviderConfig`` is for direct use and may
raise the driver and toolkit floors, never lower them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from rextio_device_cuda._provider_spec import PROVIDER_SPEC

__all__ = [
    "CUDA_DRIVER_VERSION_FLOOR",
    "CUDA_TOOLKIT_RUNTIME_VERSION_FLOOR",
    "CUDA_TOOLKIT_RUNTIME_VERSION_FLOOR_TEXT",
    "CudaProviderConfig",
]

CUDA_DRIVER_VERSION_FLOOR: Final[int] = PROVIDER_SPEC.policy.driver_version_floor
CUDA_TOOLKIT_RUNTIME_VERSION_FLOOR: Final[tuple[int, int]] = (
    PROVIDER_SPEC.policy.toolkit_version_floor
)
CUDA_TOOLKIT_RUNTIME_VERSION_FLOOR_TEXT: Final[str] = ".".join(
    str(part) for part in CUDA_TOOLKIT_RUNTIME_VERSION_FLOOR
)
_POLICY: Final = PROVIDER_SPEC.policy
_SM_PATTERN: Final = re.compile(_POLICY.sm_pattern, re.ASCII)
_SHA256_PATTERN: Final = re.compile(PROVIDER_SPEC.probe_runner.sha256_pattern, re.ASCII)


def is_probe_sha256(value: object) -> bool:
    """True for a well-formed pin: exactly 64 lowercase hexadecimal digits."""
    return isinstance(value, str) and _SHA256_PATTERN.fullmatch(value) is not None


def is_sm_name(value: object) -> bool:
    """True for an SM spelled as the provider reads it: ``sm_`` and its digits."""
    return isinstance(value, str) and _SM_PATTERN.fullmatch(value) is not None


def device_ordinal(text: str) -> int | None:
    """The device ordinal ``text`` names, or None when it names none.

    ASCII decimal digits (leading zeros allowed), at most the policy's
    largest ordinal. The provider's options, the command line and the smoke
    read an ordinal by this one rule.
    """
    if not (text.isascii() and text.isdigit()):
        return None
    significant = text.lstrip("0") or "0"
    # Bound the digits before int(): a 4096-digit value must not cost a parse.
    if len(significant) > len(str(_POLICY.device_ordinal_max)):
        return None
    value = int(significant)
    return value if value <= _POLICY.device_ordinal_max else None


def _is_int(value: object) -> bool:
    # bool is an int subclass; a flag is never a version or an ordinal.
    return type(value) is int


@dataclass(frozen=True)
class CudaProviderConfig:
    """Constructor configuration for :class:`CudaDeviceProvider`."""

    probe_path: Path | None = None
    toolkit_root: Path | None = None
    device_ordinal: int | None = None
    sm: str | None = None
    minimum_driver_version: int = CUDA_DRIVER_VERSION_FLOOR
    minimum_toolkit_version: tuple[int, int] = CUDA_TOOLKIT_RUNTIME_VERSION_FLOOR
    # Optional pin of the probe's content (64 lowercase hex digits); None: unpinned.
    probe_sha256: str | None = None

    def __post_init__(self) -> None:
        """Reject any value outside the spec's policy; never coerce."""
        for name in ("probe_path", "toolkit_root"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Path):
                raise TypeError(f"{name} must be a pathlib.Path or None")
        ordinal = self.device_ordinal
        if ordinal is not None and (
            not _is_int(ordinal) or not 0 <= ordinal <= _POLICY.device_ordinal_max
        ):
            raise ValueError(
                f"device_ordinal must be an integer from 0 to {_POLICY.device_ordinal_max}"
            )
        if self.sm is not None and not is_sm_name(self.sm):
            raise ValueError("sm must be spelled sm_NN or sm_NNN, for example sm_80")
        self._check_driver_floor()
        self._check_toolkit_floor()
        if self.probe_sha256 is not None and not is_probe_sha256(self.probe_sha256):
            raise ValueError("probe_sha256 must be exactly 64 lowercase hexadecimal digits")

    def _check_driver_floor(self) -> None:
        version = self.minimum_driver_version
        if not _is_int(version):
            raise ValueError("minimum_driver_version must be an integer")
        if version < CUDA_DRIVER_VERSION_FLOOR:
            raise ValueError(
                f"minimum_driver_version must be at or above {CUDA_DRIVER_VERSION_FLOOR}"
            )
        if version > _POLICY.driver_version_ceiling:
            raise ValueError(
                f"minimum_driver_version must be at most {_POLICY.driver_version_ceiling}"
            )

    def _check_toolkit_floor(self) -> None:
        version = self.minimum_toolkit_version
        part_max = _POLICY.toolkit_version_part_max
        if (
            not isinstance(version, tuple)
            or len(version) != 2
            or not all(_is_int(part) and 0 <= part <= part_max for part in version)
        ):
            raise ValueError(
                "minimum_toolkit_version must be a (major, minor) tuple of integers "
                f"from 0 to {part_max}"
            )
        if version < CUDA_TOOLKIT_RUNTIME_VERSION_FLOOR:
            raise ValueError(
                "minimum_toolkit_version must be at or above "
                f"{CUDA_TOOLKIT_RUNTIME_VERSION_FLOOR_TEXT}"
            )
