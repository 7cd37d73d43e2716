"""The aarch64 probe and smoke, executed: under qemu's user-mode emulator in an
arm64 chroot holding NVIDIA's real arm64 ``libcuda1`` (Debian non-free), on a
host without a GPU: at the reviewed candidate ``/usr/lib/aarch64-linux-gnu``,
and laid out as each aarch64 platform lays it out
(tests/real_driver/platform_layouts.py's ``ARM64_PLATFORMS``).

The expectations are the x86_64 ones (tests/real_driver): the driver loads,
reports its version before ``cuInit``, and ``cuInit`` answers 100.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from emulation import ARM64_SERIES, NO_DRIVER, Arm64Chroot, Emulated
from platform_layouts import (
    ARM64_PLATFORMS,
    Layout,
    Platform,
    expected_facts,
    host_state,
    ubuntu_arm64,
)
from real_libcuda import OBSERVED_CUDA_VERSION, DriverImage
from sim_namespace import assert_no_device_probe, assert_no_device_smoke

AARCH64_TARGET = {"os": "linux", "arch": "aarch64", "environment": "gnu"}


@pytest.mark.parametrize("series", ARM64_SERIES)
def test_probe_reports_no_devices_with_the_real_arm64_driver(
    chroot: Arm64Chroot, emulated: Emulated, aarch64_probe: Path, series: str
) -> None:
    outcome = chroot.run(ubuntu_arm64(emulated.drivers[series]), aarch64_probe, [])
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
    outcome = chroot.run(ubuntu_arm64(emulated.drivers[series]), aarch64_smoke, ["--device", "0"])
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
        "round_trip": False,
    }


def test_probe_without_a_driver_finds_none(chroot: Arm64Chroot, aarch64_probe: Path) -> None:
    outcome = chroot.run(NO_DRIVER, aarch64_probe, [])
    assert outcome.run.returncode == 0, outcome.run.stderr
    record = outcome.run.record()
    assert {key: record[key] for key in ("status", "reason_code", "driver_loaded")} == {
        "status": "unavailable",
        "reason_code": "LIBCUDA_SO_NOT_FOUND",
        "driver_loaded": False,
    }, record
    assert record["target"] == AARCH64_TARGET
    assert "nvidiactl" not in outcome.dev


def _driver_root_arguments(layout: Layout) -> list[str]:
    return [] if layout.driver_root is None else ["--driver-root", layout.driver_root]


@pytest.mark.parametrize("series", ARM64_SERIES)
@pytest.mark.parametrize(
    "platform", ARM64_PLATFORMS, ids=[platform.name for platform in ARM64_PLATFORMS]
)
def test_the_real_arm64_driver_loads_in_every_aarch64_home(
    chroot: Arm64Chroot,
    emulated: Emulated,
    aarch64_probe: Path,
    platform: Platform[DriverImage],
    series: str,
) -> None:
    layout = platform.layout(emulated.drivers[series])
    before = host_state()
    outcome = chroot.run(layout, aarch64_probe, _driver_root_arguments(layout))
    assert host_state() == before, "building the chroot changed the host"

    assert outcome.facts.splitlines() == expected_facts(platform.name), outcome.facts
    # The shipped aarch64 probe loaded this home's image: the series'
    # version, and cuInit's 100 without a GPU.
    assert_no_device_probe(outcome.run, driver_version=OBSERVED_CUDA_VERSION[series])
    assert outcome.run.record()["target"] == AARCH64_TARGET
    assert "refused" not in outcome.run.stderr, outcome.run.stderr
    # Run as root, the real driver made its control node in the chroot's /dev.
    assert "nvidiactl" in outcome.dev, outcome.run.stderr
    if layout.driver_root is not None:
        # Only driver_root finds it: it is no reviewed home.
        search = chroot.run(layout, aarch64_probe, [])
        assert search.run.record()["reason_code"] == "LIBCUDA_SO_NOT_FOUND", search.run.stdout
        assert "nvidiactl" not in search.dev


@pytest.mark.parametrize("series", ARM64_SERIES)
def test_the_nix_store_left_writable_is_refused_on_aarch64(
    chroot: Arm64Chroot, emulated: Emulated, aarch64_probe: Path, series: str
) -> None:
    # The NixOS layout without its read-only remount: the image's second
    # hard link is what the links rule refuses.
    nixos = next(platform for platform in ARM64_PLATFORMS if platform.name == "nixos")
    layout = dataclasses.replace(nixos.layout(emulated.drivers[series]), last=(), facts=())
    outcome = chroot.run(layout, aarch64_probe, [])
    record = outcome.run.record()
    assert (record["reason_code"], record["driver_loaded"]) == ("LIBCUDA_SO_LOAD_FAILED", False)
    assert "rule `links`" in outcome.run.stderr, outcome.run.stderr
    # Nothing of the driver ran.
    assert "nvidiactl" not in outcome.dev
