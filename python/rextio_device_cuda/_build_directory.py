"""The private directory cargo runs in: checked once, then used as it was checked.

Cargo reads ``.cargo/config.toml`` from every ancestor of its working
directory, and rustup reads ``rust-toolchain.toml`` there, whoever owns them.
So a build runs in a new private directory (mode 0700, a random name) below
``builds/`` in this package's folder of the user's cache, and only after
every directory from there up to the root was found to be root's or the
user's and writable by no one else (OpenSSH's StrictModes rule; a sticky
``/tmp`` fails it, since anyone can create ``/tmp/.cargo``).

What was checked is what is used. POSIX: the cache path is walked once from
``/`` through directory descriptors (``O_PATH | O_NOFOLLOW``). A link on the
way is read from the link that was opened and must be root's or the user's
(another user could repoint theirs at any moment); every directory the walk
ends up in is checked through its descriptor. From then on only the
resolved path is used, never the path as given: each directory on it is
root's or the user's and writable by no one else, so only root and the user
can change what it names. The lock and the build directory are made through
the held descriptor of ``builds/``; cargo is given paths below the resolved
one, and the guard's command line (world-readable) names nothing another
user can write. Windows (no owner or ACL read here): the path is resolved
once and the conservative rule of ``_untrusted_reason`` applies.

Directories made here are 0700 whatever the umask (made, then chmod). The
package's own two folders (its cache folder and ``builds/``) left writable
by the group by an earlier version under umask 002 are repaired to 0700
when they hold nothing of another user's, else refused naming the cause.

Every build holds a shared lock on ``builds/lock``; a run that can take it
exclusively knows no build is running and removes the build directories a
killed run left.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from rextio_device_cuda._provider_spec import PROVIDER_SPEC

# The variable that names the user's cache (else a folder below the home).
CACHE_VARIABLE: Final = "LOCALAPPDATA" if sys.platform == "win32" else "XDG_CACHE_HOME"
# Below this package's cache folder: where builds run, the lock every build
# holds, and the prefix that marks a build directory as one of these (the
# folder is private, so nothing else makes entries there).
_BUILDS_FOLDER: Final = "builds"
_LOCK_FILE: Final = "lock"
_BUILD_PREFIX: Final = "build-"
# As the kernel's own bound on links followed in one path.
_MOST_LINKS: Final = 40
_PRIVATE: Final = 0o700
# The walk's descriptors (POSIX; getattr: the names are absent on Windows):
# the object itself, never a link's target, and a directory opened to read.
_CLOEXEC: Final[int] = getattr(os, "O_CLOEXEC", 0)
_PATH_ONLY: Final[int] = getattr(os, "O_PATH", 0) | getattr(os, "O_NOFOLLOW", 0) | _CLOEXEC
_READ_DIRECTORY: Final[int] = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC
_REMEDY: Final = (
    f"set {CACHE_VARIABLE} to a directory of yours on a path only you and root can write"
)


class BuildDirectoryError(Exception):
    """No private build directory can be had; the message says why (one line)."""


class NoCacheDirectoryError(BuildDirectoryError):
    """No cache directory is known (no home): input the command cannot use."""


@dataclass(frozen=True)
class BuildDirectory:
    """A new, empty directory (0700) for one build, on a path checked as described
    above, and the build lock's descriptor (None on Windows), to pass to cargo's
    guard so the lock outlives ``build-probe`` until cargo is gone."""

    path: Path
    lock: int | None
    # This package's cache folder, resolved as the build directory was.
    cache: Path


def cache_folder() -> Path:
    """This package's folder in the user's cache (``$XDG_CACHE_HOME`` or
    ``~/.cache``; on Windows ``%LOCALAPPDATA%``), as configured (unresolved)."""
    if sys.platform == "win32":
        home_variable, below_home = "USERPROFILE", os.path.join("AppData", "Local")
    else:
        home_variable, below_home = "HOME", ".cache"
    base = os.environ.get(CACHE_VARIABLE, "")
    if not os.path.isabs(base):
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            raise NoCacheDirectoryError(
                f"build-probe needs a cache directory and no home directory is known: set "
                f"{CACHE_VARIABLE} (or {home_variable}) to an absolute directory of yours"
            )
        base = os.path.join(home, below_home)
    return Path(base) / PROVIDER_SPEC.distribution.name


@contextlib.contextmanager
def private_build_directory() -> Iterator[BuildDirectory]:
    """A new private directory for one build below ``builds/`` of this package's
    cache folder, held (under the shared build lock) until the block ends, then
    removed. Raises ``BuildDirectoryError`` naming what was refused, or
    ``NoCacheDirectoryError``."""
    if sys.platform == "win32":
        build = _windows_build_directory()
        try:
            yield BuildDirectory(build, None, build.parent.parent)
        finally:
            shutil.rmtree(build, ignore_errors=True)
        return
    with _posix_builds_folder() as (builds, builds_fd), _builds_lock(builds, builds_fd) as lock:
        build = _make_build_directory(builds, builds_fd)
        try:
            yield BuildDirectory(build, lock, builds.parent)
        finally:
            shutil.rmtree(build, ignore_errors=True)


def make_private_directories(path: Path) -> None:
    """Makes ``path`` and its missing parents, each 0700 whatever the umask (no
    check of who may write above: for destinations, not for where cargo runs)."""
    missing = []
    existing = Path(os.path.abspath(path))
    while not os.path.lexists(existing) and existing.parent != existing:
        missing.append(existing)
        existing = existing.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, _PRIVATE)
            os.chmod(directory, _PRIVATE)
    if not os.path.isdir(path):
        raise NotADirectoryError(f"{path} is not a directory")


def _writable_by_others_reason(mode: int) -> str | None:
    if mode & stat.S_IWOTH:
        return f"is writable by other users (mode {stat.S_IMODE(mode):o})"
    if mode & stat.S_IWGRP:
        # What a umask of 002 (user-private-group distributions) gives new directories.
        return f"is writable by its group (mode {stat.S_IMODE(mode):o}, as under umask 002)"
    return None


def _refusal(directory: str, reason: str, users: bool = False) -> BuildDirectoryError:
    """``directory`` refused for ``reason``; ``users``: it is the user's (chmod fixes it)."""
    remedy = f"chmod go-w {directory}, or {_REMEDY}" if users else _REMEDY
    return BuildDirectoryError(
        f"{directory} {reason}, and cargo reads its configuration from every directory "
        f"above the one it runs in: {remedy}"
    )


