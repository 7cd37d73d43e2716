"""The packaged Rust runtime source and its safe installation into a project.

The tarball's SHA-256 is checked against the generated digest and the whole
archive is validated in memory before anything is written. Installation then
works only through directory descriptors (``openat``/``mkdirat``/``renameat``
with ``O_NOFOLLOW``), so a symbolic link swapped into the project can never
redirect a write. Installs into one project are serialized by a lock file
beside the install directory (removed again on release), so concurrent
installs all succeed; each writes a staging directory and renames it into
place, and the next install removes staging left by an interrupted one.

A rerun over an existing install compares only what the package owns: the
build products ``Cargo.lock`` and ``target/`` are ignored, and any other file
that changed, is missing or was added is refused by name. Installing needs a
POSIX host (directory descriptors and ``flock``).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import os
import secrets
import shutil
import stat
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final

from rextio_device_cuda import _generated
from rextio_device_cuda._provider_spec import PROVIDER_SPEC

if sys.platform != "win32":
    import fcntl

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
# What building the installed crate writes at its top; never compared.
BUILD_PRODUCTS: Final[frozenset[str]] = frozenset({"Cargo.lock", "target"})
STAGING_PREFIX: Final[str] = f".{INSTALL_DIR.name}.staging-"
LOCK_NAME: Final[str] = f".{INSTALL_DIR.name}.lock"
# At most this many differing names in one refusal message.
_NAMES_SHOWN: Final[int] = 8

_NOFOLLOW: Final[int] = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC: Final[int] = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY_FLAGS: Final[int] = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC
# O_NONBLOCK: a FIFO planted in the tree must not block the comparison.
_READ_FLAGS: Final[int] = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | _CLOEXEC
_CREATE_FLAGS: Final[int] = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC


class RuntimeSourceError(Exception):
    """The runtime source cannot be verified or installed; nothing was written."""


@dataclass(frozen=True)
class _SourceTree:
    """The archive's content below its top folder: directories and (mode, bytes) files."""

    directories: frozenset[PurePosixPath]
    files: dict[PurePosixPath, tuple[int, bytes]]


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


def _source_tree(data: bytes) -> _SourceTree:
    """Every entry of the archive, validated and read into memory."""
    directories: set[PurePosixPath] = set()
    files: dict[PurePosixPath, tuple[int, bytes]] = {}
    total = 0
    try:
        archive = tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")  # noqa: SIM115
    except (tarfile.TarError, OSError, EOFError) as error:
        raise RuntimeSourceError("the runtime source archive is not a gzip tarball") from error
    try:
        with archive:
            for count, member in enumerate(archive, start=1):
                if count > _MAX_MEMBERS:
                    raise RuntimeSourceError("the archive holds too many entries")
                relative = _relative_member_path(member.name)
                if not (member.isreg() or member.isdir()):
                    raise RuntimeSourceError(
                        "the archive holds a link, device or other special entry"
                    )
                if relative is None:
                    if not member.isdir():
                        raise RuntimeSourceError("the archive's top folder is not a directory")
                    continue
                if relative in directories or relative in files:
                    raise RuntimeSourceError("the archive holds a duplicate name")
                if member.isdir():
                    directories.add(relative)
                    continue
                total += member.size
                if total > _MAX_EXTRACTED_BYTES:
                    raise RuntimeSourceError("the archive expands beyond its size bound")
                extracted = archive.extractfile(member)
                if extracted is None:
                    raise RuntimeSourceError("an archive file could not be read")
                with extracted:
                    files[relative] = (0o755 if member.mode & 0o111 else 0o644, extracted.read())
    except (tarfile.TarError, OSError, EOFError) as error:
        raise RuntimeSourceError("the runtime source archive is corrupt") from error
    for path in files:
        directories.update(path.parents)
    directories.discard(PurePosixPath("."))
    if any(path in directories for path in files):
        raise RuntimeSourceError("the archive holds a name that is both a file and a folder")
    return _SourceTree(frozenset(directories), files)


