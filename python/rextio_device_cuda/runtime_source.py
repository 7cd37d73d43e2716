"""The packaged Rust crates and their safe installation into a project.

Every crate the package carries as a source tarball (the runtime
``rextio-cuda-runtime`` and the reviewed loader ``rextio-cuda-loader``)
is installed beside the others, in
``PROJECT_DIR/generated/device-providers/rextio-device-cuda/<crate>``, so the
loader's path dependency on the runtime resolves there. Each tarball's
SHA-256 is checked and the whole archive validated before anything is written
(``_source_archive``). Installation works only through directory descriptors
with ``O_NOFOLLOW``, so a symbolic link swapped into the project can never
redirect a write. Installs into one project are serialized by an ``flock`` of
the folder that holds the crates (no lock file); each crate is written into a
staging directory with a random name and renamed into place, so a crate
appears whole or not at all, and the next install removes staging left by an
interrupted one.

A rerun over an existing install compares only what the package owns: the
build products ``Cargo.lock`` and ``target/`` are ignored, and any other file
that changed, is missing or was added is refused by name, before anything is
written. Installing needs a POSIX host (directory descriptors and ``flock``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final

from rextio_device_cuda import _generated
from rextio_device_cuda._provider_spec import PROVIDER_SPEC
from rextio_device_cuda._source_archive import (
    PackagedArchive,
    SourceArchiveError,
    SourceTree,
    packaged_archive,
)

if sys.platform != "win32":
    import fcntl

__all__ = [
    "InstalledCrate",
    "RuntimeSourceError",
    "install_runtime_source",
    "packaged_crates",
]

_NOFOLLOW: Final[int] = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC: Final[int] = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY_FLAGS: Final[int] = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC
# O_NONBLOCK: a FIFO planted in the tree must not block the comparison.
_READ_FLAGS: Final[int] = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | _CLOEXEC
_CREATE_FLAGS: Final[int] = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
# The folder every packaged crate is installed in, one directory per crate.
INSTALL_PARENT: Final[PurePosixPath] = PurePosixPath(
    PROVIDER_SPEC.runtime_package.install_dir
).parent
# What building an installed crate writes at its top; never compared.
BUILD_PRODUCTS: Final[frozenset[str]] = frozenset({"Cargo.lock", "target"})
# Staging directories are `.staging-<crate>-<random>` beside the crates.
STAGING_PREFIX: Final[str] = ".staging-"
# At most this many differing names in one refusal message.
_NAMES_SHOWN: Final[int] = 8


class RuntimeSourceError(Exception):
    """The packaged source cannot be verified or installed; nothing was written."""


@dataclass(frozen=True)
class PackagedCrate:
    """A crate the package carries: its name and its source tarball."""

    name: str
    archive: PackagedArchive

    @property
    def install_dir(self) -> PurePosixPath:
        """Where it is installed, relative to the project."""
        return INSTALL_PARENT / self.name


@dataclass(frozen=True)
class InstalledCrate:
    """One crate of an install: where it is, and whether this install wrote it."""

    install_dir: PurePosixPath
    written: bool


def packaged_crates() -> tuple[PackagedCrate, ...]:
    """Every crate this package carries, from the generated list of tarballs."""
    # (crate name, tarball file name, SHA-256) of each packaged crate.
    listed = (
        (
            PROVIDER_SPEC.runtime_package.crate_name,
            _generated.RUNTIME_SOURCE_ARCHIVE,
            _generated.RUNTIME_SOURCE_SHA256,
        ),
        (
            _generated.LOADER_CRATE_NAME,
            _generated.LOADER_SOURCE_ARCHIVE,
            _generated.LOADER_SOURCE_SHA256,
        ),
    )
    crates = []
    for name, file_name, digest in listed:
        crates.append(PackagedCrate(name, packaged_archive(file_name, digest)))
    return tuple(crates)


@contextlib.contextmanager
def _opened(fd: int) -> Iterator[int]:
    """Closes ``fd`` on leaving."""
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


def _write_file(dir_fd: int, name: str, mode: int, content: bytes) -> None:
    """A new file ``name`` below ``dir_fd`` (never an existing one, never through a link)."""
    with open(os.open(name, _CREATE_FLAGS, mode, dir_fd=dir_fd), "wb") as output:
        output.write(content)
        # The umask must not make the installed tree differ between machines.
        os.fchmod(output.fileno(), mode)


def _write_staging(parent_fd: int, name: str, tree: SourceTree) -> None:
    """The whole tree in a new directory ``name`` below ``parent_fd``."""
    os.mkdir(name, 0o700, dir_fd=parent_fd)
    with contextlib.ExitStack() as stack:
        root_fd = stack.enter_context(_opened(_open_directory(name, parent_fd)))
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


def _open_parent(
    project_fd: int, stack: contextlib.ExitStack, created: list[tuple[int, str]]
) -> int:
    """The folder the crates go in, created as needed; ``created`` gets each
    directory this call made (its parent's descriptor and name), as it is made."""
    current = project_fd
    for part in INSTALL_PARENT.parts:
        try:
            os.mkdir(part, 0o755, dir_fd=current)
            created.append((current, part))
        except FileExistsError:
            pass  # an earlier or concurrent install made it; opened below without links
        current = stack.enter_context(_opened(_open_directory(part, current)))
    return current


@contextlib.contextmanager
def _install_lock(parent_fd: int) -> Iterator[None]:
    """Exclusive hold of the crates' folder itself: no lock file is ever created."""
    fcntl.flock(parent_fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(parent_fd, fcntl.LOCK_UN)


def _remove_stale_staging(parent_fd: int) -> None:
    """Staging left by an interrupted install; only called under the lock."""
    for name in os.listdir(parent_fd):
        if not name.startswith(STAGING_PREFIX):
            continue
        if stat.S_ISDIR(os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode):
            shutil.rmtree(name, dir_fd=parent_fd)
        else:
            os.unlink(name, dir_fd=parent_fd)


def _same_content(name: str, dir_fd: int, expected: bytes) -> bool:
    with _opened(os.open(name, _READ_FLAGS, dir_fd=dir_fd)) as fd:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        with open(os.dup(fd), "rb") as handle:
            return handle.read(len(expected) + 1) == expected


def _differences(dir_fd: int, relative: PurePosixPath, tree: SourceTree) -> list[str]:
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


def _is_installed(parent_fd: int, crate: PackagedCrate, tree: SourceTree) -> bool:
    """Whether the crate is already installed exactly; refuses a different install by name."""
    try:
        os.stat(crate.name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    with _opened(_open_directory(crate.name, parent_fd)) as crate_fd:
        found = _differences(crate_fd, PurePosixPath("."), tree)
    if found:
        shown = "; ".join(ascii(item)[1:-1] for item in found[:_NAMES_SHOWN])
        more = len(found) - _NAMES_SHOWN
        raise RuntimeSourceError(
            f"the destination already holds different runtime source in {crate.install_dir} "
            f"({shown}{f'; and {more} more' if more > 0 else ''}); remove "
            f"{crate.install_dir} to reinstall"
        )
    return True


def _install(
    project_fd: int, trees: Sequence[tuple[PackagedCrate, SourceTree]]
) -> list[InstalledCrate]:
    created: list[tuple[int, str]] = []
    written = False
    with contextlib.ExitStack() as stack:
        try:
            parent_fd = _open_parent(project_fd, stack, created)
            with _install_lock(parent_fd):
                _remove_stale_staging(parent_fd)
                # Every crate is compared before anything is written.
                missing = [
                    (crate, tree)
                    for crate, tree in trees
                    if not _is_installed(parent_fd, crate, tree)
                ]
                staged: list[tuple[str, PackagedCrate]] = []
                try:
                    for crate, tree in missing:
                        staging = f"{STAGING_PREFIX}{crate.name}-{secrets.token_hex(8)}"
                        staged.append((staging, crate))
                        _write_staging(parent_fd, staging, tree)
                    for staging, crate in staged:
                        os.rename(staging, crate.name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
                        written = True
                except BaseException:
                    # A failed write (a full disk) or rename leaves no staging behind.
                    for staging, _ in staged:
                        shutil.rmtree(staging, dir_fd=parent_fd, ignore_errors=True)
                    raise
                installed = {crate.name for crate, _ in missing}
                return [
                    InstalledCrate(crate.install_dir, crate.name in installed) for crate, _ in trees
                ]
        finally:
            if not written:
                # Only what this call created, deepest first; a folder another
                # install filled meanwhile is not empty and stays.
                for dir_fd, name in reversed(created):
                    with contextlib.suppress(OSError):
                        os.rmdir(name, dir_fd=dir_fd)


def install_runtime_source(
    project_dir: Path, *, crates: Sequence[PackagedCrate] | None = None
) -> list[InstalledCrate]:
    """Install every packaged crate (or ``crates``) into ``project_dir``, beside each other.

    Returns each crate's install directory and whether this call wrote it
    (False: it was already installed, identical).
    """
    if not isinstance(project_dir, Path):
        raise TypeError("project_dir must be a pathlib.Path")
    chosen = packaged_crates() if crates is None else tuple(crates)
    try:
        trees = [(crate, crate.archive.tree()) for crate in chosen]
    except SourceArchiveError as error:
        raise RuntimeSourceError(str(error)) from error
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
        raise RuntimeSourceError(f"cannot open the project directory: {error.strerror}") from error
    try:
        return _install(project_fd, trees)
    except OSError as error:
        raise RuntimeSourceError(f"cannot write the runtime source: {error.strerror}") from error
    finally:
        os.close(project_fd)
