"""Installing the packaged runtime source into a project, and refusing hostile archives."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
from pathlib import Path

import pytest

from rextio_device_cuda import _generated
from rextio_device_cuda._provider_spec import PROVIDER_SPEC
from rextio_device_cuda.runtime_source import (
    ARCHIVE_TOP_FOLDER,
    RuntimeSourceError,
    install_runtime_source,
    packaged_archive_path,
    read_runtime_archive,
)

INSTALL = Path(*PROVIDER_SPEC.runtime_package.install_dir.split("/"))
TOP = ARCHIVE_TOP_FOLDER


def _files(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_packaged_archive_matches_its_digest() -> None:
    data = packaged_archive_path().read_bytes()
    assert hashlib.sha256(data).hexdigest() == _generated.RUNTIME_SOURCE_SHA256
    assert read_runtime_archive() == data


def test_install_is_complete_and_idempotent(tmp_path: Path) -> None:
    assert install_runtime_source(tmp_path) is True
    installed = tmp_path / INSTALL
    assert (installed / "Cargo.toml").is_file()
    with tarfile.open(packaged_archive_path()) as archive:
        expected = {member.name.removeprefix(f"{TOP}/") for member in archive if member.isreg()}
    assert set(_files(installed)) == expected
    assert install_runtime_source(tmp_path) is False
    assert [p.name for p in installed.parent.iterdir()] == [INSTALL.name]


def test_refuses_to_overwrite_different_content(tmp_path: Path) -> None:
    install_runtime_source(tmp_path)
    cargo = tmp_path / INSTALL / "Cargo.toml"
    cargo.write_text("[package]\nname = 'changed'\n")
    with pytest.raises(RuntimeSourceError, match="different"):
        install_runtime_source(tmp_path)
    assert cargo.read_text() == "[package]\nname = 'changed'\n"
    assert [p.name for p in cargo.parent.parent.iterdir()] == [INSTALL.name]


def _archive(tmp_path: Path, add: list[tarfile.TarInfo | tuple[str, bytes]]) -> Path:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        directory = tarfile.TarInfo(TOP)
        directory.type = tarfile.DIRTYPE
        archive.addfile(directory)
        for item in add:
            if isinstance(item, tarfile.TarInfo):
                archive.addfile(item)
            else:
                name, data = item
                info = tarfile.TarInfo(name)
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    path = tmp_path / "hostile.tar.gz"
    path.write_bytes(gzip.compress(buffer.getvalue()))
    return path


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


def _device(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.CHRTYPE
    return info


@pytest.mark.parametrize(
    "entries",
    [
        [(f"{TOP}/../escape.txt", b"x")],
        [("/tmp/absolute.txt", b"x")],
        [("elsewhere/file.txt", b"x")],
        [_link(f"{TOP}/link", "/etc/passwd")],
        [_link(f"{TOP}/hard", "/etc/passwd", tarfile.LNKTYPE)],
        [_device(f"{TOP}/dev")],
        [(f"{TOP}/ok.txt", b"x"), (f"{TOP}/ok.txt", b"y")],
    ],
    ids=["dotdot", "absolute", "outside-top", "symlink", "hardlink", "device", "duplicate"],
)
def test_hostile_archives_are_refused_and_leave_nothing(
    entries: list[tarfile.TarInfo | tuple[str, bytes]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    archive = _archive(tmp_path, [(f"{TOP}/Cargo.toml", b"[package]\n"), *entries])
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    monkeypatch.setattr(_generated, "RUNTIME_SOURCE_SHA256", digest)
    project = tmp_path / "project"
    project.mkdir()
    with pytest.raises(RuntimeSourceError):
        install_runtime_source(project, archive=archive)
    assert list(project.iterdir()) == []
    assert not (tmp_path / "escape.txt").exists()


def test_tampered_archive_is_refused(tmp_path: Path) -> None:
    tampered = tmp_path / "tampered.tar.gz"
    tampered.write_bytes(packaged_archive_path().read_bytes() + b"\0")
    project = tmp_path / "project"
    project.mkdir()
    with pytest.raises(RuntimeSourceError, match="SHA-256"):
        install_runtime_source(project, archive=tampered)
    assert list(project.iterdir()) == []


def test_refuses_a_linked_destination(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, project / "generated")
    with pytest.raises(RuntimeSourceError, match="not a plain directory"):
        install_runtime_source(project)
    assert list(elsewhere.iterdir()) == []
