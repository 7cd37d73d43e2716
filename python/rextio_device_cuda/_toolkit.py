"""Inspecting an explicitly configured CUDA toolkit root (never discovered).

Every file is opened without following a final symlink and without blocking
(``O_NOFOLLOW | O_NONBLOCK``), then checked through the open descriptor: a
FIFO or device swapped in for ``version.json`` or a component is refused, it
can never make preflight wait.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from rextio_device_cuda import _codes
from rextio_device_cuda._errors import CudaProbeError, os_error_text
from rextio_device_cuda._provider_spec import PROVIDER_SPEC
from rextio_device_cuda._sealed import file_kind

_VERSION_FILE: Final[str] = PROVIDER_SPEC.toolkit.version_file
_MAX_VERSION_FILE_BYTES: Final[int] = PROVIDER_SPEC.toolkit.max_version_file_bytes
# Patterns, compiled (and cached by `re`) on first use: importing this module
# for its public inspector compiles nothing.
_VERSION_PATTERN: Final[str] = PROVIDER_SPEC.toolkit.version_pattern
_COMPONENTS: Final[Mapping[str, Mapping[str, tuple[str, ...]]]] = PROVIDER_SPEC.toolkit.components
# A component name in a toolkit report.
_COMPONENT_NAME: Final[str] = r"[A-Za-z0-9._-]{1,64}"
# getattr: Windows has neither flag (and no FIFOs to block on).
_OPEN_FLAGS: Final[int] = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


def toolkit_version_tuple(version: str) -> tuple[int, int, int]:
    """(major, minor, patch) of a toolkit version; patch 0 when absent."""
    if not isinstance(version, str) or re.fullmatch(_VERSION_PATTERN, version, re.ASCII) is None:
        raise CudaProbeError(
            _codes.TOOLKIT_VERSION_INVALID,
            facts=f"a toolkit version is {_not_a_version(version)}",
        )
    parts = [int(part) for part in version.split(".")]
    return parts[0], parts[1], parts[2] if len(parts) == 3 else 0


def _not_a_version(value: object) -> str:
    # Never the value itself: a version file can hold any text, a path included.
    if isinstance(value, str):
        return "a string that is not MAJOR.MINOR or MAJOR.MINOR.PATCH"
    return f"a JSON {_json_kind(value)}, not a string"


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def toolkit_version_parts(version: str) -> tuple[int, int]:
    """(major, minor) of a validated toolkit version string."""
    major, minor, _patch = toolkit_version_tuple(version)
    return major, minor


def expected_components(target_triple: str) -> dict[str, tuple[str, ...]]:
    """Component name -> candidate relative paths for a target, sorted by name."""
    target = PROVIDER_SPEC.probe_targets.get(target_triple)
    if target is None or target.os not in _COMPONENTS:
        raise CudaProbeError(_codes.UNSUPPORTED_TARGET)
    return {
        name: tuple(candidate.format(arch=target.arch) for candidate in candidates)
        for name, candidates in sorted(_COMPONENTS[target.os].items())
    }


def _is_component_tuple(components: object) -> bool:
    return (
        isinstance(components, tuple)
        and len(components) > 0
        and all(
            isinstance(item, str) and re.fullmatch(_COMPONENT_NAME, item, re.ASCII) is not None
            for item in components
        )
        and list(components) == sorted(set(components))
    )


@dataclass(frozen=True)
class CudaToolkitReport:
    """What an inspected toolkit provides: its version, runtime version and components.

    Construction validates, raising in this order: ``TOOLKIT_VERSION_INVALID``,
    ``TOOLKIT_RUNTIME_VERSION_MISMATCH``, ``TOOLKIT_VERSION_TOO_OLD``,
    ``TOOLKIT_COMPONENT_INVALID``.
    """

    version: str
    runtime_version: str
    components: tuple[str, ...]

    def __post_init__(self) -> None:
        """Validate exactly as inspection does, in the same order."""
        toolkit = toolkit_version_tuple(self.version)
        if toolkit != toolkit_version_tuple(self.runtime_version):
            raise CudaProbeError(
                _codes.TOOLKIT_RUNTIME_VERSION_MISMATCH,
                facts=f"the toolkit is {self.version}, its runtime {self.runtime_version}",
            )
        floor = PROVIDER_SPEC.policy.toolkit_version_floor
        if toolkit[:2] < floor:
            raise CudaProbeError(
                _codes.TOOLKIT_VERSION_TOO_OLD,
                facts=f"toolkit {self.version} is older than {floor[0]}.{floor[1]}, "
                "the oldest this provider accepts",
            )
        if not _is_component_tuple(self.components):
            raise CudaProbeError(
                _codes.TOOLKIT_COMPONENT_INVALID,
                facts="the toolkit's components are not a sorted tuple of distinct names",
            )

    @property
    def version_tuple(self) -> tuple[int, int, int]:
        """The toolkit version as (major, minor, patch)."""
        return toolkit_version_tuple(self.version)

    @property
    def runtime_version_tuple(self) -> tuple[int, int, int]:
        """The runtime version as (major, minor, patch)."""
        return toolkit_version_tuple(self.runtime_version)


def _open_regular_file(path: Path) -> int | None:
    """A descriptor for ``path`` if it is a regular file, else None; never blocks.

    ``path`` is already resolved: a symlink swapped in after resolution fails
    the open (``O_NOFOLLOW``) instead of being followed.
    """
    try:
        descriptor = os.open(path, _OPEN_FLAGS)
    except (OSError, ValueError):
        return None
    try:
        if stat.S_ISREG(os.fstat(descriptor).st_mode):
            return descriptor
    except OSError:
        pass
    os.close(descriptor)
    return None


def _resolved_inside(root: Path, candidate: Path) -> Path | None:
    # RuntimeError: a symlink loop; ValueError: an embedded NUL.
    try:
        resolved = candidate.resolve(strict=True)
    except (OSError, RuntimeError, ValueError):
        return None
    return resolved if resolved.is_relative_to(root) else None


def _read_bounded(descriptor: int) -> bytes:
    """At most one byte more than the version file bound."""
    chunks: list[bytes] = []
    remaining = _MAX_VERSION_FILE_BYTES + 1
    while remaining > 0:
        chunk = os.read(descriptor, remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _version_file_facts(root: Path) -> str:
    """Why ``version.json`` could not be opened as a regular file inside ``root``."""
    candidate = root / _VERSION_FILE
    try:
        status = candidate.lstat()
    except (OSError, ValueError):
        return f"the toolkit root has no {_VERSION_FILE}"
    if _resolved_inside(root, candidate) is None:
        if stat.S_ISLNK(status.st_mode):
            return f"{_VERSION_FILE} is a link that leads outside the toolkit root or nowhere"
        return f"{_VERSION_FILE} could not be resolved"
    try:
        mode = candidate.stat().st_mode
    except (OSError, ValueError):
        return f"{_VERSION_FILE} could not be examined"
    if stat.S_ISREG(mode):
        return f"{_VERSION_FILE} could not be opened"
    return f"{_VERSION_FILE} is {_sealed_kind(mode)}, not a regular file"


def _sealed_kind(mode: int) -> str:
    return file_kind(mode)


def _read_version(root: Path) -> str:
    resolved = _resolved_inside(root, root / _VERSION_FILE)
    descriptor = _open_regular_file(resolved) if resolved is not None else None
    if descriptor is None:
        raise CudaProbeError(
            _codes.TOOLKIT_VERSION_UNAVAILABLE, facts=_version_file_facts(root)
        )
    try:
        data = _read_bounded(descriptor)
    except OSError as error:
        raise CudaProbeError(
            _codes.TOOLKIT_VERSION_UNAVAILABLE,
            facts=f"reading {_VERSION_FILE} failed with {os_error_text(error)}",
        ) from error
    finally:
        os.close(descriptor)
    if len(data) > _MAX_VERSION_FILE_BYTES:
        raise CudaProbeError(
            _codes.TOOLKIT_VERSION_INVALID,
            "version file too large",
            facts=f"{_VERSION_FILE} is larger than {_MAX_VERSION_FILE_BYTES:,} bytes",
        )
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise CudaProbeError(
            _codes.TOOLKIT_VERSION_UNAVAILABLE,
            facts=f"{_VERSION_FILE} is not a UTF-8 JSON document",
        ) from error
    cuda = document.get("cuda") if isinstance(document, dict) else None
    if not isinstance(cuda, dict) or "version" not in cuda:
        raise CudaProbeError(
            _codes.TOOLKIT_VERSION_UNAVAILABLE, facts=f"{_VERSION_FILE} has no cuda.version"
        )
    # Present but not a matching string (a number, null, "12.4.1234"): invalid.
    version = cuda["version"]
    if not isinstance(version, str) or re.fullmatch(_VERSION_PATTERN, version, re.ASCII) is None:
        raise CudaProbeError(
            _codes.TOOLKIT_VERSION_INVALID,
            facts=f"{_VERSION_FILE}'s cuda.version is {_not_a_version(version)}",
        )
    return version


def _candidates(root: Path, pattern: str) -> list[Path]:
    if "*" not in pattern:
        return [root / pattern]
    try:
        return sorted(root.glob(pattern))
    except OSError:  # e.g. an unreadable directory on the way
        return []


def _is_regular_file_inside(root: Path, candidate: Path) -> bool:
    resolved = _resolved_inside(root, candidate)
    descriptor = _open_regular_file(resolved) if resolved is not None else None
    if descriptor is None:
        return False
    os.close(descriptor)
    return True


def _root_facts(error: Exception) -> str:
    if isinstance(error, OSError):
        return f"resolving the configured toolkit root failed with {os_error_text(error)}"
    if isinstance(error, ValueError):
        return "the configured toolkit root holds a NUL character"
    return "the configured toolkit root's links form a loop"


class FilesystemToolkitInspector:
    """Validates one explicit toolkit root for a raw-driver target."""

    def __init__(self, root: Path) -> None:
        if not isinstance(root, Path):
            raise TypeError("root must be a pathlib.Path")
        self._root = root

    def inspect(self, target_triple: str) -> CudaToolkitReport:
        """Read the toolkit version and check its components for a target.

        A component is present when one of its candidate paths resolves to a
        regular file inside the resolved root; one that is missing, a
        directory, a FIFO or outside the root is ``TOOLKIT_COMPONENT_MISSING``.
        """
        if not self._root.is_absolute():
            raise CudaProbeError(
                _codes.TOOLKIT_PATH_NOT_ABSOLUTE, facts="the configured toolkit root is relative"
            )
        try:
            root = self._root.resolve(strict=True)
            is_directory = root.is_dir()
        # RuntimeError: a symlink loop; ValueError: an embedded NUL.
        except (OSError, RuntimeError, ValueError) as error:
            raise CudaProbeError(_codes.TOOLKIT_NOT_FOUND, facts=_root_facts(error)) from error
        if not is_directory:
            raise CudaProbeError(
                _codes.TOOLKIT_NOT_FOUND, facts="the configured toolkit root is not a directory"
            )
        version = _read_version(root)
        found: list[str] = []
        for name, patterns in expected_components(target_triple).items():
            if not any(
                _is_regular_file_inside(root, candidate)
                for pattern in patterns
                for candidate in _candidates(root, pattern)
            ):
                raise CudaProbeError(
                    _codes.TOOLKIT_COMPONENT_MISSING,
                    name,
                    facts=f"toolkit component {name} is missing: no candidate of it is a "
                    "regular file inside the toolkit root",
                )
            found.append(name)
        return CudaToolkitReport(
            version=version, runtime_version=version, components=tuple(found)
        )
