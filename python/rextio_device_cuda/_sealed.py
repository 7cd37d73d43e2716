"""The sealed pin: the bytes that were hashed are the bytes that run.

See docs/interfaces.md, "Probe pin (`probe_sha256`)".

Linux: the probe is opened once with ``O_PATH | O_NOFOLLOW`` (so neither a
final symlink is followed nor a FIFO or device opened for reading), checked
on that descriptor (a regular file with an execute bit, at most
``MAX_PINNED_PROBE_BYTES``), reopened through ``/proc/self/fd`` (the same
inode, no second lookup by name), copied into a memfd, sealed against every
change (``F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL``), and
only then hashed. The runner executes that memfd; rewriting or replacing the
file afterwards changes nothing. A file starting with ``#!`` is refused: its
interpreter would run unpinned. The memfd is kept at
a descriptor of 3 or above: the child's stdin, stdout and stderr are put
over 0-2 before the exec of ``/proc/self/fd/N``, so a host started with one
of them closed must not have its sealed copy there.

Elsewhere there is no sealed copy: the file is read (bounded) and hashed, so
``pin-probe`` works, but a pinned run is refused by the runner.
"""

from __future__ import annotations

import hashlib
import math
import os
import stat
import sys
import time
from typing import Final

from rextio_device_cuda import _codes
from rextio_device_cuda._errors import CudaProbeError, os_error_text
from rextio_device_cuda._provider_spec import PROVIDER_SPEC

MAX_PINNED_PROBE_BYTES: Final[int] = PROVIDER_SPEC.probe_runner.max_pinned_probe_bytes
IS_LINUX: Final[bool] = sys.platform.startswith("linux")
if sys.platform != "win32":
    import fcntl
_CHUNK: Final[int] = 1 << 20
_SCRIPT_MAGIC: Final[bytes] = b"#!"
# linux/memfd.h; Python 3.11's os module does not name MFD_EXEC (Linux 6.3+).
_MFD_EXEC: Final[int] = 0x0010
# linux/fcntl.h: F_ADD_SEALS and every seal (write, grow, shrink, seal).
_F_ADD_SEALS: Final[int] = 1033
_SEALS: Final[int] = 0x0008 | 0x0004 | 0x0002 | 0x0001
# Above stdin, stdout and stderr, which the child's own streams replace.
_FIRST_FREE_DESCRIPTOR: Final[int] = 3
SCRIPT_FACTS: Final[str] = "the pinned file begins with #!, so its interpreter would run unpinned"
NOEXEC_DETAIL: Final[str] = (
    "the kernel refuses an executable memfd (sysctl vm.memfd_noexec = 2), so the sealed "
    "copy of the pinned probe cannot run; the unsealed file is never run instead"
)


class SealedProbe:
    """A pinned probe's digest and, on Linux, the sealed memfd holding its bytes."""

    def __init__(self, digest: str, descriptor: int | None) -> None:
        self.digest = digest
        self.descriptor = descriptor

    def close(self) -> None:
        """Close the memfd (the running probe keeps its own mapping)."""
        if self.descriptor is not None:
            os.close(self.descriptor)
            self.descriptor = None


def sha256_of_descriptor(descriptor: int, deadline: float = math.inf) -> str:
    """The SHA-256 (lowercase hex) of everything readable from ``descriptor``.

    Reads until end of file. Each read asks for what the file's size says is
    left, at most a chunk, so a read's buffer is never far larger than the
    probe (a 1 MiB buffer costs more than hashing a small probe); at that
    size one byte shows the end, and a file that grew is read on in chunks.
    """
    size = os.fstat(descriptor).st_size
    digest = hashlib.sha256()
    offset = 0
    while True:
        _check_deadline(deadline)
        left = size - offset
        wanted = min(left, _CHUNK) if left > 0 else 1 if left == 0 else _CHUNK
        chunk = os.pread(descriptor, wanted, offset)
        if not chunk:
            return digest.hexdigest()
        digest.update(chunk)
        offset += len(chunk)


def _check_deadline(deadline: float) -> None:
    if time.monotonic() >= deadline:
        raise CudaProbeError(_codes.PROBE_TIMEOUT)


def file_kind(mode: int) -> str:
    """What ``mode`` names, for a refusal's facts: ``a directory``, ``a FIFO``."""
    for test, kind in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


