"""What the dynamic loader would bring into a pinned ELF probe, checked before it runs.

The pin hashes the probe's bytes; the program interpreter (``PT_INTERP``)
and the libraries it loads are other files. A pinned probe is run only when
those can be root's alone. The ELF is read as the kernel maps it and as
``ld.so`` then reads it from memory, and only what an ordinary C or Rust
program carries is accepted (an allowlist, not a list of known tricks):

- the program header table lies where every standard linker puts it: right
  after the ELF header, wholly in the first ``PT_LOAD`` (which maps the file
  from offset 0) and in no other ``PT_LOAD``'s file bytes. The kernel gives
  ``ld.so`` (``AT_PHDR``) the table where the *last* ``PT_LOAD`` holding it
  maps it, and ``ld.so`` finds ``PT_DYNAMIC`` through that copy: were a
  second one to map it, ``ld.so`` would read headers this check never read;
- ``PT_PHDR`` is the first program header and names exactly that table
  (offset, address, size); a program with ``PT_INTERP`` carries it (``ld.so``
  takes the load bias from it), as every linked program of this host does;
- ``PT_LOAD`` segments are sorted by address and share no page, each mapping
  file bytes that exist, so every address maps one file offset;
- ``PT_DYNAMIC``, ``PT_INTERP`` and the string table lie wholly inside one
  ``PT_LOAD``'s file bytes at the offset that segment maps them from, so
  what is read here by offset is what the kernel and ``ld.so`` read;
- only the dynamic tags such programs carry, each once (``DT_NEEDED`` may
  repeat): never ``DT_AUDIT``, ``DT_DEPAUDIT``, ``DT_RPATH``, ``DT_RUNPATH``
  or any tag not known here;
- each library needed is a plain name (no ``/``, no ``$`` token such as
  ``$ORIGIN``), so it comes only from the system's own directories (the
  probe runs with an empty environment, so no ``LD_LIBRARY_PATH``);
- ``PT_INTERP`` is a plain canonical absolute path outside ``/proc`` and
  ``/dev``, and the file it names is root's alone by the driver loader's
  rules (``_root_owned``).

The headers are read from the sealed copy (what will run), each read
bounded; an ELF that cannot be read whole and consistently is refused
(fail closed). A file that is not ELF is left to ``exec``.
"""

from __future__ import annotations

import os
import struct
from typing import Final, NamedTuple

from rextio_device_cuda import _codes, _root_owned
from rextio_device_cuda._errors import CudaProbeError

