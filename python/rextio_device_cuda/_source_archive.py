"""The source tarballs this package carries, verified and read safely into memory.

A tarball's SHA-256 is checked against the generated digest and the whole
archive is validated in memory before anything is written: every member
lies below the one top folder ``<name>-<version>/``, no name is absolute or
climbs with ``..``, and only regular files and directories are accepted (no
link of either kind, no device, no FIFO), within bounds on size and count.
Writing a tree is its user's business (``runtime_source``, ``_build_probe``).
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path, PurePosixPath
from typing import Final, NamedTuple

# Bounds against a hostile or corrupted archive (the genuine ones are small).
_MAX_ARCHIVE_BYTES: Final[int] = 16 * 1024 * 1024
_MAX_EXTRACTED_BYTES: Final[int] = 64 * 1024 * 1024
_MAX_MEMBERS: Final[int] = 4096
# A packaged tarball is named after its one top folder: `<name>-<version>.tar.gz`.
_ARCHIVE_SUFFIX: Final = ".tar.gz"


class SourceArchiveError(Exception):
    """A packaged source tarball cannot be verified or read; nothing was written."""


class PackagedArchive(NamedTuple):
    """A source tarball: its file, the SHA-256 it must have, and its one top folder."""

    path: Path
    sha256: str
    top_folder: str

    def tree(self) -> SourceTree:
        """Its content, verified against its SHA-256 and read into memory."""
        return source_tree(read_archive(self), self.top_folder)


class SourceTree(NamedTuple):
    """An archive's content below its top folder: directories and (mode, bytes) files."""

    directories: frozenset[PurePosixPath]
    files: dict[PurePosixPath, tuple[int, bytes]]


def packaged_data_path(file_name: str) -> Path:
    """Where the wheel carries a data file (``rextio_device_cuda/_data/``)."""
    return Path(__file__).resolve().parent / "_data" / file_name


def packaged_archive(file_name: str, sha256: str) -> PackagedArchive:
    """The tarball ``file_name`` the wheel carries, with its recorded SHA-256."""
    top_folder = file_name.removesuffix(_ARCHIVE_SUFFIX)
    return PackagedArchive(packaged_data_path(file_name), sha256, top_folder)


def read_archive(archive: PackagedArchive) -> bytes:
    """The archive's bytes, verified against its recorded SHA-256."""
    try:
        with archive.path.open("rb") as handle:
            data = handle.read(_MAX_ARCHIVE_BYTES + 1)
    except OSError as error:
        raise SourceArchiveError(
            f"the packaged source archive {archive.path.name} is missing"
        ) from error
    if len(data) > _MAX_ARCHIVE_BYTES:
        raise SourceArchiveError(f"the source archive {archive.path.name} is too large")
    if hashlib.sha256(data).hexdigest() != archive.sha256:
        raise SourceArchiveError(
            f"the source archive {archive.path.name} does not match its recorded SHA-256"
        )
    return data


def _relative_member_path(name: str, top_folder: str) -> PurePosixPath | None:
    """The path below the top folder; None for the top folder itself."""
    if "\\" in name or "\0" in name:
        raise SourceArchiveError("the archive holds a name with a backslash or NUL")
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or "." in name.split("/")[:-1]:
        raise SourceArchiveError("the archive holds an absolute or escaping name")
    parts = path.parts
    if not parts or parts[0] != top_folder:
        raise SourceArchiveError("the archive holds a name outside its top folder")
    if len(parts) == 1:
        return None
    return PurePosixPath(*parts[1:])


def source_tree(data: bytes, top_folder: str) -> SourceTree:
    """Every entry of the archive, validated and read into memory."""
    directories: set[PurePosixPath] = set()
    files: dict[PurePosixPath, tuple[int, bytes]] = {}
    total = 0
    try:
        archive = tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")  # noqa: SIM115
    except (tarfile.TarError, OSError, EOFError) as error:
        raise SourceArchiveError("the source archive is not a gzip tarball") from error
    try:
        with archive:
            for count, member in enumerate(archive, start=1):
                if count > _MAX_MEMBERS:
                    raise SourceArchiveError("the archive holds too many entries")
                relative = _relative_member_path(member.name, top_folder)
                if not (member.isreg() or member.isdir()):
                    raise SourceArchiveError(
                        "the archive holds a link, device or other special entry"
                    )
                if relative is None:
                    if not member.isdir():
                        raise SourceArchiveError("the archive's top folder is not a directory")
                    continue
                if relative in directories or relative in files:
                    raise SourceArchiveError("the archive holds a duplicate name")
                if member.isdir():
                    directories.add(relative)
                    continue
                total += member.size
                if total > _MAX_EXTRACTED_BYTES:
                    raise SourceArchiveError("the archive expands beyond its size bound")
                extracted = archive.extractfile(member)
                if extracted is None:
                    raise SourceArchiveError("an archive file could not be read")
                with extracted:
                    files[relative] = (0o755 if member.mode & 0o111 else 0o644, extracted.read())
    except (tarfile.TarError, OSError, EOFError) as error:
        raise SourceArchiveError("the source archive is corrupt") from error
    for path in files:
        directories.update(path.parents)
    directories.discard(PurePosixPath("."))
    if any(path in directories for path in files):
        raise SourceArchiveError("the archive holds a name that is both a file and a folder")
    return SourceTree(frozenset(directories), files)