@contextlib.contextmanager
def _opened(fd: int) -> Iterator[int]:
    try:
        yield fd
    finally:
        os.close(fd)


def _open_directory(name: str, dir_fd: int) -> int:
    """Open an existing plain directory below ``dir_fd``, never through a link."""
    try:
        return os.open(name, _DIRECTORY_FLAGS, dir_fd=dir_fd)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            raise RuntimeSourceError(f"{name} exists and is not a plain directory") from error
        raise


def _open_parent(
    project_fd: int, stack: contextlib.ExitStack, created: list[tuple[int, str]]
) -> int:
    """The install directory's parent, created as needed; ``created`` gets each
    directory this call made (its parent's descriptor and name), as it is made."""
    current = project_fd
    for part in INSTALL_DIR.parts[:-1]:
        try:
            os.mkdir(part, 0o755, dir_fd=current)
            created.append((current, part))
        except FileExistsError:
            pass  # an earlier or concurrent install made it; opened below without links
        current = stack.enter_context(_opened(_open_directory(part, current)))
    return current


@contextlib.contextmanager
def _install_lock(parent_fd: int) -> Iterator[None]:
    """Exclusive hold of the lock file; the file is removed while still held."""
    while True:
        fd = os.open(LOCK_NAME, os.O_RDWR | os.O_CREAT | _READ_FLAGS, 0o600, dir_fd=parent_fd)
        try:
            held = os.fstat(fd)
            if not stat.S_ISREG(held.st_mode):
                raise RuntimeSourceError(f"{LOCK_NAME} exists and is not a plain file")
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                current = os.stat(LOCK_NAME, dir_fd=parent_fd, follow_symlinks=False)
            except FileNotFoundError:
                current = None
        except BaseException:
            os.close(fd)
            raise
        # The previous holder removes the file on release; a lock taken on a
        # removed file guards nothing, so take the one now in place.
        if current is not None and (current.st_dev, current.st_ino) == (held.st_dev, held.st_ino):
            break
        os.close(fd)
    try:
        yield
    finally:
        try:
            os.unlink(LOCK_NAME, dir_fd=parent_fd)
        finally:
            os.close(fd)


def _remove_stale_staging(parent_fd: int) -> None:
    """Staging left by an interrupted install; only called under the lock."""
    for name in os.listdir(parent_fd):
        if not name.startswith(STAGING_PREFIX):
            continue
        if stat.S_ISDIR(os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode):
            shutil.rmtree(name, dir_fd=parent_fd)
        else:
            os.unlink(name, dir_fd=parent_fd)


def _write_file(dir_fd: int, name: str, mode: int, content: bytes) -> None:
    with open(os.open(name, _CREATE_FLAGS, mode, dir_fd=dir_fd), "wb") as output:
        output.write(content)
        # The umask must not make the installed tree differ between machines.
        os.fchmod(output.fileno(), mode)


def _write_staging(parent_fd: int, staging: str, tree: _SourceTree) -> None:
    """The whole tree in a new staging directory ``staging`` below ``parent_fd``."""
    os.mkdir(staging, 0o700, dir_fd=parent_fd)
    with contextlib.ExitStack() as stack:
        root_fd = stack.enter_context(_opened(_open_directory(staging, parent_fd)))
        os.fchmod(root_fd, 0o755)
        directory_fds = {PurePosixPath("."): root_fd}
        for directory in sorted(tree.directories, key=lambda path: len(path.parts)):
            parent = directory_fds[directory.parent]
            os.mkdir(directory.name, 0o755, dir_fd=parent)
            fd = stack.enter_context(_opened(_open_directory(directory.name, parent)))
            os.fchmod(fd, 0o755)
            directory_fds[directory] = fd
        for path, (mode, content) in sorted(tree.files.items()):
            _write_file(directory_fds[path.parent], path.name, mode, content)


def _same_content(name: str, dir_fd: int, expected: bytes) -> bool:
    with _opened(os.open(name, _READ_FLAGS, dir_fd=dir_fd)) as fd:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        with open(os.dup(fd), "rb") as handle:
            return handle.read(len(expected) + 1) == expected


