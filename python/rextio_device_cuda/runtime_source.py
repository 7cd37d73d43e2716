"""The packaged Rust runtime source and its safe extraction into a project.

The tarball's SHA-256 is checked against the generated digest before use.
Extraction accepts only regular files and directories under the archive's one
top folder, writes into a temporary sibling and renames it into place, so a
failure never leaves a half-written tree and nothing is written elsewhere.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import stat
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import Final

from rextio_device_cuda import _generated
from rextio_device_cuda._provider_spec import PROVIDER_SPEC

__all__ = [
    "RuntimeSourceError",
    "install_runtime_source",
    "packaged_archive_path",
    "read_runtime_archive",
]

# Bounds against a hostile or corrupted archive (the genuine one is tiny).
_MAX_ARCHIVE_BYTES: Final[int] = 16 * 1024 * 1024
_MAX_EXTRACTED_BYTES: Final[int] = 64 * 1024 * 1024
_MAX_MEMBERS: Final[int] = 4096
INSTALL_DIR: Final[PurePosixPath] = PurePosixPath(PROVIDER_SPEC.runtime_package.install_dir)
# The one folder the archive holds, `<crate>-<version>`.
ARCHIVE_TOP_FOLDER: Final[str] = (
    f"{PROVIDER_SPEC.runtime_package.crate_name}-{PROVIDER_SPEC.runtime_package.version}"
)


class RuntimeSourceError(Exception):
    """The runtime source cannot be verified or installed; nothing was written."""


def packaged_archive_path() -> Path:
    """Where the wheel carries the runtime source tarball."""
    return Path(__file__).resolve().parent / "_data" / _generated.RUNTIME_SOURCE_ARCHIVE


def read_runtime_archive(path: Path | None = None) -> bytes:
    """The archive bytes, verified against the generated SHA-256."""
    source = packaged_archive_path() if path is None else path
    try:
        with source.open("rb") as handle:
            data = handle.read(_MAX_ARCHIVE_BYTES + 1)
    except OSError as error:
        raise RuntimeSourceError("the packaged runtime source archive is missing") from error
    if len(data) > _MAX_ARCHIVE_BYTES:
        raise RuntimeSourceError("the runtime source archive is too large")
    if hashlib.sha256(data).hexdigest() != _generated.RUNTIME_SOURCE_SHA256:
        raise RuntimeSourceError(
            "the runtime source archive does not match its recorded SHA-256"
        )
    return data


def _relative_member_path(name: str) -> PurePosixPath | None:
    """The path below the top folder; None for the top folder itself."""
    if "\\" in name or "\0" in name:
        raise RuntimeSourceError("the archive holds a name with a backslash or NUL")
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or "." in name.split("/")[:-1]:
        raise RuntimeSourceError("the archive holds an absolute or escaping name")
    parts = path.parts
    if not parts or parts[0] != ARCHIVE_TOP_FOLDER:
        raise RuntimeSourceError("the archive holds a name outside its top folder")
    if len(parts) == 1:
        return None
    return PurePosixPath(*parts[1:])


def _extract_into(data: bytes, destination: Path) -> None:
    seen: set[PurePosixPath] = set()
    total = 0
    try:
        archive = tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")  # noqa: SIM115
    except (tarfile.TarError, OSError, EOFError) as error:
        raise RuntimeSourceError("the runtime source archive is not a gzip tarball") from error
    with archive:
        members = 0
        for member in archive:
            members += 1
            if members > _MAX_MEMBERS:
                raise RuntimeSourceError("the archive holds too many entries")
            relative = _relative_member_path(member.name)
            if not (member.isreg() or member.isdir()):
                raise RuntimeSourceError("the archive holds a link, device or other special entry")
            if relative is None:
                if not member.isdir():
                    raise RuntimeSourceError("the archive's top folder is not a directory")
                continue
            if relative in seen:
                raise RuntimeSourceError("the archive holds a duplicate name")
            seen.add(relative)
            target = destination.joinpath(*relative.parts)
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            total += member.size
            if total > _MAX_EXTRACTED_BYTES:
                raise RuntimeSourceError("the archive expands beyond its size bound")
            target.parent.mkdir(parents=True, exist_ok=True)
            extracted = archive.extractfile(member)
            if extracted is None:
                raise RuntimeSourceError("an archive file could not be read")
            mode = 0o755 if member.mode & 0o111 else 0o644
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            with extracted, os.fdopen(os.open(target, flags, mode), "wb") as output:
                shutil.copyfileobj(extracted, output)
            # The umask must not make the installed tree differ between machines.
            os.chmod(target, mode)


def _tree_snapshot(root: Path) -> dict[str, bytes | None] | None:
    """Relative path -> bytes (None for a directory); None when not a plain tree."""
    snapshot: dict[str, bytes | None] = {}
    for directory, names, files in os.walk(root, followlinks=False):
        base = Path(directory)
        for name in [*names, *files]:
            path = base / name
            mode = path.lstat().st_mode
            relative = path.relative_to(root).as_posix()
            if stat.S_ISDIR(mode):
                snapshot[relative] = None
            elif stat.S_ISREG(mode):
                snapshot[relative] = path.read_bytes()
            else:
                return None
    return snapshot


def _real_directory(path: Path, created: list[Path]) -> None:
    """Create ``path`` as a directory, refusing links that would lead elsewhere."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        path.mkdir()
        created.append(path)
        return
    if not stat.S_ISDIR(mode):
        raise RuntimeSourceError(f"{path.name} exists and is not a plain directory")


def install_runtime_source(project_dir: Path, *, archive: Path | None = None) -> bool:
    """Extract the runtime source into ``project_dir``; False when already identical."""
    if not isinstance(project_dir, Path):
        raise TypeError("project_dir must be a pathlib.Path")
    data = read_runtime_archive(archive)
    if not project_dir.is_dir():
        raise RuntimeSourceError("the project directory does not exist")
    created: list[Path] = []
    installed = False
    staging: Path | None = None
    try:
        parent = project_dir
        for part in INSTALL_DIR.parts[:-1]:
            parent = parent / part
            _real_directory(parent, created)
        final = parent / INSTALL_DIR.parts[-1]
        staging = Path(tempfile.mkdtemp(prefix=f".{INSTALL_DIR.name}.", dir=parent))
        os.chmod(staging, 0o755)  # noqa: S103 - a source tree, readable like any checkout
        _extract_into(data, staging)
        if final.is_symlink() or final.exists():
            if final.is_symlink() or _tree_snapshot(final) != _tree_snapshot(staging):
                raise RuntimeSourceError(
                    "the destination already holds different runtime source; "
                    "remove it to reinstall"
                )
            return False
        os.rename(staging, final)
        installed = True
        return True
    except OSError as error:
        raise RuntimeSourceError(f"cannot write the runtime source: {error.strerror}") from error
    finally:
        if staging is not None and staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
        if not installed:
            for directory in reversed(created):
                try:
                    directory.rmdir()
                except OSError:
                    break
