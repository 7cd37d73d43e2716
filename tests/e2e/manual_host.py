"""The README's manual host, built from the installed wheel alone.

In an empty directory outside the repository, ``python -m rextio_device_cuda
runtime-source --into PROJECT`` (the wheel installed in this environment)
installs the runtime and loader crates; the README's "Write a manual host"
files (read from the README itself) are written beside them; and ``cargo
build --offline`` builds the program, its dependencies' sources coming from
cargo's registry cache: no path into this repository, no workspace around
it. For aarch64 the same project is cross-built with cargo-zigbuild against
the glibc floor, as `cargo xtask dist` builds the shipped probe.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from readme_blocks import readme_files

from rextio_device_cuda.runtime_source import INSTALL_PARENT

SECTION = "Write a manual host"
PROGRAM_FILES = ("Cargo.toml", "src/main.rs")
PROGRAM = "manual-host"
# What runtime-source installs, beside each other.
CRATES = ["rextio-cuda-loader", "rextio-cuda-runtime"]
AARCH64_TRIPLE = "aarch64-unknown-linux-gnu"
# cargo-zigbuild's form of the triple with the glibc floor of the wheels.
AARCH64_ZIG_TARGET = f"{AARCH64_TRIPLE}.2.17"
BUILD_TIMEOUT_SECONDS = 900
# What the program prints (README): the load, then the lifetime sequence's end.
LOADED = "loaded"
COMPLETE = "complete"


def not_loaded(reason_code: str) -> str:
    return f"not loaded: {reason_code}"


def failed(operation: str, result: int) -> str:
    return f"failed: {operation} {result}"


def _run(argv: Sequence[str], cwd: Path, env: Mapping[str, str] | None = None) -> None:
    completed = subprocess.run(
        list(argv),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_SECONDS,
        check=False,
    )
    if completed.returncode != 0:
        pytest.fail(f"{argv[:3]} failed ({completed.returncode}): {completed.stderr}")


def install_project(project: Path) -> Path:
    """The two crates from the wheel, and the README's program beside them;
    returns ``project``."""
    project.mkdir(parents=True)
    command = [sys.executable, "-m", "rextio_device_cuda", "runtime-source", "--into", "."]
    _run(command, cwd=project)
    installed = sorted(path.name for path in (project / INSTALL_PARENT).iterdir())
    if installed != CRATES:
        pytest.fail(f"runtime-source installed {installed}, not {CRATES}")
    files = readme_files(SECTION)
    assert sorted(files) == sorted(PROGRAM_FILES), sorted(files)
    for name in PROGRAM_FILES:
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(files[name], encoding="utf-8")
    return project


def _cargo_environment(path_first: Path | None = None) -> dict[str, str]:
    """This environment without cargo's settings for the repository's build."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("CARGO_TARGET_DIR", "CARGO_BUILD_", "RUSTFLAGS"))
        and name != "CARGO_ENCODED_RUSTFLAGS"
    }
    if path_first is not None:
        environment["PATH"] = f"{path_first}{os.pathsep}{environment.get('PATH', '')}"
    return environment


def build_native(project: Path) -> Path:
    """``cargo build --offline`` for this machine; the program's path."""
    cargo = os.environ.get("CARGO") or "cargo"
    _run(
        [cargo, "build", "--offline", "--quiet", "--target-dir", "target"],
        cwd=project,
        env=_cargo_environment(),
    )
    return project / "target" / "debug" / PROGRAM


def build_aarch64(project: Path, recipe_tools: Path) -> Path:
    """The cross build (``recipe_tools``: the build recipe's cargo-zigbuild and
    zig); the program's path."""
    environment = _cargo_environment(path_first=recipe_tools)
    # cargo-zigbuild takes this zig, not one of a python3 on PATH.
    environment["CARGO_ZIGBUILD_ZIG_PATH"] = str(recipe_tools / "zig")
    # zig's caches stay in the project.
    environment["XDG_CACHE_HOME"] = str(project / "zig-cache")
    _run(
        [
            str(recipe_tools / "cargo-zigbuild"),
            *("zigbuild", "--offline", "--quiet", "--target-dir", "target"),
            f"--target={AARCH64_ZIG_TARGET}",
        ],
        cwd=project,
        env=environment,
    )
    return project / "target" / AARCH64_TRIPLE / "debug" / PROGRAM
