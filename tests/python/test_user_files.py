"""Files written for a user never write through a name another user planted.

The attacker is a real other user (uid 65534, through
``subprocess``'s ``user=``) planting names in a shared sticky directory
(mode 1777, like /tmp) where root writes; this host's
``fs.protected_symlinks`` is checked to be 0, so the kernel's own protection
does not hide a write through a link. The temporary name is random: every
name the writer opens is one it creates with ``O_EXCL | O_NOFOLLOW``, and a
name planted there (made predictable here by replacing the name source) is
skipped, never opened.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rextio_device_cuda import _user_files

OTHER_USER = 65534
VICTIM_TEXT = b"root's secret\n"


def _protected_symlinks() -> str:
    return Path("/proc/sys/fs/protected_symlinks").read_text(encoding="ascii").strip()


@pytest.fixture
def shared() -> Iterator[Path]:
    """A sticky, world-writable directory in /tmp (pytest's own is root's alone)."""
    if os.geteuid() != 0:
        pytest.fail("these tests plant names as another user: run them as root")
    directory = Path(tempfile.mkdtemp(prefix="rextio-shared-", dir="/tmp"))
    try:
        directory.chmod(0o1777)
        yield directory
    finally:
        shutil.rmtree(directory)


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file of root's, mode 0600, that a write through a planted link would change."""
    path = tmp_path / "victim"
    path.write_bytes(VICTIM_TEXT)
    path.chmod(0o600)
    return path


def _as_other_user(tool: str, *arguments: str) -> None:
    """Runs coreutils' ``tool`` as the other user (who cannot reach this test's venv)."""
    program = shutil.which(tool)
    assert program is not None, f"coreutils' {tool} is needed"
    subprocess.run(
        [program, *arguments],
        user=OTHER_USER,
        group=OTHER_USER,
        extra_groups=[],
        check=True,
        timeout=60,
    )


def _plant_link(link: Path, target: Path) -> None:
    _as_other_user("ln", "-s", "--", str(target), str(link))
    assert link.lstat().st_uid == OTHER_USER


def _plant_fifo(path: Path) -> None:
    _as_other_user("mkfifo", "-m", "666", "--", str(path))
    assert stat.S_ISFIFO(path.lstat().st_mode)
    assert path.lstat().st_uid == OTHER_USER


def test_this_host_does_not_protect_symlinks_itself() -> None:
    # The tests below would pass for the kernel's reason, not ours, otherwise.
    assert _protected_symlinks() == "0"


def test_a_link_planted_at_the_final_name_is_replaced_never_followed(
    shared: Path, victim: Path
) -> None:
    output = shared / "evidence.json"
    _plant_link(output, victim)
    _user_files.write_file(output, b"evidence\n")
    assert victim.read_bytes() == VICTIM_TEXT
    assert not output.is_symlink()
    assert output.read_bytes() == b"evidence\n"
    assert output.stat().st_uid == 0
    assert sorted(path.name for path in shared.iterdir()) == ["evidence.json"]


def test_a_fifo_planted_at_the_final_name_is_replaced_without_blocking(shared: Path) -> None:
    output = shared / "evidence.json"
    _plant_fifo(output)
    _user_files.write_file(output, b"evidence\n")
    assert stat.S_ISREG(output.lstat().st_mode)
    assert output.read_bytes() == b"evidence\n"


def test_a_fifo_of_roots_own_is_written_through(tmp_path: Path) -> None:
    output = tmp_path / "evidence.fifo"
    os.mkfifo(output)
    reader = os.open(output, os.O_RDONLY | os.O_NONBLOCK)
    try:
        _user_files.write_file(output, b"evidence\n")
        assert os.read(reader, 64) == b"evidence\n"
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(output.lstat().st_mode)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["evidence.fifo"]