def _mebibytes(size: int) -> str:
    return f"{size / (1 << 20):,.1f} MiB".replace(".0 MiB", " MiB")


def too_large_facts(size: int | None) -> str:
    """``the pinned file is 70 MiB (73,400,320 bytes), over the 64 MiB bound``."""
    bound = _mebibytes(MAX_PINNED_PROBE_BYTES)
    if size is None:
        return f"the pinned file grew past the {bound} bound while it was copied"
    return f"the pinned file is {_mebibytes(size)} ({size:,} bytes), over the {bound} bound"


def _checked_status(descriptor: int) -> os.stat_result:
    status = os.fstat(descriptor)
    if not stat.S_ISREG(status.st_mode):
        raise CudaProbeError(
            _codes.PROBE_NOT_EXECUTABLE,
            facts=f"the probe is {file_kind(status.st_mode)}, not a regular file",
        )
    if not status.st_mode & 0o111:
        raise CudaProbeError(
            _codes.PROBE_NOT_EXECUTABLE,
            facts=f"the probe file's mode is {stat.S_IMODE(status.st_mode):04o}, no execute bit",
        )
    if status.st_size > MAX_PINNED_PROBE_BYTES:
        raise CudaProbeError(_codes.PROBE_TOO_LARGE, facts=too_large_facts(status.st_size))
    return status


def _open_for_reading(resolved: str) -> int:
    """Open the resolved probe once and check it before any byte is read."""
    try:
        if not IS_LINUX:
            # No O_PATH: O_NONBLOCK keeps a FIFO from blocking the open.
            flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
            descriptor = os.open(resolved, flags | getattr(os, "O_CLOEXEC", 0))
            try:
                _checked_status(descriptor)
            except BaseException:
                os.close(descriptor)
                raise
            return descriptor
        handle = os.open(resolved, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError as error:
        raise CudaProbeError(
            _codes.PROBE_NOT_FOUND, facts="the probe disappeared after it was resolved"
        ) from error
    except OSError as error:
        # ELOOP: a symlink swapped in after resolution; EACCES: no search permission.
        raise CudaProbeError(
            _codes.PROBE_NOT_EXECUTABLE,
            facts=f"opening the resolved probe failed with {os_error_text(error)}",
        ) from error
    try:
        before = _checked_status(handle)
        try:
            # The magic link names the inode already opened: no lookup by name.
            descriptor = os.open(f"/proc/self/fd/{handle}", os.O_RDONLY | os.O_CLOEXEC)
        except PermissionError as error:
            raise CudaProbeError(
                _codes.PROBE_NOT_EXECUTABLE,
                facts=f"reading the probe failed with {os_error_text(error)}",
            ) from error
        except OSError as error:  # no /proc: nothing can be executed sealed either
            raise CudaProbeError(
                _codes.PROBE_EXECUTION_FAILED,
                facts=f"reopening the probe through procfs failed with {os_error_text(error)}",
            ) from error
    finally:
        os.close(handle)
    after = os.fstat(descriptor)
    if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):  # pragma: no cover
        os.close(descriptor)
        raise CudaProbeError(
            _codes.PROBE_EXECUTION_FAILED, facts="the probe was replaced while it was opened"
        )
    return descriptor


def _noexec_facts(error: OSError) -> str:
    try:
        with open("/proc/sys/vm/memfd_noexec", "rb") as file:
            setting = file.read(8).strip()
    except OSError:
        setting = b""
    refused = f"the kernel refused an executable memfd with {os_error_text(error)}"
    if setting.isdigit():
        return f"vm.memfd_noexec is {setting.decode()}; {refused}"
    return refused


def _executable_memfd() -> int:
    """A new executable memfd at a descriptor of 3 or above."""
    memfd = _new_executable_memfd()
    if memfd >= _FIRST_FREE_DESCRIPTOR:
        return memfd
    try:
        return fcntl.fcntl(memfd, fcntl.F_DUPFD_CLOEXEC, _FIRST_FREE_DESCRIPTOR)
    except OSError as error:
        raise CudaProbeError(
            _codes.PROBE_EXECUTION_FAILED,
            facts=f"moving the sealed copy above the standard streams failed with "
            f"{os_error_text(error)}",
        ) from error
    finally:
        os.close(memfd)