# -- POSIX: one walk through descriptors -------------------------------------------------


def _trusted_owners() -> tuple[int, ...]:
    """Who may own what cargo reads: root, and the user (last)."""
    if sys.platform == "win32":
        return ()  # no owners read there (see _untrusted_reason)
    return (0, os.geteuid())


def _open_path(name: str, directory: int | None) -> int:
    """``name`` in ``directory`` opened as an ``O_PATH`` descriptor, no link followed."""
    return os.open(name, _PATH_ONLY, dir_fd=directory)


def _reopened(directory: int) -> int:
    """The directory held as ``O_PATH`` opened again for reading (chmod, listing)."""
    return os.open(".", _READ_DIRECTORY, dir_fd=directory)


@dataclass
class _Walk:
    """The directories a walk from ``/`` is in: their names and held ``O_PATH``
    descriptors, ``/`` first."""

    names: list[str]
    descriptors: list[int]

    def path(self, *below: str) -> str:
        return os.path.join("/", *self.names[1:], *below)

    def enter(self, name: str, descriptor: int) -> None:
        self.names.append(name)
        self.descriptors.append(descriptor)

    def close(self) -> None:
        for descriptor in self.descriptors:
            os.close(descriptor)
        self.descriptors.clear()


def _walk(walk: _Walk, path: str) -> list[str]:
    """Walks ``path`` (absolute) from ``/`` one name at a time, following a link
    only when it is root's or the user's (its owner and target read from the link
    that was opened). Returns the names found missing (the first and those
    below it); none when the whole path exists."""
    pending = path.split("/")
    links = 0
    while pending:
        name = pending.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            if len(walk.descriptors) > 1:
                os.close(walk.descriptors.pop())
                walk.names.pop()
            continue
        try:
            descriptor = _open_path(name, walk.descriptors[-1])
        except FileNotFoundError:
            missing = [part for part in [name, *pending] if part not in ("", ".")]
            if ".." in missing:
                raise BuildDirectoryError(f"{walk.path(name)} does not exist") from None
            return missing
        status = os.fstat(descriptor)
        if stat.S_ISDIR(status.st_mode):
            walk.enter(name, descriptor)
            continue
        try:
            if not stat.S_ISLNK(status.st_mode):
                raise BuildDirectoryError(f"{walk.path(name)} is not a directory")
            if status.st_uid not in _trusted_owners():
                raise BuildDirectoryError(
                    f"{walk.path(name)} is a link that belongs to another user "
                    f"(uid {status.st_uid}), who can repoint it at any moment: {_REMEDY}"
                )
            links += 1
            if links > _MOST_LINKS:
                raise BuildDirectoryError(f"{path} passes through too many links")
            # Read from the link that was opened and checked, not looked up again.
            target = os.readlink("", dir_fd=descriptor)
        finally:
            os.close(descriptor)
        if target.startswith("/"):
            for held in walk.descriptors[1:]:
                os.close(held)
            del walk.descriptors[1:], walk.names[1:]
        pending[:0] = target.split("/")
    return []