_ELF_MAGIC: Final[bytes] = b"\x7fELF"
_ET_EXEC: Final[int] = 2
_ET_DYN: Final[int] = 3
_EM_X86_64: Final[int] = 62
_EM_AARCH64: Final[int] = 183
_PT_LOAD: Final[int] = 1
_PT_DYNAMIC: Final[int] = 2
_PT_INTERP: Final[int] = 3
_PT_PHDR: Final[int] = 6
_DT_NULL: Final[int] = 0
_DT_NEEDED: Final[int] = 1
_DT_STRTAB: Final[int] = 5
_DT_STRSZ: Final[int] = 10
# The dynamic tags ordinary C and Rust programs carry (gcc and rustc output,
# the system's own programs): every other tag is refused, whatever it is.
_ORDINARY_TAGS: Final[dict[int, str]] = {
    1: "DT_NEEDED",
    2: "DT_PLTRELSZ",
    3: "DT_PLTGOT",
    4: "DT_HASH",
    5: "DT_STRTAB",
    6: "DT_SYMTAB",
    7: "DT_RELA",
    8: "DT_RELASZ",
    9: "DT_RELAENT",
    10: "DT_STRSZ",
    11: "DT_SYMENT",
    12: "DT_INIT",
    13: "DT_FINI",
    17: "DT_REL",
    18: "DT_RELSZ",
    19: "DT_RELENT",
    20: "DT_PLTREL",
    21: "DT_DEBUG",
    23: "DT_JMPREL",
    24: "DT_BIND_NOW",
    25: "DT_INIT_ARRAY",
    26: "DT_FINI_ARRAY",
    27: "DT_INIT_ARRAYSZ",
    28: "DT_FINI_ARRAYSZ",
    30: "DT_FLAGS",
    32: "DT_PREINIT_ARRAY",
    33: "DT_PREINIT_ARRAYSZ",
    35: "DT_RELRSZ",
    36: "DT_RELR",
    37: "DT_RELRENT",
    0x6FFFFEF5: "DT_GNU_HASH",
    0x6FFFFFF0: "DT_VERSYM",
    0x6FFFFFF9: "DT_RELACOUNT",
    0x6FFFFFFA: "DT_RELCOUNT",
    0x6FFFFFFB: "DT_FLAGS_1",
    0x6FFFFFFE: "DT_VERNEED",
    0x6FFFFFFF: "DT_VERNEEDNUM",
}
# Processor-specific tags (their numbers overlap between machines).
_MACHINE_TAGS: Final[dict[int, dict[int, str]]] = {
    _EM_X86_64: {
        0x70000000: "DT_X86_64_PLT",
        0x70000001: "DT_X86_64_PLTSZ",
        0x70000003: "DT_X86_64_PLTENT",
    },
    _EM_AARCH64: {
        0x70000001: "DT_AARCH64_BTI_PLT",
        0x70000003: "DT_AARCH64_PAC_PLT",
        0x70000005: "DT_AARCH64_VARIANT_PCS",
    },
}
# Tags that are never ordinary, named so a refusal says which one it saw.
_NAMED_REFUSED_TAGS: Final[dict[int, str]] = {
    14: "DT_SONAME",
    15: "DT_RPATH",
    29: "DT_RUNPATH",
    0x6FFFFEFA: "DT_CONFIG",
    0x6FFFFEFB: "DT_DEPAUDIT",
    0x6FFFFEFC: "DT_AUDIT",
    0x7FFFFFFD: "DT_AUXILIARY",
    0x7FFFFFFF: "DT_FILTER",
}
# The kernel runs no interpreter from these (it would follow their magic links).
_REFUSED_INTERPRETER_DIRECTORIES: Final[tuple[str, ...]] = ("/proc", "/dev")
# Bounds on what is read (a real probe's are far below each).
_MAX_PROGRAM_HEADERS: Final[int] = 256
_MAX_INTERPRETER_BYTES: Final[int] = 4096
_MAX_DYNAMIC_BYTES: Final[int] = 1 << 16
_MAX_NAME_BYTES: Final[int] = 4096
# The ELF header's size, by the size of one program header (ELF32: 32, ELF64: 56).
_ELF_HEADER_SIZE: Final[dict[int, int]] = {32: 52, 56: 64}


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
    memory_size: int


class _Elf(NamedTuple):
    """The sealed copy's descriptor and what its header says."""

    descriptor: int
    layout: _Layout
    order: str
    machine: int
    loads: list[_Segment]


def _refused(facts: str) -> CudaProbeError:
    return CudaProbeError(_codes.PROBE_PIN_LOADER_UNTRUSTED, facts=facts)


def _malformed(what: str) -> CudaProbeError:
    return _refused(
        f"the pinned ELF's {what} cannot be read consistently, so what it loads is unknown"
    )


def _read_exactly(descriptor: int, offset: int, size: int, what: str) -> bytes:
    if size == 0:
        return b""
    try:
        data = os.pread(descriptor, size, offset)
    except (OSError, OverflowError) as error:  # an offset past what a file can hold
        raise _malformed(what) from error
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
    header_format = order + layout.header
    header = _read_exactly(descriptor, 16, struct.calcsize(header_format), "header")
    fields = struct.unpack(header_format, header)
    kind, machine, phoff, phentsize, phnum = fields[0], fields[1], fields[4], fields[8], fields[9]
    if kind not in (_ET_EXEC, _ET_DYN):
        raise _malformed("header (it is no executable)")
    segments = _program_headers(descriptor, layout, order, phoff, phentsize, phnum)
    loads = _loads(descriptor, segments)
    elf = _Elf(descriptor, layout, order, machine, loads)
    interpreters = [segment for segment in segments if segment.kind == _PT_INTERP]
    dynamics = [segment for segment in segments if segment.kind == _PT_DYNAMIC]
    if len(interpreters) > 1 or len(dynamics) > 1:
        raise _malformed("program headers")
    _check_header_table(segments, loads, phoff, phentsize, bool(interpreters))
    if interpreters:
        _check_interpreter(_interpreter_path(elf, interpreters[0]))
    if dynamics:
        _check_dynamic(elf, dynamics[0])


