"""The manual host the README links (docs/manual-host.md), built from the
installed wheel alone.

In an empty directory outside the repository, the document's
``python -m rextio_device_cuda runtime-source --into .`` (this environment's
python, with the wheel installed) installs the runtime and loader crates; the
document's files (read from it) are written beside them; and ``cargo
build --offline`` builds the program, its dependencies' sources coming from
cargo's registry cache: no path into this repository, no workspace around
it. For aarch64 the same project is cross-built with cargo-zigbuild against
the glibc floor, as `cargo xtask dist` builds the shipped probe.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from readme_blocks import MANUAL_HOST, readme_files

from rextio_device_cuda._cuda_results import CUDA_RESULTS
from rextio_device_cuda.runtime_source import INSTALL_PARENT

SECTION = "The program"
INSTALL_COMMAND = "runtime-source.sh"
PROGRAM_FILES = ("Cargo.toml", "src/main.rs")
PROGRAM = "manual-host"
# What runtime-source installs, beside each other.
CRATES = ["rextio-cuda-loader", "rextio-cuda-runtime"]
AARCH64_TRIPLE = "aarch64-unknown-linux-gnu"
# cargo-zigbuild's form of the triple with the glibc floor of the wheels.
AARCH64_ZIG_TARGET = f"{AARCH64_TRIPLE}.2.17"
BUILD_TIMEOUT_SECONDS = 900
# What the program prints (docs/manual-host.md): the load, then the lifetime
# sequence's end; a failure is `failed: ` and the error's Display.
LOADED = "loaded"
COMPLETE = "complete"
FAILED = "failed: "


def not_loaded(reason_code: str) -> str:
    return f"not loaded: {reason_code}"


def assert_failed_at(stdout: str, operation: str, result: int) -> None:
    """``stdout`` is ``loaded``, then ``failed: `` and the error's Display,
    which names the operation, the CUDA result and its ``cuda.h`` name
    (contract 9.9; the sentence around them is the runtime's to word)."""
    lines = stdout.splitlines()
    assert len(lines) == 2, stdout
    assert lines[0] == LOADED, stdout
    assert lines[1].startswith(FAILED), stdout
    [name] = [name for name, value in CUDA_RESULTS.items() if value == result]
    for fact in (operation, str(result), name):
        assert re.search(rf"(?<![\w-]){re.escape(fact)}(?![\w-])", lines[1]), (fact, stdout)


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
    """The two crates from the wheel, and the document's program beside them;
    returns ``project``."""
    project.mkdir(parents=True)
    files = readme_files(SECTION, MANUAL_HOST)
    assert sorted(files) == sorted((INSTALL_COMMAND, *PROGRAM_FILES)), sorted(files)
    # The command as written, with this environment's python first on PATH.
    environment = dict(os.environ)
    environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environment.get('PATH', '')}"
    _run(["/bin/sh", "-e", "-c", files[INSTALL_COMMAND]], cwd=project, env=environment)
    installed = sorted(path.name for path in (project / INSTALL_PARENT).iterdir())
    if installed != CRATES:
        pytest.fail(f"runtime-source installed {installed}, not {CRATES}")
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
