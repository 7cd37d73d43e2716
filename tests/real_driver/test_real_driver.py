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

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from real_libcuda import OBSERVED_CUDA_VERSION, RealDriver
from real_namespace import installed, run_beside
from sim_namespace import (
    SimulatedHost,
    assert_no_device_preflight,
    assert_no_device_probe,
    assert_no_device_smoke,
    preflight_argv,
)

SERIES = sorted(OBSERVED_CUDA_VERSION)
SYMBOL_LIST = Path(__file__).resolve().parents[2] / "templates" / "driver-symbols.json"
# The exports that move bytes (Stream::copy_to_device, copy_from_device, fill).
DATA_EXPORTS = {"cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2", "cuMemsetD8Async"}


def _runtime_exports() -> list[str]:
    symbols = json.loads(SYMBOL_LIST.read_text(encoding="utf-8"))["symbols"]
    return [symbol["export"] for symbol in symbols if "runtime" in symbol["components"]]


@pytest.mark.parametrize("series", SERIES)
def test_every_runtime_export_is_defined_by_the_real_image(
    real_drivers: dict[str, RealDriver], series: str
) -> None:
    nm = shutil.which("nm")
    assert nm, "the check needs `nm` (binutils) on PATH"
    listed = subprocess.run(
        [nm, "--dynamic", "--defined-only", str(real_drivers[series].image)],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout
    defined = {line.split()[-1].split("@", 1)[0] for line in listed.splitlines() if line.strip()}
    exports = _runtime_exports()
    assert set(exports) >= DATA_EXPORTS
    assert [export for export in exports if export not in defined] == []


@pytest.mark.parametrize("series", SERIES)
def test_probe_reports_no_devices_with_the_real_driver_version(
    host: SimulatedHost, real_drivers: dict[str, RealDriver], series: str
) -> None:
    outcome = run_beside(host, installed(real_drivers[series]), [str(host.native.probe)])
    assert_no_device_probe(outcome.run, driver_version=OBSERVED_CUDA_VERSION[series])
    # The real driver ran cuInit as root: it made its control node, in the
    # namespace's private /dev only.
    assert "nvidiactl" in outcome.dev, outcome.run.stderr


@pytest.mark.parametrize("series", SERIES)
def test_smoke_fails_cleanly_at_cu_init(
    host: SimulatedHost, real_drivers: dict[str, RealDriver], series: str
) -> None:
    smoke = [str(host.native.smoke), "--device", "0"]
    # Stopping at cuInit means the reviewed loader resolved every required
    # runtime export of this image first, the data exports among them.
    assert_no_device_smoke(run_beside(host, installed(real_drivers[series]), smoke).run)


@pytest.mark.parametrize("series", SERIES)
def test_preflight_through_core_names_no_cuda_devices(
    host: SimulatedHost, real_drivers: dict[str, RealDriver], series: str
) -> None:
    preflight = preflight_argv(sys.executable, host.native.probe)
    assert_no_device_preflight(run_beside(host, installed(real_drivers[series]), preflight).run)