def _program_headers(
    descriptor: int, layout: _Layout, order: str, phoff: int, phentsize: int, phnum: int
) -> list[_Segment]:
    entry_format = order + layout.program_header
    entry_size = struct.calcsize(entry_format)
    if phentsize != entry_size or not 0 < phnum <= _MAX_PROGRAM_HEADERS:
        raise _malformed("program headers")
    table = _read_exactly(descriptor, phoff, phnum * entry_size, "program headers")
    segments = []
    for index in range(phnum):
        entry = struct.unpack_from(entry_format, table, index * entry_size)
        if layout is _ELF64:
            kind, _, offset, address, _, file_size, memory_size = entry[:7]
        else:
            kind, offset, address, _, file_size, memory_size = entry[:6]
        segments.append(_Segment(kind, offset, address, file_size, memory_size))
    return segments


def _check_header_table(
    segments: list[_Segment], loads: list[_Segment], phoff: int, phentsize: int, interpreted: bool
) -> None:
    """The program header table lies as standard linkers lay it out (see the module's doc):
    else ld.so could read program headers (and a dynamic section) this check did not.

    All 2,372 ELF programs and libraries under /usr of the host this was
    written on, gcc's and rustc's output and the shipped binaries have it.
    """
    size = len(segments) * phentsize
    first = loads[0] if loads else None
    if first is None or first.offset != 0 or phoff != _ELF_HEADER_SIZE[phentsize]:
        raise _refused("the pinned ELF's program headers do not follow its header, mapped from 0")
    if phoff + size > first.file_size:
        raise _refused("the pinned ELF's first loadable segment does not hold its program headers")
    end = phoff + size
    if any(load.offset < end and phoff < load.offset + load.file_size for load in loads[1:]):
        raise _refused("a second loadable segment of the pinned ELF maps its program headers again")
    headers = [index for index, segment in enumerate(segments) if segment.kind == _PT_PHDR]
    if not headers:
        if interpreted:
            raise _refused("the pinned ELF has PT_INTERP but no PT_PHDR")
        return
    table = segments[headers[0]]
    if headers != [0] or (table.offset, table.address, table.file_size, table.memory_size) != (
        phoff,
        first.address + phoff,
        size,
        size,
    ):
        raise _refused("the pinned ELF's PT_PHDR does not name its program headers")


