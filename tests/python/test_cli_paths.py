"""The command line's edges, through real subprocesses: every path argument of every
command refuses a missing, relative, empty or wrong-kind path with one ``error:``
message and exit 2 before any work; ``-V``; a description in every ``--help``;
``preflight`` on the installed probe by default; ``explain`` folds ASCII case only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cuda_support import run_cli, unwrapped

import rextio_device_cuda
from rextio_device_cuda.cli import _parser

# The rest of a command line around the path argument under test ({} is the path).
PREFLIGHT = ("preflight", "--capability", "cuda-linux-x86_64", "--device", "0", "--sm", "sm_80")
VALIDATE = ("validate", "--sm", "sm_80")
# (command line, what kind of path it must be): "absolute-file", "absolute-directory",
# "file" (relative to the working directory allowed), "directory", "new-directory"
# (created when missing), "output" (a file whose directory exists).
PATH_ARGUMENTS = [
    ((*PREFLIGHT, "--probe", "{}"), "absolute-file"),
    ((*PREFLIGHT, "--toolkit-root", "{}"), "absolute-directory"),
    ((*PREFLIGHT, "--driver-root", "{}"), "absolute-directory"),
    ((*VALIDATE, "--probe", "{}"), "absolute-file"),
    ((*VALIDATE, "--smoke", "{}"), "absolute-file"),
    ((*VALIDATE, "--toolkit-root", "{}"), "absolute-directory"),
    ((*VALIDATE, "--driver-root", "{}"), "absolute-directory"),
    ((*VALIDATE, "--output", "{}"), "output"),
    (("runtime-source", "--into", "{}"), "directory"),
    (("pin-probe", "{}"), "file"),
    (("build-probe", "--into", "{}"), "new-directory"),
]


def _unusable(kind: str, tmp_path: Path) -> list[str]:
    """Paths this kind of argument cannot use (made relative to ``tmp_path``, the
    working directory)."""
    (tmp_path / "a-file").write_text("x", encoding="ascii")
    (tmp_path / "a-directory").mkdir(exist_ok=True)
    missing = [str(tmp_path / "missing" / "deeper"), "missing-relative/deeper"]
    if kind == "absolute-file":
        return ["", *missing, "a-file", str(tmp_path / "a-directory")]
    if kind == "absolute-directory":
        return ["", *missing, "a-directory", str(tmp_path / "a-file")]
    if kind == "file":
        return ["", *missing, str(tmp_path / "a-directory"), "a-directory"]
    if kind == "directory":
        return ["", *missing, str(tmp_path / "a-file"), "a-file"]
    if kind == "new-directory":
        return ["", str(tmp_path / "a-file"), "a-file", "/etc/passwd"]
    if kind == "output":
        return ["", *missing, str(tmp_path / "a-directory"), "a-directory"]
    raise AssertionError(kind)


@pytest.mark.parametrize(
    ("template", "kind"),
    PATH_ARGUMENTS,
    ids=[f"{template[0]}-{template[-2]}-{kind}" for template, kind in PATH_ARGUMENTS],
)
def test_every_unusable_path_is_one_error_and_exit_2(
    template: tuple[str, ...], kind: str, tmp_path: Path
) -> None:
    for path in _unusable(kind, tmp_path):
        before = sorted(tmp_path.rglob("*"))
        argv = [path if word == "{}" else word for word in template]
        done = run_cli(*argv, cwd=tmp_path)
        assert done.returncode == 2, (argv, done.stdout, done.stderr)
        assert done.stdout == ""
        assert "Traceback" not in done.stderr
        said = unwrapped(done.stderr)
        errors = [line for line in said.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1, done.stderr
        assert said.endswith(errors[0] + "\n"), done.stderr
        # Refused before any work: nothing was made.
        assert sorted(tmp_path.rglob("*")) == before, argv


def test_dash_v_is_the_version(tmp_path: Path) -> None:
    for flag in ("-V", "--version"):
        done = run_cli(flag, cwd=tmp_path)
        assert (done.returncode, done.stderr) == (0, ""), flag
        assert done.stdout == f"rextio-device-cuda {rextio_device_cuda.__version__}\n"


def test_every_command_s_help_has_a_description(tmp_path: Path) -> None:
    [commands] = [
        action
        for action in _parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    ]
    names = sorted(commands.choices)
    assert "pin-probe" in names
    for name in names:
        description = commands.choices[name].description
        assert description, name
        done = run_cli(name, "--help", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        first_words = " ".join(description.split()[:4])
        assert first_words in " ".join(done.stdout.split()), (name, done.stdout)


@pytest.mark.parametrize(
    ("text", "status"),
    [("cuda_sm_mismatch", 0), ("Cuda_Sm_Mismatch", 0), ("cuda_sm_m\u0131smatch", 2)],
)
def test_explain_folds_ascii_case_only(text: str, status: int, tmp_path: Path) -> None:
    done = run_cli("explain", text, cwd=tmp_path)
    assert done.returncode == status, done.stderr
    if status == 0:
        assert done.stdout.startswith("CUDA_SM_MISMATCH: ")
    else:
        assert done.stdout == ""
        assert done.stderr.startswith("error: unknown reason code "), done.stderr


def test_preflight_runs_the_installed_probe_by_default(tmp_path: Path) -> None:
    # This host's platform wheel ships a probe; no driver is installed here, or
    # the driver root named is empty: the shipped probe answers, pinned.
    empty = tmp_path / "empty"
    empty.mkdir()
    done = run_cli(*PREFLIGHT, "--driver-root", str(empty), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    said = unwrapped(done.stderr)
    assert "LIBCUDA_SO_NOT_FOUND: " in said
    assert "\nobserved: the configured driver_root holds no libcuda.so.1\n" in said
    pinned = run_cli(*PREFLIGHT, "--probe-sha256", "0" * 64, cwd=tmp_path)
    assert pinned.returncode == 2
    assert unwrapped(pinned.stderr).startswith("error: --probe-sha256 pins the probe given")


def test_a_pure_installation_still_requires_probe(tmp_path: Path) -> None:
    # A copy of the installed package without its binaries: the pure wheel's layout.
    copy = tmp_path / "site" / "rextio_device_cuda"
    shutil.copytree(Path(rextio_device_cuda.__file__).resolve().parent, copy)
    shutil.rmtree(copy / "_bin")
    environment = {**os.environ, "PYTHONPATH": str(copy.parent)}
    done = subprocess.run(
        [sys.executable, "-m", "rextio_device_cuda", *PREFLIGHT],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    said = unwrapped(done.stderr)
    assert said.startswith("error: --probe PATH is required: no probe ships"), said
    assert "build-probe" in said
