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
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import Final

_CREATE_FLAGS: Final[int] = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
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
