"""The aarch64 probe and smoke, executed: under qemu's user-mode emulator in an
arm64 chroot holding NVIDIA's real arm64 ``libcuda1`` (Debian non-free) at
the reviewed candidate ``/usr/lib/aarch64-linux-gnu``, on a host without a GPU.

The expectations are the x86_64 ones (tests/real_driver): the driver loads,
reports its version before ``cuInit``, and ``cuInit`` answers 100.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from emulation import ARM64_SERIES, Arm64Chroot, Emulated
from real_libcuda import OBSERVED_CUDA_VERSION
from sim_namespace import assert_no_device_probe, assert_no_device_smoke

AARCH64_TARGET = {"os": "linux", "arch": "aarch64", "environment": "gnu"}


@pytest.mark.parametrize("series", ARM64_SERIES)
def test_probe_reports_no_devices_with_the_real_arm64_driver(
    chroot: Arm64Chroot, emulated: Emulated, aarch64_probe: Path, series: str
) -> None:
    outcome = chroot.run(emulated.drivers[series], aarch64_probe, [])
    assert_no_device_probe(outcome.run, driver_version=OBSERVED_CUDA_VERSION[series])
    assert outcome.run.record() == {
        "schema_version": "1",
        "probe": "rextio-cuda-driver-probe",
        "support_claim": False,
        "target": AARCH64_TARGET,
        "platform_supported": True,
        "status": "unavailable",
        "reason_code": "NO_CUDA_DEVICES",
        "driver_loaded": True,
        "driver_version": OBSERVED_CUDA_VERSION[series],
        "device_count": 0,
        "cuda_result": 100,
        "devices": [],
    }
    # The real driver ran cuInit as root: its control node appeared in the
    # chroot's own /dev, never the host's.
    assert "nvidiactl" in outcome.dev, outcome.run.stderr
    assert not os.path.lexists("/dev/nvidiactl")


@pytest.mark.parametrize("series", ARM64_SERIES)
def test_smoke_fails_cleanly_at_cu_init_with_the_real_arm64_driver(
    chroot: Arm64Chroot, emulated: Emulated, aarch64_smoke: Path, series: str
) -> None:
    outcome = chroot.run(emulated.drivers[series], aarch64_smoke, ["--device", "0"])
    assert_no_device_smoke(outcome.run)
    # Exactly what the smoke reports without a GPU: it stopped at cuInit.
    assert outcome.run.record() == {
        "schema_version": "1",
        "probe": "rextio-cuda-runtime-smoke",
        "support_claim": False,
        "target": AARCH64_TARGET,
        "status": "unavailable",
        "reason_code": "CU_INIT_FAILED",
        "cuda_result": 100,
        "device_ordinal": 0,
        "allocation_bytes": 4096,
        "kernel_executed": False,
        "certification_ready": False,
    }


def test_probe_without_a_driver_finds_none(chroot: Arm64Chroot, aarch64_probe: Path) -> None:
    outcome = chroot.run(None, aarch64_probe, [])
    assert outcome.run.returncode == 0, outcome.run.stderr
    record = outcome.run.record()
    assert {key: record[key] for key in ("status", "reason_code", "driver_loaded")} == {
        "status": "unavailable",
        "reason_code": "LIBCUDA_SO_NOT_FOUND",
        "driver_loaded": False,
    }, record
    assert record["target"] == AARCH64_TARGET
    assert "nvidiactl" not in outcome.dev