def _check(directory: str, descriptor: int) -> None:
    """Refuses ``directory`` unless it is root's or the user's and only they can write it."""
    status = os.fstat(descriptor)
    if status.st_uid not in _trusted_owners():
        raise _refusal(directory, f"belongs to another user (uid {status.st_uid})")
    reason = _writable_by_others_reason(status.st_mode)
    if reason is not None:
        # A directory of the user's own, below their home, that only its group
        # may also write: what umask 002 makes, and the user's to change.
        home = os.path.expanduser("~")
        users = (
            status.st_uid == _trusted_owners()[-1]
            and not status.st_mode & stat.S_IWOTH
            and os.path.isabs(home)
            and (directory + "/").startswith(home.rstrip("/") + "/")
        )
        raise _refusal(directory, reason, users)


def _repair(directory: str, descriptor: int) -> None:
    """One of this package's own folders, left writable by its group or others by
    an earlier version: made 0700, then kept only if nothing in it is another
    user's (nothing they could have planted meanwhile)."""
    status = os.fstat(descriptor)
    reason = _writable_by_others_reason(status.st_mode)
    if reason is None or status.st_uid != _trusted_owners()[-1]:
        return
    opened = _reopened(descriptor)
    try:
        os.chmod(opened, _PRIVATE)
        for entry in os.scandir(opened):
            owner = entry.stat(follow_symlinks=False).st_uid
            if owner not in _trusted_owners():
                raise BuildDirectoryError(
                    f"{directory} {reason}, left so by an earlier build-probe; made 0700 now, "
                    f"but it holds {entry.name}, which another user (uid {owner}) made: "
                    f"remove {directory}"
                )
    finally:
        os.close(opened)


def _make(walk: _Walk, name: str) -> None:
    """Makes ``name`` in the walk's last directory, 0700 whatever the umask (a
    umask can take the owner's bits too), and enters it."""
    try:
        os.mkdir(name, _PRIVATE, dir_fd=walk.descriptors[-1])
        walk.enter(name, _open_path(name, walk.descriptors[-1]))
        opened = _reopened(walk.descriptors[-1])
        try:
            os.chmod(opened, _PRIVATE)
        finally:
            os.close(opened)
    except OSError as error:
        raise BuildDirectoryError(f"cannot create {walk.path(name)}: {error.strerror}") from error


def _enter_own(walk: _Walk, name: str) -> None:
    """Enters this package's own folder ``name`` in the walk's last directory:
    made when missing, repaired when an earlier version left it writable."""
    directory = walk.path(name)
    try:
        descriptor = _open_path(name, walk.descriptors[-1])
    except FileNotFoundError:
        _make(walk, name)
        return
    walk.enter(name, descriptor)
    if not stat.S_ISDIR(os.fstat(descriptor).st_mode):
        raise BuildDirectoryError(
            f"{directory} is not a directory, and build-probe keeps its own folder there: "
            "remove it"
        )
    _repair(directory, descriptor)
    _check(directory, descriptor)


