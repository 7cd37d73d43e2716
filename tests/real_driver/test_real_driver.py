"""The probe, the smoke and preflight through Rextio Core against NVIDIA's
own driver library on a host without a GPU.

Each image is Debian's non-free ``libcuda1`` of one series, laid out as
NVIDIA's installers do (``/usr/local/nvidia/lib64/libcuda.so.<version>``
plus the ``libcuda.so.1`` link) in a private mount namespace with a private
``/dev``: run as root, libcuda creates ``/dev/nvidiactl``, which must appear
only there. The expectations are the same ones the simulated driver meets
without a device (sim_namespace.assert_no_device_*).
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest
from real_libcuda import OBSERVED_CUDA_VERSION, RealDriver
from sim_namespace import (
    DriverLayout,
    NamespaceRun,
    SimulatedHost,
    assert_no_device_preflight,
    assert_no_device_probe,
    assert_no_device_smoke,
    preflight_argv,
)

SERIES = sorted(OBSERVED_CUDA_VERSION)
# Lists the namespace's /dev on stderr after the command, keeping its status.
LIST_DEV_AFTER = '"$@"; status=$?; ls -A /dev >&2; exit "$status"'

DevEntry = tuple[str, int, int]


def _host_dev() -> list[DevEntry]:
    """The host's /dev: every name with its mode and device number."""
    with os.scandir("/dev") as entries:
        return sorted(
            (
                entry.name,
                entry.stat(follow_symlinks=False).st_mode,
                entry.stat(follow_symlinks=False).st_rdev,
            )
            for entry in entries
        )


def _run(host: SimulatedHost, driver: RealDriver, argv: list[str]) -> NamespaceRun:
    """Runs ``argv`` beside ``driver``; the host's /dev must not change."""
    shell = shutil.which("sh")
    assert shell is not None
    layout = DriverLayout(image=driver.image, image_version=driver.image_version, private_dev=True)
    before = _host_dev()
    run = host.run(layout, [shell, "-c", LIST_DEV_AFTER, shell, *argv])
    assert _host_dev() == before, "the real driver changed the host's /dev"
    return run


def _namespace_dev(run: NamespaceRun) -> set[str]:
    return set(run.stderr.split())


@pytest.mark.parametrize("series", SERIES)
def test_probe_reports_no_devices_with_the_real_driver_version(
    host: SimulatedHost, real_drivers: dict[str, RealDriver], series: str
) -> None:
    run = _run(host, real_drivers[series], [str(host.native.probe)])
    assert_no_device_probe(run, driver_version=OBSERVED_CUDA_VERSION[series])
    # The real driver ran cuInit as root: it made its control node, in the
    # namespace's private /dev only.
    assert "nvidiactl" in _namespace_dev(run), run.stderr


@pytest.mark.parametrize("series", SERIES)
def test_smoke_fails_cleanly_at_cu_init(
    host: SimulatedHost, real_drivers: dict[str, RealDriver], series: str
) -> None:
    run = _run(host, real_drivers[series], [str(host.native.smoke), "--device", "0"])
    assert_no_device_smoke(run)


@pytest.mark.parametrize("series", SERIES)
def test_preflight_through_core_names_no_cuda_devices(
    host: SimulatedHost, real_drivers: dict[str, RealDriver], series: str
) -> None:
    run = _run(host, real_drivers[series], preflight_argv(sys.executable, host.native.probe))
    assert_no_device_preflight(run)