def _loads(descriptor: int, segments: list[_Segment]) -> list[_Segment]:
    """The PT_LOADs, each mapping file bytes that exist, sorted and sharing no page.

    The kernel maps whole pages, a later segment over an earlier one: were
    two to share a page, that page would not hold what one of them says.
    """
    page = os.sysconf("SC_PAGESIZE")
    try:
        file_size = os.fstat(descriptor).st_size
    except OSError as error:
        raise _malformed("size") from error
    loads = [segment for segment in segments if segment.kind == _PT_LOAD]
    previous_end = 0
    for segment in loads:
        if (
            segment.memory_size < segment.file_size
            or segment.offset + segment.file_size > file_size
            or (segment.address - segment.offset) % page != 0
        ):
            raise _malformed("loadable segments")
        start = segment.address - segment.address % page
        end = segment.address + segment.memory_size
        if start < previous_end:
            raise _malformed("loadable segments (they overlap or are out of order)")
        previous_end = -(-end // page) * page
    return loads


def _file_offset(elf: _Elf, address: int, size: int) -> int | None:
    """The file offset of ``size`` bytes mapped at ``address`` from one PT_LOAD's file bytes."""
    for segment in elf.loads:
        if segment.address <= address and address + size <= segment.address + segment.file_size:
            return segment.offset + (address - segment.address)
    return None


def _mapped(elf: _Elf, segment: _Segment, what: str) -> None:
    """``segment``'s file bytes are those a PT_LOAD maps at its address."""
    if _file_offset(elf, segment.address, segment.file_size) != segment.offset:
        raise _malformed(f"{what} (it is not where a loadable segment maps it)")


def _interpreter_path(elf: _Elf, segment: _Segment) -> str:
    if not 1 < segment.file_size <= _MAX_INTERPRETER_BYTES:
        raise _malformed("program interpreter")
    _mapped(elf, segment, "program interpreter")
    data = _read_exactly(elf.descriptor, segment.offset, segment.file_size, "program interpreter")
    path = data[:-1]
    if data[-1:] != b"\0" or b"\0" in path:
        raise _malformed("program interpreter")
    return os.fsdecode(path)


def _check_interpreter(path: str) -> None:
    parts = path.split("/")
    plain = (
        path.startswith("/")
        and all(part not in ("", ".", "..") for part in parts[1:])
        and "$" not in path
    )
    if not plain:
        raise _refused(
            "the pinned ELF's program interpreter is not a plain canonical absolute path"
        )
    if any(
        path == directory or path.startswith(directory + "/")
        for directory in _REFUSED_INTERPRETER_DIRECTORIES
    ):
        raise _refused("the pinned ELF's program interpreter lies under /proc or /dev")
    finding = _root_owned.review(path, refused_directories=_REFUSED_INTERPRETER_DIRECTORIES)
    if finding is not None and finding.rule == _root_owned.ABSENT:
        raise _refused("the pinned ELF's program interpreter does not exist")
    if finding is not None:
        raise _refused(
            "the pinned ELF's program interpreter is not root's alone: "
            f"rule `{finding.rule}`: {finding.explanation}"
        )


def _tag_name(tag: int) -> str:
    return _NAMED_REFUSED_TAGS.get(tag, f"tag {tag:#x}")


def _check_dynamic(elf: _Elf, dynamic: _Segment) -> None:
    # ld.so reads the dynamic section where it is mapped (its address): the
    # bytes read here by offset must be those bytes.
    if dynamic.file_size > _MAX_DYNAMIC_BYTES:
        raise _malformed("dynamic section")
    _mapped(elf, dynamic, "dynamic section")
    entry_format = elf.order + elf.layout.dynamic_entry
    entry_size = struct.calcsize(entry_format)
    data = _read_exactly(elf.descriptor, dynamic.offset, dynamic.file_size, "dynamic section")
    allowed = {**_ORDINARY_TAGS, **_MACHINE_TAGS.get(elf.machine, {})}
    needed: list[int] = []
    seen: set[int] = set()
    values: dict[int, int] = {}
    for index in range(dynamic.file_size // entry_size):
        tag, value = struct.unpack_from(entry_format, data, index * entry_size)
        if tag == _DT_NULL:
            break
        if tag not in allowed:
            raise _refused(
                f"the pinned ELF carries {_tag_name(tag)}, which no ordinary program "
                "carries: what the loader does for it is not reviewed"
            )
        if tag == _DT_NEEDED:
            needed.append(value)
        elif tag in seen:
            raise _malformed(f"dynamic section ({allowed[tag]} twice)")
        seen.add(tag)
        values[tag] = value
    else:
        raise _malformed("dynamic section")  # no DT_NULL: where it ends is unknown
    if needed:
        _check_needed(elf, needed, values.get(_DT_STRTAB), values.get(_DT_STRSZ, 0))


def _check_needed(elf: _Elf, needed: list[int], string_table: int | None, size: int) -> None:
    if string_table is None or size <= 0:
        raise _malformed("string table")
    offset = _file_offset(elf, string_table, size)
    if offset is None:
        raise _malformed("string table")
    for start in needed:
        if start >= size:
            raise _malformed("string table")
        # Each name is read alone, bounded: the table itself may be large.
        length = min(_MAX_NAME_BYTES, size - start)
        name, terminator, _ = _read_exactly(
            elf.descriptor, offset + start, length, "string table"
        ).partition(b"\0")
        if not terminator or not name:
            raise _malformed("string table")
        if b"/" in name:
            raise _refused(
                "the pinned ELF names a needed library by a path, not a name the "
                "loader looks up in the system's own directories"
            )
        if b"$" in name:
            raise _refused(
                "the pinned ELF names a needed library with a $ token ($ORIGIN, $LIB, "
                "$PLATFORM): the loader would expand it into a path"
            )
