"""What the dynamic loader would bring into a pinned ELF probe, checked before it runs.

The pin hashes the probe's bytes; the program interpreter (``PT_INTERP``)
and the libraries it loads are other files. A pinned probe is run only when
those can be root's alone: its interpreter must be a root-owned regular file
that neither group nor others may write, reached from ``/`` through
root-owned directories that neither group nor others may write (every
symbolic link on the way followed by the same rule); and it may carry no
``DT_RPATH`` or ``DT_RUNPATH`` and name no ``DT_NEEDED`` library by a path,
so that its libraries come only from the system's own directories (the probe
runs with an empty environment, so no ``LD_LIBRARY_PATH``).

The headers are read from the sealed copy (what will run), each read
bounded; an ELF whose headers cannot be read whole and consistently is
refused (fail closed). A file that is not ELF is left to ``exec``.
"""

from __future__ import annotations

import os
import stat
import struct
from typing import Final, NamedTuple

from rextio_device_cuda import _codes
from rextio_device_cuda._errors import CudaProbeError

_ELF_MAGIC: Final[bytes] = b"\x7fELF"
_PT_DYNAMIC: Final[int] = 2
_PT_INTERP: Final[int] = 3
_PT_LOAD: Final[int] = 1
_DT_NULL: Final[int] = 0
_DT_NEEDED: Final[int] = 1
_DT_STRTAB: Final[int] = 5
_DT_STRSZ: Final[int] = 10
_DT_RPATH: Final[int] = 15
_DT_RUNPATH: Final[int] = 29
# Bounds on what is read (a real probe's are far below each).
_MAX_PROGRAM_HEADERS: Final[int] = 256
_MAX_INTERPRETER_BYTES: Final[int] = 4096
_MAX_DYNAMIC_BYTES: Final[int] = 1 << 16
_MAX_STRING_TABLE_BYTES: Final[int] = 1 << 20
# The kernel's own limit on symbolic links followed in one lookup.
_MAX_LINKS: Final[int] = 40


class _Layout(NamedTuple):
    """How one ELF class lays out its headers (``struct`` formats without byte order)."""

    header: str
    program_header: str
    dynamic_entry: str


_ELF32: Final = _Layout(header="HHIIIIIHHHHHH", program_header="IIIIIIII", dynamic_entry="iI")
_ELF64: Final = _Layout(header="HHIQQQIHHHHHH", program_header="IIQQQQQQ", dynamic_entry="qQ")


class _Segment(NamedTuple):
    kind: int
    offset: int
    address: int
    file_size: int


def _refused(facts: str) -> CudaProbeError:
    return CudaProbeError(_codes.PROBE_PIN_LOADER_UNTRUSTED, facts=facts)


def _malformed(what: str) -> CudaProbeError:
    return _refused(
        f"the pinned ELF's {what} cannot be read consistently, so what it loads is unknown"
    )


def _read_exactly(descriptor: int, offset: int, size: int, what: str) -> bytes:
    data = os.pread(descriptor, size, offset) if size > 0 else b""
    if len(data) != size:
        raise _malformed(what)
    return data


def check_loader(descriptor: int) -> None:
    """Refuse the ELF in ``descriptor`` (the sealed copy) if its loader is not root's alone."""
    ident = os.pread(descriptor, 16, 0)
    if not ident.startswith(_ELF_MAGIC):
        return  # not ELF: exec decides (ENOEXEC), nothing is loaded for it
    if len(ident) != 16 or ident[4] not in (1, 2) or ident[5] not in (1, 2):
        raise _malformed("identification")
    layout = _ELF32 if ident[4] == 1 else _ELF64
    order = "<" if ident[5] == 1 else ">"
    segments = _program_headers(descriptor, layout, order)
    interpreters = [segment for segment in segments if segment.kind == _PT_INTERP]
    dynamics = [segment for segment in segments if segment.kind == _PT_DYNAMIC]
    if len(interpreters) > 1 or len(dynamics) > 1:
        raise _malformed("program headers")
    if interpreters:
        _check_interpreter(_interpreter_path(descriptor, interpreters[0]))
    if dynamics:
        _check_dynamic(descriptor, layout, order, dynamics[0], segments)


def _program_headers(descriptor: int, layout: _Layout, order: str) -> list[_Segment]:
    header_format = order + layout.header
    header = _read_exactly(descriptor, 16, struct.calcsize(header_format), "header")
    fields = struct.unpack(header_format, header)
    phoff, phentsize, phnum = fields[4], fields[8], fields[9]
    entry_format = order + layout.program_header
    entry_size = struct.calcsize(entry_format)
    if phentsize != entry_size or phnum > _MAX_PROGRAM_HEADERS:
        raise _malformed("program headers")
    table = _read_exactly(descriptor, phoff, phnum * entry_size, "program headers")
    segments = []
    for index in range(phnum):
        entry = struct.unpack_from(entry_format, table, index * entry_size)
        if layout is _ELF64:
            kind, _, offset, address, _, file_size = entry[:6]
        else:
            kind, offset, address, _, file_size = entry[:5]
        segments.append(_Segment(kind, offset, address, file_size))
    return segments


