"""`cargo xtask validate-nvidia` end to end: succeeds beside the simulated
driver, and explains LIBCUDA_SO_NOT_FOUND on this GPU-less host.

The built xtask binary runs with ``--dev-build``, so it reuses the dev-profile
probe and smoke that `cargo xtask test` already built instead of compiling a
release; the evidence records that profile.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sim_namespace import DriverLayout, SimulatedHost

ONE_DEVICE = ("driver_version=12040", "device=NVIDIA Simulated A100|8|0")


@pytest.fixture
def xtask(sim_host: SimulatedHost) -> Path:
    """The xtask binary beside the built probe (both in cargo's dev profile dir)."""
    binary = sim_host.native.probe.parent / "xtask"
    if not binary.is_file():
        pytest.fail(f"no built xtask at {binary}: run through `cargo xtask test`")
    return binary


def _evidence(path: Path) -> dict[str, Any]:
    evidence: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    assert evidence["support_claim"] is False
    assert evidence["kernel_executed"] is False
    assert evidence["certification_ready"] is False
    assert evidence["build_profile"] == "dev"

    def strings(value: object) -> list[str]:
        if isinstance(value, str):
            return [value]
        if isinstance(value, dict):
            return [s for key, item in value.items() for s in [key, *strings(item)]]
        if isinstance(value, list):
            return [s for item in value for s in strings(item)]
        return []

    assert not [s for s in strings(evidence) if s.startswith(("/", "\\")) or "/work" in s]
    return evidence


def test_validate_nvidia_succeeds_beside_the_simulated_driver(
    sim_host: SimulatedHost, xtask: Path, tmp_path: Path
) -> None:
    output = tmp_path / "evidence.json"
    argv: list[str | os.PathLike[str]] = [xtask, "validate-nvidia", "--sm", "sm_80"]
    argv += ["--device", "0", "--dev-build", "--output", output]
    run = sim_host.run(DriverLayout(config=ONE_DEVICE), argv)
    assert run.returncode == 0, run.stderr
    evidence = _evidence(output)
    assert evidence["validated"] is True
    assert evidence["reason_code"] is None
    assert evidence["capability"] == "cuda-linux-x86_64"
    assert evidence["probe_report"]["status"] == "probe-complete"
    assert evidence["preflight"]["status"] == "ready"
    assert evidence["preflight"]["observations"]["selected.sm"] == "sm_80"
    # The probe it built is pinned: its digest is recorded and observed.
    digest = hashlib.sha256(sim_host.native.probe.read_bytes()).hexdigest()
    assert evidence["probe_sha256"] == digest
    assert evidence["preflight"]["observations"]["probe.sha256"] == digest
    assert evidence["smoke"]["status"] == "smoke-complete"
    assert [line.split(" ", 1)[0] for line in run.calls].count("cuCtxDestroy_v2") == 1


def test_validate_nvidia_explains_a_missing_driver_on_this_host(
    xtask: Path, tmp_path: Path
) -> None:
    output = tmp_path / "evidence.json"
    run = subprocess.run(
        [xtask, "validate-nvidia", "--sm", "sm_80", "--dev-build", "--output", output],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=os.environ.copy(),
    )
    assert run.returncode == 1
    # The explanation names the fixed directories searched.
    assert "LIBCUDA_SO_NOT_FOUND: No libcuda.so.1 exists where the probe looked" in run.stderr
    assert "/usr/local/nvidia/lib64, /usr/local/nvidia/lib" in run.stderr
    evidence = _evidence(output)
    assert evidence["validated"] is False
    assert evidence["reason_code"] == "LIBCUDA_SO_NOT_FOUND"
    assert evidence["smoke"]["reason_code"] == "LIBCUDA_SO_NOT_FOUND"


@pytest.mark.parametrize(
    "arguments",
    [
        [],
        ["--sm", "80"],
        ["--sm", "sm_80", "--device", "1024"],
        ["--sm", "sm_80", "--device"],
        ["--sm", "sm_80", "--frobnicate"],
    ],
    ids=["no-sm", "bad-sm", "device-out-of-range", "missing-value", "unknown-flag"],
)
def test_validate_nvidia_usage_errors_exit_2_before_building(
    arguments: list[str], xtask: Path, tmp_path: Path
) -> None:
    output = tmp_path / "evidence.json"
    run = subprocess.run(
        [xtask, "validate-nvidia", *arguments, "--output", output],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=os.environ.copy(),
    )
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith("error: ")
    assert "Traceback" not in run.stderr
    assert run.stdout == ""
    assert not output.exists()