def _differences(dir_fd: int, relative: PurePosixPath, tree: _SourceTree) -> list[str]:
    """What below ``relative`` (open as ``dir_fd``) is not exactly the packaged tree."""
    found: list[str] = []
    seen: set[PurePosixPath] = set()
    for name in sorted(os.listdir(dir_fd)):
        path = relative / name
        if relative == PurePosixPath(".") and name in BUILD_PRODUCTS:
            continue
        seen.add(path)
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        if path in tree.directories and stat.S_ISDIR(mode):
            with _opened(_open_directory(name, dir_fd)) as child:
                found.extend(_differences(child, path, tree))
        elif path in tree.files:
            if not stat.S_ISREG(mode) or not _same_content(name, dir_fd, tree.files[path][1]):
                found.append(f"changed {path}")
        elif path in tree.directories:
            found.append(f"changed {path} (not a folder)")
        else:
            found.append(f"added {path}")
    for path in sorted({*tree.directories, *tree.files}):
        if path.parent == relative and path not in seen:
            found.append(f"missing {path}")
    return found


def _install(project_fd: int, tree: _SourceTree) -> bool:
    final = INSTALL_DIR.name
    created: list[tuple[int, str]] = []
    installed = False
    with contextlib.ExitStack() as stack:
        try:
            parent_fd = _open_parent(project_fd, stack, created)
            with _install_lock(parent_fd):
                _remove_stale_staging(parent_fd)
                try:
                    os.stat(final, dir_fd=parent_fd, follow_symlinks=False)
                    exists = True
                except FileNotFoundError:
                    exists = False
                if exists:
                    with _opened(_open_directory(final, parent_fd)) as final_fd:
                        found = _differences(final_fd, PurePosixPath("."), tree)
                    if found:
                        shown = "; ".join(ascii(item)[1:-1] for item in found[:_NAMES_SHOWN])
                        more = len(found) - _NAMES_SHOWN
                        raise RuntimeSourceError(
                            f"the destination already holds different runtime source ({shown}"
                            f"{f'; and {more} more' if more > 0 else ''}); remove "
                            f"{INSTALL_DIR} to reinstall"
                        )
                    return False
                staging = f"{STAGING_PREFIX}{secrets.token_hex(8)}"
                try:
                    _write_staging(parent_fd, staging, tree)
                    os.rename(staging, final, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
                except BaseException:
                    # A failed write (a full disk) or rename leaves no staging behind.
                    shutil.rmtree(staging, dir_fd=parent_fd, ignore_errors=True)
                    raise
                installed = True
                return True
        finally:
            if not installed:
                # Only what this call created, deepest first; a folder another
                # install filled meanwhile is not empty and stays.
                for dir_fd, name in reversed(created):
                    with contextlib.suppress(OSError):
                        os.rmdir(name, dir_fd=dir_fd)


def install_runtime_source(project_dir: Path, *, archive: Path | None = None) -> bool:
    """Install the runtime source into ``project_dir``; False when already identical."""
    if not isinstance(project_dir, Path):
        raise TypeError("project_dir must be a pathlib.Path")
    tree = _source_tree(read_runtime_archive(archive))
    if sys.platform == "win32" or os.open not in os.supports_dir_fd:
        raise RuntimeSourceError(
            "installing the runtime source needs a POSIX host (directory descriptors)"
        )
    try:
        # The project directory itself is the caller's choice, links included.
        project_fd = os.open(project_dir, _DIRECTORY_FLAGS & ~_NOFOLLOW)
    except FileNotFoundError as error:
        raise RuntimeSourceError("the project directory does not exist") from error
    except NotADirectoryError as error:
        raise RuntimeSourceError("the project path is not a directory") from error
    except OSError as error:
        raise RuntimeSourceError(
            f"cannot open the project directory: {error.strerror}"
        ) from error
    try:
        return _install(project_fd, tree)
    except OSError as error:
        raise RuntimeSourceError(f"cannot write the runtime source: {error.strerror}") from error
    finally:
        os.close(project_fd)
