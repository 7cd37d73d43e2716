"""`python -m rextio_device_cuda validate` end to end: ready beside the
simulated driver, LIBCUDA_SO_NOT_FOUND explained on this GPU-less host.

The probe and smoke are shipped the way a platform wheel ships them, inside
the package at ``rextio_device_cuda/_bin/`` beside ``SHA256SUMS``: the
installed package is copied, with the built binaries in its ``_bin/``, into a directory put first on
PYTHONPATH (the distribution's metadata and entry point stay the installed
ones, so Core loads the provider exactly as after a pip install).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from sim_namespace import DriverLayout, NamespaceTools, NativeBinaries, SimulatedHost

import rextio_device_cuda
from rextio_device_cuda._provider_spec import PROVIDER_SPEC

ONE_DEVICE = ("driver_version=12040", "device=NVIDIA Simulated A100|8|0")
VALIDATE = [sys.executable, "-m", "rextio_device_cuda", "validate"]


def _package_copy(site: Path) -> Path:
    package = site / "rextio_device_cuda"
    installed = Path(rextio_device_cuda.__file__).resolve().parent
    shutil.copytree(installed, package, ignore=shutil.ignore_patterns("__pycache__", "_bin"))
    return package


@pytest.fixture
def shipped(native: NativeBinaries, tmp_path: Path) -> dict[str, str]:
    """PYTHONPATH naming the package with the built probe and smoke in ``_bin/``."""
    site = tmp_path / "site"
    binaries = _package_copy(site) / "_bin"
    binaries.mkdir()
    sums = ""
    for binary in (native.probe, native.smoke):
        shutil.copy2(binary, binaries / binary.name)
        sums += f"{hashlib.sha256(binary.read_bytes()).hexdigest()}  {binary.name}\n"
    # The platform wheel's record of its binaries (python/hatch_build.py writes it).
    (binaries / "SHA256SUMS").write_text(sums, encoding="ascii")
    return {"PYTHONPATH": str(site)}


def _run(
    arguments: list[str | os.PathLike[str]], env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*VALIDATE, *arguments],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **env},
    )


def _explained(code: str) -> str:
    explanation, remedy = PROVIDER_SPEC.reason_codes[code]
    return f"{code}: {explanation}\nremedy: {remedy}"


def _evidence(path: Path, stdout: str, local: Path) -> dict[str, Any]:
    evidence: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    assert json.loads(stdout) == evidence
    assert evidence["support_claim"] is False
    assert evidence["kernel_executed"] is False
    assert evidence["certification_ready"] is False
    assert evidence["provider_version"] == rextio_device_cuda.__version__

    def strings(value: object) -> list[str]:
        if isinstance(value, str):
            return [value]
        if isinstance(value, dict):
            return [s for key, item in value.items() for s in [key, *strings(item)]]
        if isinstance(value, list):
            return [s for item in value for s in strings(item)]
        return []

    assert not [s for s in strings(evidence) if PurePosixPath(s).is_absolute() or "\\" in s]
    assert str(local) not in path.read_text(encoding="utf-8")
    return evidence


def test_validate_succeeds_beside_the_simulated_driver(
    sim_host: SimulatedHost, shipped: dict[str, str], tmp_path: Path
) -> None:
    output = tmp_path / "evidence.json"
    argv: list[str | os.PathLike[str]] = [*VALIDATE, "--sm", "sm_80", "--device", "0"]
    argv += ["--output", output]
    run = sim_host.run(DriverLayout(config=ONE_DEVICE), argv, extra_env=shipped)
    assert run.returncode == 0, run.stderr
    assert "validated: preflight ready and lifetime smoke complete on device 0" in run.stderr
    evidence = _evidence(output, run.stdout, tmp_path)
    assert evidence["validated"] is True
    assert evidence["reason_code"] is None
    assert evidence["capability"] == "cuda-linux-x86_64"
    assert evidence["probe_report"]["status"] == "probe-complete"
    assert evidence["preflight"]["status"] == "ready"
    assert evidence["preflight"]["observations"]["selected.sm"] == "sm_80"
    # The shipped probe is pinned: its digest is recorded and observed.
    digest = hashlib.sha256(sim_host.native.probe.read_bytes()).hexdigest()
    assert evidence["probe_sha256"] == digest
    assert evidence["preflight"]["observations"]["probe.sha256"] == digest
    smoke_digest = hashlib.sha256(sim_host.native.smoke.read_bytes()).hexdigest()
    assert evidence["smoke_sha256"] == smoke_digest
    assert evidence["smoke"]["status"] == "smoke-complete"
    assert evidence["round_trip"] is True
    assert [line.split(" ", 1)[0] for line in run.calls].count("cuCtxDestroy_v2") == 1


def test_validate_fails_over_a_driver_that_loses_a_byte(
    sim_host: SimulatedHost, shipped: dict[str, str], tmp_path: Path
) -> None:
    output = tmp_path / "evidence.json"
    argv: list[str | os.PathLike[str]] = [*VALIDATE, "--sm", "sm_80", "--output", output]
    run = sim_host.run(
        DriverLayout(config=(*ONE_DEVICE, "corrupt_read=2048")), argv, extra_env=shipped
    )
    assert run.returncode == 1, run.stderr
    assert "this host is not validated.\n" + _explained("DEVICE_ROUND_TRIP_MISMATCH") in run.stderr
    evidence = _evidence(output, run.stdout, tmp_path)
    assert (evidence["validated"], evidence["round_trip"]) == (False, False)
    assert evidence["reason_code"] == "DEVICE_ROUND_TRIP_MISMATCH"
    assert evidence["preflight"]["status"] == "ready"
    assert evidence["smoke"]["round_trip"] is False


def test_a_validated_toolkit_root_is_recorded_but_never_named(
    sim_host: SimulatedHost, shipped: dict[str, str], tmp_path: Path
) -> None:
    toolkit = tmp_path / "toolkit-root-marker"
    (toolkit / "include").mkdir(parents=True)
    (toolkit / "version.json").write_text(json.dumps({"cuda": {"version": "12.4.1"}}))
    (toolkit / "include" / "cuda.h").write_text("/* header */\n")
    (toolkit / "lib64").mkdir()
    (toolkit / "lib64" / "libcudart.so").write_bytes(b"\x7fELF")
    output = tmp_path / "evidence.json"
    argv: list[str | os.PathLike[str]] = [*VALIDATE, "--sm", "sm_80", "--toolkit-root", toolkit]
    argv += ["--output", output]
    run = sim_host.run(DriverLayout(config=ONE_DEVICE), argv, extra_env=shipped)
    assert run.returncode == 0, run.stderr
    evidence = _evidence(output, run.stdout, tmp_path)
    assert (evidence["validated"], evidence["toolkit_root_configured"]) == (True, True)
    assert evidence["preflight"]["observations"]["toolkit.version"] == "12.4.1"
    assert "toolkit-root-marker" not in output.read_text(encoding="utf-8")


def test_validate_explains_a_missing_driver_on_this_host(
    namespace_tools: NamespaceTools, shipped: dict[str, str], tmp_path: Path
) -> None:
    # namespace_tools fails the test where this host has a driver of its own.
    output = tmp_path / "evidence.json"
    run = _run(["--sm", "sm_80", "--output", output], shipped)
    assert run.returncode == 1, run.stderr
    assert "this host is not validated.\n" + _explained("LIBCUDA_SO_NOT_FOUND") in run.stderr
    evidence = _evidence(output, run.stdout, tmp_path)
    assert evidence["validated"] is False
    assert evidence["round_trip"] is False
    assert evidence["reason_code"] == "LIBCUDA_SO_NOT_FOUND"
    assert evidence["probe_report"]["reason_code"] == "LIBCUDA_SO_NOT_FOUND"
    assert evidence["smoke"]["reason_code"] == "LIBCUDA_SO_NOT_FOUND"


def test_output_replaces_a_link_another_user_planted_never_writing_through_it(
    namespace_tools: NamespaceTools, shipped: dict[str, str], tmp_path: Path
) -> None:
    # Root writes its evidence into a shared sticky directory (as /tmp) where
    # another user planted a link at the output's name, pointing at a 0600
    # file of root's; this host does not protect links itself.
    assert Path("/proc/sys/fs/protected_symlinks").read_text(encoding="ascii").strip() == "0"
    victim = tmp_path / "victim"
    victim.write_text("root's own\n")
    victim.chmod(0o600)
    shared = Path(tempfile.mkdtemp(prefix="rextio-shared-", dir="/tmp"))
    try:
        shared.chmod(0o1777)
        output = shared / "evidence.json"
        ln = shutil.which("ln")
        assert ln is not None
        subprocess.run(
            [ln, "-s", "--", victim, output],
            user=65534,
            group=65534,
            extra_groups=[],
            check=True,
            timeout=60,
        )
        assert output.lstat().st_uid == 65534
        run = _run(["--sm", "sm_80", "--output", output], shipped)
        assert run.returncode == 1, run.stderr
        assert victim.read_text() == "root's own\n"
        assert not output.is_symlink()
        assert output.stat().st_uid == 0
        assert _evidence(output, run.stdout, tmp_path)["reason_code"] == "LIBCUDA_SO_NOT_FOUND"
        assert sorted(path.name for path in shared.iterdir()) == ["evidence.json"]
    finally:
        shutil.rmtree(shared)


def test_without_shipped_binaries_validate_says_none_ships(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _package_copy(site)
    output = tmp_path / "evidence.json"
    run = _run(["--sm", "sm_80", "--output", output], {"PYTHONPATH": str(site)})
    assert run.returncode == 1, run.stderr
    assert run.stderr.startswith("error: no probe ships for this platform: ")
    assert "python -m rextio_device_cuda build-probe" in run.stderr
    assert "Traceback" not in run.stderr
    assert run.stdout == ""
    assert not output.exists()


def test_a_binary_that_is_not_the_recorded_one_is_refused(
    shipped: dict[str, str], tmp_path: Path
) -> None:
    probe = tmp_path / "site" / "rextio_device_cuda" / "_bin" / PROVIDER_SPEC.probe_report.probe
    probe.write_bytes(probe.read_bytes() + b"\0")
    output = tmp_path / "evidence.json"
    run = _run(["--sm", "sm_80", "--output", output], shipped)
    assert run.returncode == 1, run.stderr
    assert "not the" in run.stderr
    assert "the wheel recorded; reinstall the wheel" in run.stderr
    assert "Traceback" not in run.stderr
    assert run.stdout == ""
    assert not output.exists()


def test_an_unwritable_output_leaves_no_file(shipped: dict[str, str], tmp_path: Path) -> None:
    output = tmp_path / "missing-directory" / "evidence.json"
    run = _run(["--sm", "sm_80", "--output", output], shipped)
    assert run.returncode == 1, run.stderr
    assert run.stderr.startswith("error: no evidence written: ")
    assert "Traceback" not in run.stderr
    assert run.stdout == ""
    assert not output.parent.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]


@pytest.mark.parametrize(
    "arguments",
    [
        [],
        ["--sm", "80"],
        ["--sm", "sm_80", "--device", "1024"],
        ["--sm", "sm_80", "--device", "-1"],
        ["--sm", "sm_80", "--device", "00001"],
        ["--sm", "sm_80", "--device"],
        ["--sm", "sm_80", "--frobnicate"],
    ],
    ids=["no-sm", "bad-sm", "device-out-of-range", "negative", "too-long", "no-value", "unknown"],
)
def test_validate_usage_errors_exit_2_before_running_anything(
    arguments: list[str], shipped: dict[str, str], tmp_path: Path
) -> None:
    output = tmp_path / "evidence.json"
    run = _run([*arguments, "--output", output], shipped)
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith("usage: python -m rextio_device_cuda ")
    assert "\nerror: " in run.stderr
    assert "Traceback" not in run.stderr
    assert run.stdout == ""
    assert not output.exists()