def test_a_fifo_no_one_reads_fails_at_once_with_nothing_left(tmp_path: Path) -> None:
    output = tmp_path / "evidence.fifo"
    os.mkfifo(output)
    with pytest.raises(OSError, match="no process reads the FIFO"):
        _user_files.write_file(output, b"evidence\n")
    assert stat.S_ISFIFO(output.lstat().st_mode)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["evidence.fifo"]


@pytest.mark.parametrize("target", ["file", "missing"])
def test_a_link_of_roots_own_to_no_device_is_refused_and_left_as_it_is(
    target: str, tmp_path: Path
) -> None:
    # Root's own link is never replaced (as /dev/stdout when stdout is a
    # file): what it leads to is not a device or FIFO, so nothing is written.
    file = tmp_path / target
    if target == "file":
        file.write_bytes(VICTIM_TEXT)
    output = tmp_path / "evidence.json"
    output.symlink_to(file)
    with pytest.raises(FileExistsError, match="to no device or FIFO"):
        _user_files.write_file(output, b"evidence\n")
    assert output.is_symlink()
    assert os.readlink(output) == str(file)
    if target == "file":
        assert file.read_bytes() == VICTIM_TEXT
    assert {path.name for path in tmp_path.iterdir()} == {"evidence.json", target} - {"missing"}


def _names(planted: list[str]) -> Iterator[str]:
    """The planted names first, then fresh ones."""
    yield from planted
    count = 0
    while True:
        count += 1
        yield f".fresh-{count}.tmp"


def test_a_link_or_fifo_planted_at_the_temporary_name_is_never_opened(
    shared: Path, victim: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _plant_link(shared / ".planted-link.tmp", victim)
    _plant_fifo(shared / ".planted-fifo.tmp")
    names = _names([".planted-link.tmp", ".planted-fifo.tmp"])
    monkeypatch.setattr(_user_files, "temporary_name", lambda final: next(names))
    output = shared / "evidence.json"
    _user_files.write_file(output, b"evidence\n")
    assert victim.read_bytes() == VICTIM_TEXT
    assert output.read_bytes() == b"evidence\n"
    assert (shared / ".planted-link.tmp").is_symlink()
    assert stat.S_ISFIFO((shared / ".planted-fifo.tmp").lstat().st_mode)
    assert sorted(path.name for path in shared.iterdir()) == [
        ".planted-fifo.tmp",
        ".planted-link.tmp",
        "evidence.json",
    ]


def test_every_temporary_name_taken_fails_with_nothing_written(
    shared: Path, victim: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _plant_link(shared / ".planted.tmp", victim)
    monkeypatch.setattr(_user_files, "temporary_name", lambda final: ".planted.tmp")
    output = shared / "evidence.json"
    with pytest.raises(FileExistsError, match="no free temporary name"):
        _user_files.write_file(output, b"evidence\n")
    assert victim.read_bytes() == VICTIM_TEXT
    assert sorted(path.name for path in shared.iterdir()) == [".planted.tmp"]


def test_no_temporary_name_is_fixed(shared: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An attacker cannot plant what they cannot name: every write takes a new
    # random name (64 bits), whatever the process or the file.
    seen: list[str] = []
    choose = _user_files.temporary_name

    def recording(final: str) -> str:
        seen.append(choose(final))
        return seen[-1]

    monkeypatch.setattr(_user_files, "temporary_name", recording)
    for _ in range(20):
        _user_files.write_file(shared / "evidence.json", b"evidence\n")
    assert len(set(seen)) == 20
    assert all(name.startswith(".evidence.json.") for name in seen)


def test_a_directory_at_the_final_name_fails_and_leaves_no_temporary(shared: Path) -> None:
    output = shared / "evidence.json"
    output.mkdir()
    with pytest.raises(IsADirectoryError):
        _user_files.write_file(output, b"evidence\n")
    assert sorted(path.name for path in shared.iterdir()) == ["evidence.json"]


def test_the_umask_applies_to_the_created_file(tmp_path: Path) -> None:
    previous = os.umask(0o027)
    try:
        _user_files.write_file(tmp_path / "out", b"x")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o640
