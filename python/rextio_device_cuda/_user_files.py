"""Files written for a user, created so that no planted name is written through.

A file the package writes for a user (``validate
--output``, ``build-probe``'s binaries) is created exclusively in the
destination directory and renamed into place. The temporary file has a
random name and is created with ``O_CREAT | O_EXCL | O_NOFOLLOW``: a
symbolic link, FIFO or file that another user planted at that name makes the
create fail (a fresh name is tried), it is never opened. The rename
(``os.replace``) then replaces whatever is at the final name, a symbolic link
or FIFO included, as a directory entry: the link is replaced, never
followed, and nothing is written into a FIFO. In a sticky directory
(``/tmp``) the kernel refuses to replace an entry another user owns unless
the writer is root; that refusal is reported and nothing is written. Works
on Windows too (``build-probe`` is how a Windows user gets a probe).

An existing target that is a character device or a FIFO (``/dev/null``, a
terminal, a pipe), root's or the writer's, is written through as it is,
never renamed over: root's ``validate --output /dev/null`` leaves the device
a device. So is one reached through a symbolic link that is root's or the
writer's (``/dev/stdout``); the descriptor opened must be the inode that was
checked, opened without ``O_CREAT`` (nothing is made) and without blocking
(a FIFO no process reads is an error, not a hang). Such a link is never
replaced: one that leads anywhere else (a regular file, nowhere) is refused,
nothing written, so ``/dev/stdout`` stays a link whatever stdout is. A link
another user planted is still replaced, never followed, whatever it names,
as is another user's device or FIFO.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import sys
from pathlib import Path
from typing import Final

if sys.platform != "win32":
    import fcntl

_CREATE_FLAGS: Final[int] = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
# A device or FIFO is opened as it is: no create, no controlling terminal, no wait.
_THROUGH_FLAGS: Final[int] = (
    os.O_WRONLY
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
_NO_DEVICE_LINK: Final[str] = "it is a link of root's or yours to no device or FIFO; name the file"
# A planted name costs one try; this many taken names in a row is no accident.
_NAME_TRIES: Final[int] = 16


def temporary_name(final_name: str) -> str:
    """A fresh, unpredictable name beside ``final_name`` (hidden, never reused)."""
    return f".{final_name}.{secrets.token_hex(8)}.tmp"


def _create_exclusively(destination: Path, mode: int) -> tuple[int, Path]:
    """A new file beside ``destination`` under a fresh temporary name: (descriptor, path)."""
    for _ in range(_NAME_TRIES):
        temporary = destination.with_name(temporary_name(destination.name))
        try:
            return os.open(temporary, _CREATE_FLAGS, mode), temporary
        except FileExistsError:
            continue  # planted or taken: never opened, try another name
    raise FileExistsError(
        f"no free temporary name beside {destination.name} after {_NAME_TRIES} tries"
    )


def write_file(destination: Path, data: bytes, *, mode: int = 0o666) -> None:
    """Writes ``data`` to ``destination`` whole or not at all.

    ``mode`` is given to the create, so the umask applies (the evidence file
    gets what an ordinary write would give). Raises ``OSError`` when the
    directory cannot be written or the rename fails; then nothing is left
    behind.
    """
    if destination.name in ("", ".", ".."):
        raise IsADirectoryError(f"{destination} names a directory, not a file")
    device = _device_to_write_through(destination)
    if device is not None:
        _write_through(destination, device, data)
        return
    fd, temporary = _create_exclusively(destination, mode)
    try:
        with open(fd, "wb", closefd=True) as output:
            output.write(data)
            output.flush()
            os.fsync(output.fileno())
        # Replaces the entry at the final name; it follows no link there.
        os.replace(temporary, destination)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _trusted(status: os.stat_result) -> bool:
    return status.st_uid in (0, os.geteuid())


def _is_device(status: os.stat_result) -> bool:
    return stat.S_ISCHR(status.st_mode) or stat.S_ISFIFO(status.st_mode)


def _device_to_write_through(destination: Path) -> os.stat_result | None:
    """The character device or FIFO (root's or the writer's) that
    ``destination`` names, directly or through a link of root's or the
    writer's; None for what is created or replaced. Raises
    ``FileExistsError`` for such a link that leads to anything else."""
    if sys.platform == "win32":
        return None
    try:
        named = os.lstat(destination)
    except OSError:
        return None  # absent: created
    if not stat.S_ISLNK(named.st_mode):
        return named if _is_device(named) and _trusted(named) else None
    if not _trusted(named):
        return None  # planted: replaced, never followed
    try:
        target: os.stat_result | None = os.stat(destination)
    except OSError:
        target = None
    if target is None or not _is_device(target) or not _trusted(target):
        raise FileExistsError(errno.EEXIST, _NO_DEVICE_LINK)
    return target


def _write_through(destination: Path, checked: os.stat_result, data: bytes) -> None:
    """Writes ``data`` into the device or FIFO ``checked`` at ``destination``."""
    try:
        fd = os.open(destination, _THROUGH_FLAGS)
    except OSError as error:
        if error.errno == errno.ENXIO:
            raise OSError(error.errno, "no process reads the FIFO") from error
        raise
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (checked.st_dev, checked.st_ino):
            raise OSError(errno.ESTALE, "it was replaced while it was opened")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