def _new_executable_memfd() -> int:
    flags = os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING
    try:
        return os.memfd_create("rextio-cuda-probe", flags | _MFD_EXEC)
    except OSError as error:
        if error.errno in (1, 13):  # EPERM, EACCES: vm.memfd_noexec = 2
            raise CudaProbeError(
                _codes.PROBE_EXECUTION_FAILED, NOEXEC_DETAIL, facts=_noexec_facts(error)
            ) from error
        if error.errno != 22:  # EINVAL: a kernel before 6.3 does not know MFD_EXEC
            raise CudaProbeError(
                _codes.PROBE_EXECUTION_FAILED,
                facts=f"creating the sealed copy failed with {os_error_text(error)}",
            ) from error
    try:
        # Before 6.3 every memfd is executable, and no sysctl forbids it.
        return os.memfd_create("rextio-cuda-probe", flags)
    except OSError as error:
        raise CudaProbeError(
            _codes.PROBE_EXECUTION_FAILED,
            facts=f"creating the sealed copy failed with {os_error_text(error)}",
        ) from error


def _sealed_copy(source: int, deadline: float) -> int:
    """A sealed memfd holding the bytes of ``source`` (at most the bound)."""
    memfd = _executable_memfd()
    try:
        copied = 0
        while True:
            _check_deadline(deadline)
            # One byte past the bound is enough to know the file grew past it.
            wanted = min(_CHUNK, MAX_PINNED_PROBE_BYTES + 1 - copied)
            sent = os.sendfile(memfd, source, None, wanted)
            if not sent:
                break
            copied += sent
            if copied > MAX_PINNED_PROBE_BYTES:
                raise CudaProbeError(_codes.PROBE_TOO_LARGE, facts=too_large_facts(None))
        fcntl.fcntl(memfd, _F_ADD_SEALS, _SEALS)
    except OSError as error:
        os.close(memfd)
        raise CudaProbeError(
            _codes.PROBE_EXECUTION_FAILED,
            facts=f"copying the probe into its sealed copy failed with {os_error_text(error)}",
        ) from error
    except BaseException:
        os.close(memfd)
        raise
    return memfd


def _bounded_bytes(source: int, deadline: float) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        _check_deadline(deadline)
        chunk = os.read(source, min(_CHUNK, MAX_PINNED_PROBE_BYTES + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_PINNED_PROBE_BYTES:
            raise CudaProbeError(_codes.PROBE_TOO_LARGE, facts=too_large_facts(None))


def seal(resolved: str, deadline: float = math.inf) -> SealedProbe:
    """Open, check, copy, seal and hash the probe at the resolved path ``resolved``.

    Raises ``CudaProbeError``: the runner's path codes, ``PROBE_TOO_LARGE``,
    ``PROBE_PIN_SCRIPT_UNSUPPORTED``, ``PROBE_TIMEOUT`` past ``deadline``,
    ``PROBE_EXECUTION_FAILED`` when no sealed copy can be made.
    """
    source = _open_for_reading(resolved)
    try:
        if not IS_LINUX:
            data = _bounded_bytes(source, deadline)
            if data.startswith(_SCRIPT_MAGIC):
                raise CudaProbeError(_codes.PROBE_PIN_SCRIPT_UNSUPPORTED, facts=SCRIPT_FACTS)
            return SealedProbe(hashlib.sha256(data).hexdigest(), None)
        memfd = _sealed_copy(source, deadline)
    except OSError as error:  # a read failure of the opened file
        raise CudaProbeError(
            _codes.PROBE_EXECUTION_FAILED,
            facts=f"reading the probe failed with {os_error_text(error)}",
        ) from error
    finally:
        os.close(source)
    sealed = SealedProbe("", memfd)
    try:
        # Read back from the sealed copy: nothing can change these bytes now.
        if os.pread(memfd, len(_SCRIPT_MAGIC), 0) == _SCRIPT_MAGIC:
            raise CudaProbeError(_codes.PROBE_PIN_SCRIPT_UNSUPPORTED, facts=SCRIPT_FACTS)
        sealed.digest = sha256_of_descriptor(memfd, deadline)
    except OSError as error:
        sealed.close()
        raise CudaProbeError(
            _codes.PROBE_EXECUTION_FAILED,
            facts=f"hashing the sealed copy failed with {os_error_text(error)}",
        ) from error
    except BaseException:
        sealed.close()
        raise
    return sealed
