"""Inspecting an explicitly configured CUDA toolkit root (never discovered)."""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from rextio_device_cuda import _codes
from rextio_device_cuda._errors import CudaProbeError
from rextio_device_cuda._provider_spec import PROVIDER_SPEC

_VERSION_FILE: Final[str] = PROVIDER_SPEC.toolkit.version_file
_MAX_VERSION_FILE_BYTES: Final[int] = PROVIDER_SPEC.toolkit.max_version_file_bytes
_VERSION_PATTERN: Final = re.compile(PROVIDER_SPEC.toolkit.version_pattern, re.ASCII)
_COMPONENTS: Final[Mapping[str, Mapping[str, tuple[str, ...]]]] = PROVIDER_SPEC.toolkit.components


def toolkit_version_parts(version: str) -> tuple[int, int]:
    """(major, minor) of a validated toolkit version string."""
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def expected_components(target_triple: str) -> dict[str, tuple[str, ...]]:
    """Component name -> candidate relative paths for a target, sorted by name."""
    target = PROVIDER_SPEC.probe_targets.get(target_triple)
    if target is None or target.os not in _COMPONENTS:
        raise CudaProbeError(_codes.UNSUPPORTED_TARGET)
    return {
        name: tuple(candidate.format(arch=target.arch) for candidate in candidates)
        for name, candidates in sorted(_COMPONENTS[target.os].items())
    }


@dataclass(frozen=True)
class CudaToolkitReport:
    """What an inspected toolkit provides: one version and its components."""

    target_triple: str
    toolkit_version: str
    runtime_version: str
    components: tuple[str, ...]

    def __post_init__(self) -> None:
        """Versions are bounded dotted numbers; components a sorted tuple of names."""
        for name in ("toolkit_version", "runtime_version"):
            value = getattr(self, name)
            if not isinstance(value, str) or _VERSION_PATTERN.fullmatch(value) is None:
                raise CudaProbeError(_codes.TOOLKIT_VERSION_INVALID, name)
        if not isinstance(self.target_triple, str):
            raise CudaProbeError(_codes.UNSUPPORTED_TARGET)
        if (
            not isinstance(self.components, tuple)
            or not all(isinstance(item, str) for item in self.components)
            or list(self.components) != sorted(set(self.components))
        ):
            raise CudaProbeError(_codes.TOOLKIT_COMPONENT_INVALID)


def _read_version(root: Path) -> str:
    candidate = root / _VERSION_FILE
    try:
        resolved = candidate.resolve(strict=True)
        if not resolved.is_relative_to(root) or not stat.S_ISREG(resolved.stat().st_mode):
            raise CudaProbeError(_codes.TOOLKIT_VERSION_UNAVAILABLE)
        with resolved.open("rb") as handle:
            data = handle.read(_MAX_VERSION_FILE_BYTES + 1)
    except (OSError, RuntimeError, ValueError) as error:
        raise CudaProbeError(_codes.TOOLKIT_VERSION_UNAVAILABLE) from error
    if len(data) > _MAX_VERSION_FILE_BYTES:
        raise CudaProbeError(_codes.TOOLKIT_VERSION_INVALID, "version file too large")
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise CudaProbeError(_codes.TOOLKIT_VERSION_UNAVAILABLE) from error
    cuda = document.get("cuda") if isinstance(document, dict) else None
    version = cuda.get("version") if isinstance(cuda, dict) else None
    if not isinstance(version, str):
        raise CudaProbeError(_codes.TOOLKIT_VERSION_UNAVAILABLE)
    if _VERSION_PATTERN.fullmatch(version) is None:
        raise CudaProbeError(_codes.TOOLKIT_VERSION_INVALID)
    return version


def _existing_candidate(root: Path, pattern: str) -> Path | None:
    try:
        if "*" in pattern:
            matches = sorted(root.glob(pattern))
            return matches[0] if matches else None
        candidate = root / pattern
        # lexists: a dangling link is present but invalid, not missing.
        return candidate if candidate.is_symlink() or candidate.exists() else None
    except OSError as error:  # e.g. an unreadable directory on the way
        raise CudaProbeError(_codes.TOOLKIT_COMPONENT_INVALID) from error


def _check_component(root: Path, candidate: Path) -> None:
    try:
        resolved = candidate.resolve(strict=True)
        is_regular = stat.S_ISREG(resolved.stat().st_mode)
    except (OSError, RuntimeError, ValueError) as error:
        raise CudaProbeError(_codes.TOOLKIT_COMPONENT_INVALID) from error
    if not is_regular or not resolved.is_relative_to(root):
        raise CudaProbeError(_codes.TOOLKIT_COMPONENT_INVALID)


class FilesystemToolkitInspector:
    """Validates one explicit toolkit root for a raw-driver target."""

    def __init__(self, root: Path) -> None:
        if not isinstance(root, Path):
            raise TypeError("root must be a pathlib.Path")
        self._root = root

    def inspect(self, target_triple: str) -> CudaToolkitReport:
        """Read the toolkit version and check its components for a target."""
        if not self._root.is_absolute():
            raise CudaProbeError(_codes.TOOLKIT_PATH_NOT_ABSOLUTE)
        try:
            root = self._root.resolve(strict=True)
            is_directory = root.is_dir()
        # RuntimeError: a symlink loop; ValueError: an embedded NUL.
        except (OSError, RuntimeError, ValueError) as error:
            raise CudaProbeError(_codes.TOOLKIT_NOT_FOUND) from error
        if not is_directory:
            raise CudaProbeError(_codes.TOOLKIT_NOT_FOUND)
        version = _read_version(root)
        components = expected_components(target_triple)
        found: list[str] = []
        for name, patterns in components.items():
            candidate = next(
                (
                    path
                    for pattern in patterns
                    if (path := _existing_candidate(root, pattern)) is not None
                ),
                None,
            )
            if candidate is None:
                raise CudaProbeError(_codes.TOOLKIT_COMPONENT_MISSING, name)
            _check_component(root, candidate)
            found.append(name)
        return CudaToolkitReport(
            target_triple=target_triple,
            toolkit_version=version,
            runtime_version=version,
            components=tuple(found),
        )
