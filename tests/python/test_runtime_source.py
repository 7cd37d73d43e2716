"""Installing the packaged runtime source into a project, and refusing hostile archives."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from install_children import (
    ROUNDS,
    install_rounds,
    install_runtime_source,
    killed_mid_install,
    swap_forever,
)

from rextio_device_cuda import _generated, runtime_source
from rextio_device_cuda._provider_spec import PROVIDER_SPEC
from rextio_device_cuda._source_archive import PackagedArchive, read_archive
from rextio_device_cuda.runtime_source import (
    PackagedCrate,
    RuntimeSourceError,
    packaged_crates,
)

INSTALL = Path(*PROVIDER_SPEC.runtime_package.install_dir.split("/"))
[RUNTIME] = [crate for crate in packaged_crates() if crate.name == INSTALL.name]
TOP = RUNTIME.archive.top_folder
# Every packaged crate's folder, beside each other in the install's parent.
CRATE_NAMES = sorted(crate.name for crate in packaged_crates())


def packaged_archive_path() -> Path:
    return RUNTIME.archive.path


def _files(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_packaged_archive_matches_its_digest() -> None:
    data = packaged_archive_path().read_bytes()
    assert hashlib.sha256(data).hexdigest() == _generated.RUNTIME_SOURCE_SHA256
    assert read_archive(RUNTIME.archive) == data


def test_install_is_complete_and_idempotent(tmp_path: Path) -> None:
    assert install_runtime_source(tmp_path) is True
    installed = tmp_path / INSTALL
    assert (installed / "Cargo.toml").is_file()
    with tarfile.open(packaged_archive_path()) as archive:
        expected = {member.name.removeprefix(f"{TOP}/") for member in archive if member.isreg()}
    assert set(_files(installed)) == expected
    assert install_runtime_source(tmp_path) is False
    assert sorted(p.name for p in installed.parent.iterdir()) == CRATE_NAMES


def test_refuses_to_overwrite_different_content(tmp_path: Path) -> None:
    install_runtime_source(tmp_path)
    cargo = tmp_path / INSTALL / "Cargo.toml"
    cargo.write_text("[package]\nname = 'changed'\n")
    with pytest.raises(RuntimeSourceError, match="different"):
        install_runtime_source(tmp_path)
    assert cargo.read_text() == "[package]\nname = 'changed'\n"
    assert sorted(p.name for p in cargo.parent.parent.iterdir()) == CRATE_NAMES


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


def _crate(archive: Path) -> PackagedCrate:
    """The runtime crate, packaged as ``archive`` (its digest recorded)."""
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    return PackagedCrate(RUNTIME.name, PackagedArchive(archive, digest, TOP))


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
) -> None:
    archive = _archive(tmp_path, [(f"{TOP}/Cargo.toml", b"[package]\n"), *entries])
    project = tmp_path / "project"
    project.mkdir()
    with pytest.raises(RuntimeSourceError):
        install_runtime_source(project, crates=(_crate(archive),))
    assert list(project.iterdir()) == []
    assert not (tmp_path / "escape.txt").exists()


def _second_crate(tmp_path: Path, content: bytes = b"// loader\n") -> PackagedCrate:
    """A second packaged crate (named like the loader), as its own tarball."""
    name, top = "rextio-cuda-loader", "rextio-cuda-loader-0.1.0"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for entry, data in ((f"{top}/Cargo.toml", b"[package]\n"), (f"{top}/src/lib.rs", content)):
            info = tarfile.TarInfo(entry)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    path = tmp_path / f"{top}.tar.gz"
    path.write_bytes(gzip.compress(buffer.getvalue()))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return PackagedCrate(name, PackagedArchive(path, digest, top))


def test_every_packaged_crate_is_installed_beside_the_others(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    crates = (RUNTIME, _second_crate(tmp_path))
    installed = runtime_source.install_runtime_source(project, crates=crates)
    parent = PurePosixPath(PROVIDER_SPEC.runtime_package.install_dir).parent
    assert [(crate.install_dir, crate.written) for crate in installed] == [
        (parent / "rextio-cuda-runtime", True),
        (parent / "rextio-cuda-loader", True),
    ]
    loader = project / INSTALL.parent / "rextio-cuda-loader"
    assert (loader / "src" / "lib.rs").read_bytes() == b"// loader\n"
    assert (project / INSTALL / "Cargo.toml").is_file()
    # A rerun over the identical install writes nothing.
    again = runtime_source.install_runtime_source(project, crates=crates)
    assert [crate.written for crate in again] == [False, False]
    assert _install_dir_listing(project) == ["rextio-cuda-loader", "rextio-cuda-runtime"]


def test_a_missing_crate_is_added_beside_an_installed_one(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    runtime_source.install_runtime_source(project, crates=(RUNTIME,))
    before = _files(project / INSTALL)
    installed = runtime_source.install_runtime_source(
        project, crates=(RUNTIME, _second_crate(tmp_path))
    )
    assert [crate.written for crate in installed] == [False, True]
    assert _files(project / INSTALL) == before


def test_one_different_crate_refuses_the_whole_install_before_writing(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    runtime_source.install_runtime_source(project, crates=(RUNTIME,))
    (project / INSTALL / "README.md").write_text("edited\n")
    with pytest.raises(RuntimeSourceError, match=r"changed README\.md"):
        runtime_source.install_runtime_source(project, crates=(RUNTIME, _second_crate(tmp_path)))
    assert _install_dir_listing(project) == [INSTALL.name]


def test_tampered_archive_is_refused(tmp_path: Path) -> None:
    tampered = tmp_path / "tampered.tar.gz"
    tampered.write_bytes(packaged_archive_path().read_bytes() + b"\0")
    project = tmp_path / "project"
    project.mkdir()
    crate = PackagedCrate(RUNTIME.name, PackagedArchive(tampered, RUNTIME.archive.sha256, TOP))
    with pytest.raises(RuntimeSourceError, match="SHA-256"):
        install_runtime_source(project, crates=(crate,))
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


def test_a_regular_file_as_the_project_is_not_a_directory(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.write_text("a file\n")
    with pytest.raises(RuntimeSourceError, match=r"^the project path is not a directory$"):
        install_runtime_source(project)
    assert project.read_text() == "a file\n"


# One install into a fresh tmpfs of a given size, made in a private mount
# namespace (`unshare -m`, as root: nothing mounted there reaches the host),
# through the command line. The child prints its exit status, its stderr and
# everything left in the project (the tmpfs) as JSON.
_TINY_DISK_SCRIPT = 'mount -t tmpfs -o "size=$1" tmpfs "$2" && shift 2 && exec "$@"'
_TINY_DISK_CHILD = """
import contextlib, io, json, sys
from pathlib import Path
from rextio_device_cuda.cli import main
project = Path(sys.argv[1])
for name in sys.argv[2:]:
    (project / name).mkdir()
