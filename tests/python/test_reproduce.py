"""``python -m rextio_device_cuda reproduce``: the shipped binaries rebuilt from the
sources their wheel carries, with the real build recipe (zig and cargo-zigbuild
from PyPI, Rust's pinned toolchain), compared byte for byte.

Each rebuild is real and takes a while, so there are few. The first test
fetches zig and cargo-zigbuild into a fresh cache as a user's first run does;
the others reuse the ones ``cargo xtask dist`` fetched (the same recipe,
the same layout).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from cuda_support import SPEC
from sim_namespace import built_path

# Release builds with cargo: the same bytes on every CPython, so `cargo xtask test`
# runs this file on the oldest and the newest one only.
pytestmark = pytest.mark.cargo_build

PROBE = SPEC["probe_report"]["probe"]
SMOKE = SPEC["smoke"]["probe"]
NAME, VERSION = SPEC["distribution"]["import_name"], SPEC["distribution"]["version"]
REPOSITORY = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR") or REPOSITORY / "target")
CHANNEL = tomllib.loads((REPOSITORY / "rust-toolchain.toml").read_text("utf-8"))["toolchain"][
    "channel"
]
# The versions the build recipe pins (zig's wheel is PyPI's ziglang).
ZIG, ZIGBUILD = (
    tool["version"]
    for tool in json.loads((REPOSITORY / "templates/build-recipe.json").read_text("utf-8"))["tools"]
)


def _wheel(platform: str) -> Path:
    return built_path("dist_dir") / f"{NAME}-{VERSION}-py3-none-{platform}.whl"


X86_64, AARCH64 = "manylinux_2_17_x86_64", "manylinux_2_17_aarch64"


def _recorded(wheel: Path) -> dict[str, str]:
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(f"{NAME}/_bin/SHA256SUMS").decode("ascii")
    return {name: digest for digest, name in (line.split("  ") for line in text.splitlines())}


def _new_cache(tools: bool) -> Path:
    """A private cache (0700) in the user's home (pytest's directories, and a
    clone under /tmp, lie below a directory others can write, where builds are
    rightly refused); with ``tools``, the recipe's tools `cargo xtask dist`
    fetched are linked in."""
    directory = Path(tempfile.mkdtemp(prefix=".rextio-reproduce-test-", dir=Path.home()))
    if tools:
        folder = directory / SPEC["distribution"]["name"]
        folder.mkdir(mode=0o700)
        (folder / "tools").symlink_to(TARGET / "recipe-tools")
    return directory


@pytest.fixture
def cache() -> Iterator[Path]:
    directory = _new_cache(tools=True)
    try:
        yield directory
    finally:
        shutil.rmtree(directory)


def _run(
    *arguments: str | Path, cache: Path, python: str | Path = sys.executable
) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if key != "CARGO_TARGET_DIR"}
    return subprocess.run(
        [python, "-m", NAME, *arguments],
        capture_output=True,
        text=True,
        timeout=1200,
        env={**environment, "XDG_CACHE_HOME": str(cache)},
        check=False,
    )


def test_reproduce_fetches_the_tools_and_rebuilds_the_installed_wheels_binaries() -> None:
    """The installed (x86_64) wheel, in a fresh cache: zig and cargo-zigbuild are
    fetched, and the rebuild is the shipped bytes."""
    cache = _new_cache(tools=False)
    try:
        done = _run("reproduce", cache=cache)
        folder = cache / SPEC["distribution"]["name"] / "tools"
        tools = sorted(path.name for path in folder.iterdir())
    finally:
        shutil.rmtree(cache)
    assert done.returncode == 0, done.stderr
    recorded = _recorded(_wheel(X86_64))
    assert done.stdout.splitlines() == [
        f"reproduced: {PROBE} sha256 {recorded[PROBE]}",
        f"reproduced: {SMOKE} sha256 {recorded[SMOKE]}",
    ]
    progress = [line for line in done.stderr.splitlines() if line.startswith("reproduce: ")]
    assert progress[0].startswith("reproduce: the wheel's sources: rextio-cuda-probe-")
    assert progress[1:3] == [
        "reproduce: building the probe and smoke for x86_64-unknown-linux-gnu (glibc 2.17)",
        f"reproduce: with Rust {CHANNEL}, zig {ZIG} and cargo-zigbuild {ZIGBUILD}",
    ]
    assert any(line.startswith("reproduce: fetching ziglang ") for line in progress)
    assert any(line.startswith("reproduce: fetching cargo-zigbuild ") for line in progress)
    assert progress[-1].startswith("reproduce: comparing with the binaries shipped")
    fetched = [name.split("-0.")[0] for name in tools if name != "lock"]
    assert fetched == ["cargo-zigbuild", "ziglang"]


def test_reproduce_rebuilds_the_aarch64_wheel_on_this_host(cache: Path) -> None:
    done = _run("reproduce", "--wheel", _wheel(AARCH64), cache=cache)
    assert done.returncode == 0, done.stderr
    recorded = _recorded(_wheel(AARCH64))
    assert done.stdout.splitlines() == [
        f"reproduced: {PROBE} sha256 {recorded[PROBE]}",
        f"reproduced: {SMOKE} sha256 {recorded[SMOKE]}",
    ]
    assert (
        "reproduce: building the probe and smoke for aarch64-unknown-linux-gnu (glibc 2.17)\n"
        in done.stderr
    )


def _flip(data: bytes) -> bytes:
    flipped = bytearray(data)
    flipped[len(flipped) // 2] ^= 0x01
    return bytes(flipped)


def _flipped_copy(wheel: Path, into: Path, record_too: bool) -> tuple[Path, str]:
    """A copy of ``wheel`` with one byte of its probe flipped (and, with
    ``record_too``, SHA256SUMS edited to match); the flipped probe's digest."""
    copy = into / wheel.name
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(copy, "w") as target:
        probe = _flip(source.read(f"{NAME}/_bin/{PROBE}"))
        flipped = hashlib.sha256(probe).hexdigest()
        for member in source.infolist():
            data = source.read(member)
            if member.filename == f"{NAME}/_bin/{PROBE}":
                data = probe
            elif member.filename == f"{NAME}/_bin/SHA256SUMS" and record_too:
                original = hashlib.sha256(source.read(f"{NAME}/_bin/{PROBE}")).hexdigest()
                data = data.replace(original.encode("ascii"), flipped.encode("ascii"))
            target.writestr(member, data)
    return copy, flipped


