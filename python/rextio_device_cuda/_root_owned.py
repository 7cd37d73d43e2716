"""Whether a file is root's alone: the ownership rules shared with the driver loader.

The reviewed driver loader (``loader/src/reviewed.rs``) and the pinned
probe's interpreter check apply one rule set, and both test suites run one
table of cases (``probe/tests/ownership_cases.json``); each refusal names the
loader's rule (docs/interfaces.md gives each rule its reason):

- ``owner``: every directory walked, every symbolic link followed and the
  file itself are owned by root;
- ``writable-directory``: a directory walked has no group/other write bit,
  unless it is sticky and root's (the Nix store, ``root:nixbld 1775``), and
  then the entry below it must be root's (nobody else can rename or unlink
  it);
- ``mode``: the file has no group/other write bit;
- ``links``: the file has one hard link, or lies on a read-only mount;
- ``regular-file``: the file is a regular file;
- ``resolution``: a link dangles, loops or passes 40 links (the kernel's own
  limit), or a component cannot be opened or inspected.

The walk opens each component with ``O_PATH | O_NOFOLLOW`` relative to the
directory before it and checks it through its own descriptor, as the loader
does; a link is followed by reading it through its descriptor. The driver
loader's own checks beyond these (its reviewed roots and the floor of its
write-bit check) stay in Rust.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Final, NamedTuple

from rextio_device_cuda import _loader_rules as _rules

# The kernel's own limit on symbolic links followed in one lookup (the loader's MAX_LINKS).
MAX_LINKS: Final[int] = 40
ROOT_UID: Final[int] = 0
# A verdict that is no refusal: nothing exists at the path (as lstat says).
ABSENT: Final[str] = "absent"
_GROUP_OR_OTHER_WRITE: Final[int] = stat.S_IWGRP | stat.S_IWOTH
_OPEN_FLAGS: Final[int] = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


class Finding(NamedTuple):
    """Why a path is not root's alone: the loader's rule name and a sentence."""

    rule: str
    explanation: str


class _Directory(NamedTuple):
    descriptor: int
    path: str
    writable_by_others: bool


def review(path: str, *, refused_directories: tuple[str, ...] = ()) -> Finding | None:
    """None when only root can change the file at the absolute ``path`` (and
    every directory and link that leads to it); else why not. A path that
    leads nowhere is ``Finding(ABSENT, ...)``. A walk that enters one of
    ``refused_directories`` (absolute, canonical) is refused by ``location``.
    """
    if not path.startswith("/"):
        return Finding(_rules.RESOLUTION, "the path is not absolute")
    opened: list[int] = []
    try:
        return _walk(path, opened, refused_directories)
    finally:
        for descriptor in opened:
            os.close(descriptor)


def _components(path: str) -> list[str]:
    return [part for part in path.split("/") if part and part != "."]


def _open(name: str, directory: int | None, opened: list[int]) -> int:
    descriptor = os.open(name, _OPEN_FLAGS, dir_fd=directory)
    opened.append(descriptor)
    return descriptor


def _walk(path: str, opened: list[int], refused_directories: tuple[str, ...]) -> Finding | None:
    pending = _components(path)
    try:
        root = _open("/", None, opened)
        root_status = os.fstat(root)
    except OSError:
        return Finding(_rules.RESOLUTION, "/ cannot be examined")
    finding = _check_directory(root_status)
    if finding is not None:
        return finding
    stack = [_Directory(root, "/", bool(root_status.st_mode & _GROUP_OR_OTHER_WRITE))]
    links = 0
    # Until the path's own last component has been followed as a link, a
    # missing component means nothing is there; afterwards a link dangles.
    followed_final_link = False
    refused: Finding | None = None

    def missing() -> Finding:
        if followed_final_link:
            return Finding(_rules.RESOLUTION, "a symbolic link on its path leads nowhere")
        return Finding(ABSENT, "nothing exists at that path")

    while pending:
        name = pending.pop(0)
        if name == "..":
            if len(stack) > 1:
                stack.pop()
            continue
        parent = stack[-1]
        candidate = os.path.join(parent.path, name)
        try:
            descriptor = _open(name, parent.descriptor, opened)
        except OSError as error:
            if error.errno in (errno.ENOENT, errno.ENOTDIR):
                return missing()
            return Finding(_rules.RESOLUTION, "a component of its path cannot be opened")
        except ValueError:  # an embedded NUL
            return Finding(_rules.RESOLUTION, "a component of its path cannot be opened")
        try:
            status = os.fstat(descriptor)
        except OSError:
            return Finding(_rules.RESOLUTION, "a component of its path cannot be examined")
        if parent.writable_by_others and status.st_uid != ROOT_UID and refused is None:
            refused = Finding(
                _rules.WRITABLE_DIRECTORY,
                "an entry of a directory others may write (sticky) is owned by "
                f"uid {status.st_uid}, not root",
            )
        if stat.S_ISLNK(status.st_mode):
            if status.st_uid != ROOT_UID and refused is None:
                refused = Finding(
                    _rules.OWNER, f"a link on its path is owned by uid {status.st_uid}, not root"
                )
            links += 1
            if links > MAX_LINKS:
                return Finding(_rules.RESOLUTION, "its path follows too many symbolic links")
            followed_final_link = followed_final_link or not pending
            try:
                target = os.readlink("", dir_fd=descriptor)
            except OSError:
                return Finding(_rules.RESOLUTION, "a link on its path cannot be read")
            if not target:
                return Finding(_rules.RESOLUTION, "a link on its path is empty")
            if target.startswith("/"):
                del stack[1:]
            pending[:0] = _components(target)
        elif stat.S_ISDIR(status.st_mode):
            if candidate in refused_directories:
                return Finding(_rules.LOCATION, f"its path leads through {candidate}")
            finding = _check_directory(status)
            if finding is not None and refused is None:
                refused = finding
            writable = bool(status.st_mode & _GROUP_OR_OTHER_WRITE)
            stack.append(_Directory(descriptor, candidate, writable))
        elif pending:
            return missing()  # a file where a directory should be: ENOTDIR
        else:
            return refused if refused is not None else _check_file(descriptor, status)
    return refused if refused is not None else Finding(_rules.REGULAR_FILE, "it is a directory")


def _check_directory(status: os.stat_result) -> Finding | None:
    if status.st_uid != ROOT_UID:
        return Finding(
            _rules.OWNER, f"a directory on its path is owned by uid {status.st_uid}, not root"
        )
    writable = status.st_mode & _GROUP_OR_OTHER_WRITE
    if writable and not status.st_mode & stat.S_ISVTX:
        mode = stat.S_IMODE(status.st_mode)
        return Finding(
            _rules.WRITABLE_DIRECTORY,
            f"a directory on its path may be written by its group or others (mode {mode:04o})",
        )
    return None


def _check_file(descriptor: int, status: os.stat_result) -> Finding | None:
    if not stat.S_ISREG(status.st_mode):
        return Finding(_rules.REGULAR_FILE, "it is not a regular file")
    if status.st_uid != ROOT_UID:
        return Finding(_rules.OWNER, f"the file is owned by uid {status.st_uid}, not root")
    if status.st_mode & _GROUP_OR_OTHER_WRITE:
        mode = stat.S_IMODE(status.st_mode)
        return Finding(
            _rules.MODE, f"the file may be written by its group or others (mode {mode:04o})"
        )
    if status.st_nlink != 1 and not _on_read_only_mount(descriptor):
        return Finding(
            _rules.LINKS,
            f"the file has {status.st_nlink} hard links on a writable mount "
            "(a second link passes only on a read-only mount)",
        )
    return None


def _on_read_only_mount(descriptor: int) -> bool:
    """Whether the checked file's own mount is read-only; any failure counts as writable."""
    try:
        return bool(os.fstatvfs(descriptor).f_flag & os.ST_RDONLY)
    except OSError:
        return False