err = io.StringIO()
with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
    status = main(["runtime-source", "--into", str(project)])
left = sorted(path.relative_to(project).as_posix() for path in project.rglob("*"))
print(json.dumps({"exit": status, "stderr": err.getvalue(), "left": left}))
"""
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _install_on_a_tmpfs(root: Path, pages: int, pre_existing: tuple[str, ...]) -> dict[str, Any]:
    unshare, shell = shutil.which("unshare"), shutil.which("sh")
    if unshare is None or shell is None:
        pytest.fail("`unshare` (util-linux) and `sh` are needed for the full-disk tests")
    done = subprocess.run(
        [
            unshare,
            "--mount",
            "--propagation",
            "private",
            "--pid",
            "--fork",
            "--kill-child",
            "--",
            shell,
            "-c",
            _TINY_DISK_SCRIPT,
            "sh",
            str(pages * _PAGE),
            str(root),
            sys.executable,
            "-I",
            "-c",
            _TINY_DISK_CHILD,
            str(root),
            *pre_existing,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"the namespace child failed (needs root): {done.stderr}"
    outcome: dict[str, Any] = json.loads(done.stdout)
    return outcome


def _pages_the_install_needs() -> int:
    """tmpfs pages of every packaged file of every crate installed (a file takes
    whole pages; folders none)."""
    pages = 0
    for crate in packaged_crates():
        with tarfile.open(crate.archive.path) as archive:
            pages += sum(math.ceil(member.size / _PAGE) for member in archive if member.isreg())
    return pages


@pytest.mark.process_stress
@pytest.mark.parametrize("pre_existing", [(), (INSTALL.parts[0],)], ids=["empty", "with-parent"])
@pytest.mark.parametrize("share", [0.0, 0.5, 0.95], ids=["one-page", "half", "almost"])
def test_a_full_disk_while_staging_leaves_nothing_behind(
    tmp_path: Path, share: float, pre_existing: tuple[str, ...]
) -> None:
    pages = max(1, int(_pages_the_install_needs() * share))
    outcome = _install_on_a_tmpfs(tmp_path, pages, pre_existing)
    assert outcome["exit"] == 1, outcome
    assert "No space left on device" in outcome["stderr"]
    assert "Traceback" not in outcome["stderr"]
    # No staging, no lock file, no folder this install made; the user's stays.
    assert outcome["left"] == list(pre_existing)


@pytest.mark.process_stress
def test_the_tiny_disk_holds_the_install_when_it_is_large_enough(tmp_path: Path) -> None:
    # The other side of the test above: the same harness succeeds with room to spare.
    outcome = _install_on_a_tmpfs(tmp_path, _pages_the_install_needs() + 8, ())
    assert outcome["exit"] == 0, outcome
    assert f"{INSTALL.as_posix()}/Cargo.toml" in outcome["left"]
    assert not any(runtime_source.STAGING_PREFIX in name for name in outcome["left"])


def _install_dir_listing(project: Path) -> list[str]:
    """The names beside the install directory: no staging, no lock file."""
    return sorted(path.name for path in (project / INSTALL).parent.iterdir())


def test_building_the_installed_crate_never_makes_a_rerun_refuse(tmp_path: Path) -> None:
    assert install_runtime_source(tmp_path) is True
    crate = tmp_path / INSTALL
    cargo = os.environ.get("CARGO") or shutil.which("cargo")
    assert cargo, "cargo is needed to build the installed crate (run through cargo xtask test)"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CARGO_TARGET_DIR")}
    built = subprocess.run(
        [cargo, "build", "--offline", "--quiet"],
        cwd=crate,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    assert (crate / "Cargo.lock").is_file()
    assert (crate / "target").is_dir()
    assert install_runtime_source(tmp_path) is False
    assert _install_dir_listing(tmp_path) == CRATE_NAMES


def _add(relative: str, content: bytes = b"// extra\n") -> Callable[[Path], None]:
    def change(crate: Path) -> None:
        (crate / relative).parent.mkdir(parents=True, exist_ok=True)
        (crate / relative).write_bytes(content)

    return change


def _remove(relative: str) -> Callable[[Path], None]:
    return lambda crate: (crate / relative).unlink()


def _fifo(relative: str) -> Callable[[Path], None]:
    def change(crate: Path) -> None:
        (crate / relative).unlink()
        os.mkfifo(crate / relative)

    return change


def _symlinked(relative: str) -> Callable[[Path], None]:
    def change(crate: Path) -> None:
        content = (crate / relative).read_bytes()
        outside = crate.parents[len(INSTALL.parts)] / "outside-copy"
        outside.write_bytes(content)
        (crate / relative).unlink()
        (crate / relative).symlink_to(outside)

    return change


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (_add("src/extra.rs"), "added src/extra.rs"),
        (_add("build.rs"), "added build.rs"),
        (_add("src/target"), "added src/target"),
        (_add("src/lib.rs", b"pub fn replaced() {}\n"), "changed src/lib.rs"),
        (_remove("README.md"), "missing README.md"),
        (_fifo("src/error.rs"), "changed src/error.rs"),
        (_symlinked("src/lib.rs"), "changed src/lib.rs"),
    ],
    ids=["extra-source", "build-script", "nested-target", "edited", "deleted", "fifo", "symlink"],
)
def test_a_rerun_refuses_every_other_difference_by_name(
    change: Callable[[Path], None], named: str, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    install_runtime_source(project)
    crate = project / INSTALL
    (crate / "Cargo.lock").write_text("# a build product\n")
    change(crate)
    before = {path: path.lstat().st_mtime_ns for path in crate.rglob("*")}
    with pytest.raises(RuntimeSourceError) as refused:
        install_runtime_source(project)
    message = str(refused.value)
    assert named in message
    assert "different runtime source" in message
    assert str(tmp_path) not in message
    assert {path: path.lstat().st_mtime_ns for path in crate.rglob("*")} == before
    assert _install_dir_listing(project) == CRATE_NAMES


WORKERS = 8


def test_concurrent_installs_into_one_project_all_succeed(tmp_path: Path) -> None:
    for round_index in range(ROUNDS):
        (tmp_path / f"project-{round_index}").mkdir()
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(WORKERS)
    results = context.Queue()
    workers = [
        context.Process(target=install_rounds, args=(tmp_path, barrier, results))
        for _ in range(WORKERS)
    ]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=300) for _ in range(ROUNDS * WORKERS)]
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    failures = [outcome for outcome in outcomes if not isinstance(outcome[1], bool)]
    assert failures == []
    for round_index in range(ROUNDS):
        round_outcomes = [outcome for index, outcome in outcomes if index == round_index]
        assert sorted(round_outcomes) == [False] * (WORKERS - 1) + [True]
        project = tmp_path / f"project-{round_index}"
        assert _install_dir_listing(project) == CRATE_NAMES
        assert install_runtime_source(project) is False


SWAP_RUNS = 400


def test_a_swapped_in_symlink_never_redirects_a_write(tmp_path: Path) -> None:
    # Another process keeps exchanging the project's first install folder with
    # a symbolic link to a folder outside the project.
    outside = tmp_path / "outside"
    outside.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    generated = project / INSTALL.parts[0]
    decoy = project / "decoy"
    decoy.symlink_to(outside)
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    attacker = context.Process(
        target=swap_forever, args=(bytes(generated), bytes(decoy), ready), daemon=True
    )
    outcomes: dict[str, int] = {}
    generated.mkdir()
    attacker.start()
    try:
        assert ready.wait(timeout=60)
        for _ in range(SWAP_RUNS):
            try:
                outcome = "installed" if install_runtime_source(project) else "current"
            except RuntimeSourceError:
                outcome = "refused"
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            # Start over from an empty install folder, wherever it is now.
            for folder in (generated, decoy):
                if folder.is_dir() and not folder.is_symlink():
                    shutil.rmtree(folder / INSTALL.parts[1], ignore_errors=True)
            assert list(outside.iterdir()) == [], f"a write escaped the project: {outcomes}"
    finally:
        attacker.kill()
        attacker.join(timeout=60)
    assert sum(outcomes.values()) == SWAP_RUNS


def test_an_install_killed_midway_is_cleaned_up_by_the_next(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    victim = context.Process(target=killed_mid_install, args=(tmp_path,))
    victim.start()
    victim.join(timeout=120)
    assert victim.exitcode == -signal.SIGKILL
    leftovers = _install_dir_listing(tmp_path)
    assert any(name.startswith(runtime_source.STAGING_PREFIX) for name in leftovers), leftovers
    assert INSTALL.name not in leftovers

    assert install_runtime_source(tmp_path) is True
    assert _install_dir_listing(tmp_path) == CRATE_NAMES
    assert install_runtime_source(tmp_path) is False


def _coreutil(name: str) -> str:
    program = shutil.which(name)
    assert program is not None, f"coreutils' {name} is needed"
    return program


def _as_other_user(command: list[str]) -> None:
    subprocess.run(
        command,
        user=65534,
        group=65534,
        extra_groups=[],
        check=True,
        timeout=60,
    )


@pytest.mark.parametrize("planted", ["link", "fifo"])
def test_a_name_another_user_planted_at_the_install_is_refused_never_written_through(
    planted: str, tmp_path: Path
) -> None:
    # A shared sticky project directory (as /tmp) where another user made the
    # crates' folder and planted a link (to a folder of root's) or a FIFO at
    # the runtime's name; this host does not protect links itself.
    assert Path("/proc/sys/fs/protected_symlinks").read_text(encoding="ascii").strip() == "0"
    victim = tmp_path / "victim"
    victim.mkdir()
    project = Path(tempfile.mkdtemp(prefix="rextio-shared-", dir="/tmp"))
    try:
        project.chmod(0o1777)
        final = project / INSTALL
        plant = [
            [_coreutil("mkdir"), "-p", "--", str(final.parent)],
            [_coreutil("ln"), "-s", "--", str(victim), str(final)]
            if planted == "link"
            else [_coreutil("mkfifo"), "--", str(final)],
        ]
        for command in plant:
            _as_other_user(command)
        assert final.lstat().st_uid == 65534
        with pytest.raises(RuntimeSourceError, match="not a plain directory"):
            install_runtime_source(project)
        assert list(victim.iterdir()) == []
        assert final.lstat().st_uid == 65534
        assert sorted(path.name for path in final.parent.iterdir()) == [INSTALL.name]
    finally:
        shutil.rmtree(project)