@pytest.mark.parametrize("record_too", [False, True], ids=["bytes", "bytes-and-record"])
def test_a_wheel_with_a_flipped_probe_byte_differs(
    tmp_path: Path, cache: Path, record_too: bool
) -> None:
    """The rebuild decides, not the wheel's own record: a probe changed by one
    byte differs even when SHA256SUMS was edited to match it."""
    copy, flipped = _flipped_copy(_wheel(X86_64), tmp_path, record_too)
    done = _run("reproduce", "--wheel", copy, cache=cache)
    assert done.returncode == 1, done.stderr
    recorded = _recorded(_wheel(X86_64))
    assert done.stdout.splitlines() == [
        f"differs: {PROBE} shipped {flipped} built {recorded[PROBE]}",
        f"reproduced: {SMOKE} sha256 {recorded[SMOKE]}",
    ]


def test_a_wheel_that_is_not_ours_or_carries_no_binaries_is_one_line_and_exit_2(
    tmp_path: Path, cache: Path
) -> None:
    other = tmp_path / "other-1.0-py3-none-any.whl"
    with zipfile.ZipFile(other, "w") as archive:
        archive.writestr("other-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n")
    not_a_zip = tmp_path / "not-a-zip.whl"
    not_a_zip.write_bytes(b"not a zip")
    pure = _wheel("any")
    # The x86_64 wheel with one byte of its probe sources changed.
    other_sources = tmp_path / _wheel(X86_64).name
    with zipfile.ZipFile(_wheel(X86_64)) as source, zipfile.ZipFile(other_sources, "w") as target:
        for member in source.infolist():
            data = source.read(member)
            if member.filename.startswith(f"{NAME}/_data/rextio-cuda-probe-"):
                data = _flip(data)
            target.writestr(member, data)
    for wheel, reason in (
        (other, "it is not a wheel of rextio-device-cuda"),
        (not_a_zip, "it cannot be read as a wheel (not a readable zip)"),
        (tmp_path / "missing.whl", "it cannot be read as a wheel (No such file or directory)"),
        (pure, "it carries no binaries: it is not a manylinux platform wheel of this package"),
        (
            other_sources,
            "its sources or build recipe are not this installation's: install its own release "
            "to reproduce it",
        ),
    ):
        done = _run("reproduce", "--wheel", wheel, cache=cache)
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        # One error, in lines of at most 100 columns (continued lines indented).
        assert all(len(line) <= 100 for line in done.stderr.splitlines()), done.stderr
        assert " ".join(done.stderr.split()) == f"error: {wheel.name}: {reason}"
    # Nothing was built.
    assert not (cache / SPEC["distribution"]["name"] / "builds").exists()


def test_build_probe_from_the_pure_wheel_writes_the_shipped_bytes(
    tmp_path: Path, cache: Path
) -> None:
    """On Linux x86_64 build-probe uses the recipe: the pure wheel's build is
    byte for byte what the x86_64 wheel ships."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=300)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--no-index", "--find-links",
         built_path("wheelhouse"), _wheel("any")],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    into = tmp_path / "built"
    done = _run("build-probe", "--into", into, cache=cache, python=python)
    assert done.returncode == 0, done.stderr
    recorded = _recorded(_wheel(X86_64))
    for name in (PROBE, SMOKE):
        assert hashlib.sha256((into / name).read_bytes()).hexdigest() == recorded[name]


# build-probe where the recipe's tools do not run (another platform), here.
_ELSEWHERE = """
import sys
from rextio_device_cuda import _build_recipe, cli
_build_recipe.host_architecture = lambda: None
sys.exit(cli.main(["build-probe", "--into", sys.argv[1]]))
"""


def test_where_the_recipe_cannot_run_build_probe_says_so_and_builds_with_cargo(
    tmp_path: Path, cache: Path
) -> None:
    into = tmp_path / "built"
    environment = {key: value for key, value in os.environ.items() if key != "CARGO_TARGET_DIR"}
    done = subprocess.run(
        [sys.executable, "-I", "-c", _ELSEWHERE, into],
        capture_output=True,
        text=True,
        timeout=1200,
        env={**environment, "XDG_CACHE_HOME": str(cache)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[:2] == [
        f"build-probe: the shipped binaries' recipe (zig {ZIG} and cargo-zigbuild {ZIGBUILD}) "
        "does not run on this platform:",
        "build-probe: building with cargo alone, so the digests will differ from a shipped "
        "binary's",
    ]
    assert lines[2] == f"build-probe: building the probe and smoke with cargo (Rust {CHANNEL})"
    # Built, by the host's linker against the host's glibc: not the shipped bytes.
    shipped = _recorded(_wheel(X86_64))[PROBE]
    assert hashlib.sha256((into / PROBE).read_bytes()).hexdigest() != shipped