def _interpreter_path(descriptor: int, segment: _Segment) -> str:
    if not 0 < segment.file_size <= _MAX_INTERPRETER_BYTES:
        raise _malformed("program interpreter")
    # The kernel reads PT_INTERP by its file offset: so is it read here.
    data = _read_exactly(descriptor, segment.offset, segment.file_size, "program interpreter")
    path, terminator, _ = data.partition(b"\0")
    if not terminator or not path:
        raise _malformed("program interpreter")
    return os.fsdecode(path)


def _check_interpreter(path: str) -> None:
    if not path.startswith("/"):
        raise _refused("the pinned ELF names a relative program interpreter")
    reason = untrusted_reason(path)
    if reason is not None:
        raise _refused(f"the pinned ELF's program interpreter is not root's alone: {reason}")


def untrusted_reason(path: str) -> str | None:
    """Why the file at the absolute ``path`` could be changed by someone but
    root, or None when only root can change it (and every directory and
    symbolic link that leads to it)."""
    pending = [part for part in path.split("/") if part]
    current = "/"
    reason = _untrusted_directory(current)
    links = 0
    while reason is None and pending:
        name = pending.pop(0)
        if name == ".":
            continue
        if name == "..":
            current = os.path.dirname(current)  # already checked on the way down
            continue
        candidate = os.path.join(current, name)
        try:
            status = os.lstat(candidate)
        except OSError:
            return "a directory or file on its path does not exist"
        if stat.S_ISLNK(status.st_mode):
            links += 1
            if links > _MAX_LINKS:
                return "its path follows too many symbolic links"
            target = os.readlink(candidate)
            if target.startswith("/"):
                current = "/"
            pending[:0] = [part for part in target.split("/") if part]
            continue
        if pending:
            reason = _untrusted_status(status, directory=True)
            current = candidate
        else:
            reason = _untrusted_status(status, directory=False)
    return reason


def _untrusted_directory(path: str) -> str | None:
    try:
        return _untrusted_status(os.lstat(path), directory=True)
    except OSError:
        return "a directory on its path cannot be examined"


def _untrusted_status(status: os.stat_result, *, directory: bool) -> str | None:
    kind = "a directory on its path" if directory else "the interpreter"
    if directory and not stat.S_ISDIR(status.st_mode):
        return f"{kind} is not a directory"
    if not directory and not stat.S_ISREG(status.st_mode):
        return f"{kind} is not a regular file"
    if status.st_uid != 0:
        return f"{kind} is owned by uid {status.st_uid}, not root"
    if status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        mode = stat.S_IMODE(status.st_mode)
        return f"{kind} may be written by its group or others (mode {mode:04o})"
    return None


def _check_dynamic(
    descriptor: int, layout: _Layout, order: str, dynamic: _Segment, segments: list[_Segment]
) -> None:
    # The loader reads the dynamic section where it is mapped (its address);
    # the bytes read here by offset must be those bytes.
    if _file_offset(dynamic.address, dynamic.file_size, segments) != dynamic.offset:
        raise _malformed("dynamic section")
    if dynamic.file_size > _MAX_DYNAMIC_BYTES:
        raise _malformed("dynamic section")
    entry_format = order + layout.dynamic_entry
    entry_size = struct.calcsize(entry_format)
    data = _read_exactly(descriptor, dynamic.offset, dynamic.file_size, "dynamic section")
    needed: list[int] = []
    string_table: int | None = None
    string_table_size = 0
    for index in range(dynamic.file_size // entry_size):
        tag, value = struct.unpack_from(entry_format, data, index * entry_size)
        if tag == _DT_NULL:
            break
        if tag in (_DT_RPATH, _DT_RUNPATH):
            name = "DT_RPATH" if tag == _DT_RPATH else "DT_RUNPATH"
            raise _refused(
                f"the pinned ELF carries {name}: libraries could be loaded from "
                "directories outside the system's own"
            )
        if tag == _DT_NEEDED:
            needed.append(value)
        elif tag == _DT_STRTAB:
            string_table = value
        elif tag == _DT_STRSZ:
            string_table_size = value
    else:
        raise _malformed("dynamic section")  # no DT_NULL: where it ends is unknown
    if needed:
        _check_needed(descriptor, needed, string_table, string_table_size, segments)


def _check_needed(
    descriptor: int,
    needed: list[int],
    string_table: int | None,
    size: int,
    segments: list[_Segment],
) -> None:
    if string_table is None or not 0 < size <= _MAX_STRING_TABLE_BYTES:
        raise _malformed("string table")
    offset = _file_offset(string_table, size, segments)
    if offset is None:
        raise _malformed("string table")
    strings = _read_exactly(descriptor, offset, size, "string table")
    for start in needed:
        end = strings.find(b"\0", start)
        if start >= size or end == -1:
            raise _malformed("string table")
        if b"/" in strings[start:end]:
            raise _refused(
                "the pinned ELF names a needed library by a path, not a name the "
                "loader looks up in the system's own directories"
            )


def _file_offset(address: int, size: int, segments: list[_Segment]) -> int | None:
    """The file offset of ``size`` bytes mapped at ``address`` by a PT_LOAD, or None."""
    for segment in segments:
        if (
            segment.kind == _PT_LOAD
            and segment.address <= address
            and address + size <= segment.address + segment.file_size
        ):
            return segment.offset + (address - segment.address)
    return None