@contextlib.contextmanager
def _posix_builds_folder() -> Iterator[tuple[Path, int]]:
    """``builds/`` walked, checked, made where missing: its resolved path and
    held descriptor (``O_PATH``)."""
    folder = cache_folder()
    walk = _Walk(["/"], [_open_path("/", None)])
    try:
        try:
            missing = _walk(walk, str(folder.parent))
        except OSError as error:
            raise BuildDirectoryError(f"cannot reach {folder.parent}: {error.strerror}") from error
        # Nothing is made below a directory that would be refused (the nearest named).
        for index in reversed(range(len(walk.descriptors))):
            _check(os.path.join("/", *walk.names[1 : index + 1]), walk.descriptors[index])
        for name in missing:
            _make(walk, name)
        for name in (folder.name, _BUILDS_FOLDER):
            _enter_own(walk, name)
        yield Path(walk.path()), walk.descriptors[-1]
    finally:
        walk.close()


@contextlib.contextmanager
def _builds_lock(builds: Path, builds_fd: int) -> Iterator[int | None]:
    """The lock every build holds while it runs (shared); held exclusively first
    when no other build runs, to remove the build directories a killed run left."""
    if sys.platform == "win32":
        yield None  # no flock there; never called (for the type checker)
        return
    import fcntl  # POSIX only

    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        lock = os.open(_LOCK_FILE, flags, 0o600, dir_fd=builds_fd)
    except OSError as error:
        raise BuildDirectoryError(
            f"cannot lock {builds / _LOCK_FILE}: {error.strerror}"
        ) from error
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pass  # another build runs: its directory is not stale
        else:
            listing = _reopened(builds_fd)
            try:
                for entry in os.scandir(listing):
                    if entry.name.startswith(_BUILD_PREFIX):
                        shutil.rmtree(entry.name, ignore_errors=True, dir_fd=listing)
            finally:
                os.close(listing)
        # Shared from here (a conversion may pass through unlocked; nothing of
        # this run exists yet then).
        fcntl.flock(lock, fcntl.LOCK_SH)
        yield lock
    finally:
        os.close(lock)


def _make_build_directory(builds: Path, builds_fd: int) -> Path:
    """A new directory (0700, a random name) in ``builds``, made through its held
    descriptor."""
    for _ in range(16):
        name = f"{_BUILD_PREFIX}{secrets.token_hex(8)}"
        try:
            os.mkdir(name, _PRIVATE, dir_fd=builds_fd)
        except FileExistsError:
            continue
        except OSError as error:
            raise BuildDirectoryError(
                f"cannot create a build directory in {builds}: {error.strerror}"
            ) from error
        made = os.open(name, _READ_DIRECTORY | getattr(os, "O_NOFOLLOW", 0), dir_fd=builds_fd)
        try:
            os.chmod(made, _PRIVATE)
        finally:
            os.close(made)
        return builds / name
    raise BuildDirectoryError(f"cannot create a build directory in {builds}: no free name")


# -- Windows ------------------------------------------------------------------------------


def _untrusted_reason(directory: Path, profile: Path | None) -> str | None:
    """Windows, where the standard library reads no owner or ACL and the drive
    root (``C:\\``) lets any authenticated user create a folder: inside the
    user's profile (``profile``) the user's; above it, no ``.cargo`` entry at
    all (one created after this check and before cargo starts is not seen;
    docs/interfaces.md says so)."""
    if profile is not None and (directory == profile or profile in directory.parents):
        return None
    if os.path.lexists(directory / ".cargo"):
        return "holds a .cargo entry that other users may have made"
    return None


def _windows_build_directory() -> Path:
    """A new directory in ``builds/``, resolved once, checked, made where missing."""
    builds = Path(os.path.realpath(cache_folder() / _BUILDS_FOLDER))
    user_profile = os.environ.get("USERPROFILE", "")
    profile = Path(os.path.realpath(user_profile)) if os.path.isabs(user_profile) else None
    existing = builds
    while not os.path.lexists(existing) and existing.parent != existing:
        existing = existing.parent
    for directory in (existing, *existing.parents):
        reason = _untrusted_reason(directory, profile)
        if reason is not None:
            raise _refusal(str(directory), reason)
    try:
        make_private_directories(builds)
        return Path(tempfile.mkdtemp(prefix=_BUILD_PREFIX, dir=builds))
    except OSError as error:
        raise BuildDirectoryError(f"cannot create a build directory in {builds}") from error
