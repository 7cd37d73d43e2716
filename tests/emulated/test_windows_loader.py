"""The Windows loader rule, executed: the probe and smoke built for
``x86_64-pc-windows-gnu`` run under Wine, with the simulated driver as
System32's ``nvcuda.dll`` and decoy ``nvcuda.dll`` copies beside the probe,
in its working directory and on PATH, each answering its own version.

Only System32's ``nvcuda.dll`` is ever loaded
(``LOAD_LIBRARY_SEARCH_SYSTEM32``). Each copy logs ``loaded <its path>``
when Windows attaches it (tests/sim-driver), so a decoy that was never
loaded has no log at all. The control test shows the decoys are exactly what
an unrestricted search by name finds.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from emulation import (
    NVCUDA,
    SIM_CALL_LOG_NAME,
    SIM_CONFIG_NAME,
    WinePrefix,
    call_log,
    called_symbols,
    install_sim_nvcuda,
)
from sim_namespace import NamespaceRun

SYSTEM32 = r"C:\windows\system32"
WORK = r"C:\rextio"
PROBE_DIR = rf"{WORK}\probe"
CWD_DIR = rf"{WORK}\cwd"
PATH_DIR = rf"{WORK}\path"
PROBE_EXE = "rextio-cuda-driver-probe.exe"
SMOKE_EXE = "rextio-cuda-runtime-smoke.exe"
SYSTEM32_VERSION = 12080
SYSTEM32_DEVICE = ("NVIDIA Wine System32 GPU", 8, 6)
# Each decoy answers a version and a device of its own.
DECOY_VERSIONS = {PROBE_DIR: 11010, CWD_DIR: 11020, PATH_DIR: 11030}
WINDOWS_GNU_TARGET = {"os": "windows", "arch": "x86_64", "environment": "gnu"}
# What the probe calls, in order, when one device is present.
PROBE_CALLS = [
    "cuDriverGetVersion",
    "cuInit",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceComputeCapability",
]


def _sim_config(version: int, device: tuple[str, int, int]) -> list[str]:
    name, major, minor = device
    return [f"driver_version={version}", f"device={name}|{major}|{minor}"]


@dataclass
class WindowsHost:
    """The prefix laid out for one test."""

    prefix: WinePrefix
    sim_driver: Path

    def path(self, windows_path: str) -> Path:
        return self.prefix.host_path(windows_path)

    def reset(self) -> None:
        """Removes everything a test lays out (a failed run may have left it)."""
        system32 = self.path(SYSTEM32)
        for name in (NVCUDA, SIM_CONFIG_NAME, SIM_CALL_LOG_NAME):
            (system32 / name).unlink(missing_ok=True)
        shutil.rmtree(self.path(WORK), ignore_errors=True)

    def install_system32_driver(self) -> None:
        install_sim_nvcuda(
            self.sim_driver, self.path(SYSTEM32), _sim_config(SYSTEM32_VERSION, SYSTEM32_DEVICE)
        )

    def run(self, argv: list[str], cwd: str = CWD_DIR) -> NamespaceRun:
        """Runs ``argv`` in ``cwd`` with the PATH decoy's directory on PATH."""
        return self.prefix.run(argv, cwd=self.path(cwd), winepath=PATH_DIR)

    def system32_log(self) -> list[str] | None:
        return call_log(self.path(SYSTEM32))

    def decoy_logs(self) -> dict[str, list[str] | None]:
        return {directory: call_log(self.path(directory)) for directory in DECOY_VERSIONS}


@pytest.fixture
def windows(
    wine_prefix: WinePrefix, windows_probe: Path, windows_smoke: Path, windows_sim_driver: Path
) -> Iterator[WindowsHost]:
    """The probe and smoke in C:\\rextio\\probe, a decoy in each searched directory."""
    host = WindowsHost(wine_prefix, windows_sim_driver)
    host.reset()
    probe_dir = host.path(PROBE_DIR)
    for directory, version in DECOY_VERSIONS.items():
        install_sim_nvcuda(
            windows_sim_driver, host.path(directory), _sim_config(version, (directory, 7, 0))
        )
    shutil.copyfile(windows_probe, probe_dir / PROBE_EXE)
    shutil.copyfile(windows_smoke, probe_dir / SMOKE_EXE)
    yield host
    host.reset()


NO_DECOY_LOADED = dict.fromkeys(DECOY_VERSIONS)


def test_probe_loads_system32s_nvcuda_and_only_that_one(windows: WindowsHost) -> None:
    windows.install_system32_driver()
    run = windows.run([rf"{PROBE_DIR}\{PROBE_EXE}"])
    assert run.returncode == 0, run.stderr
    name, major, minor = SYSTEM32_DEVICE
    assert run.record() == {
        "schema_version": "1",
        "probe": "rextio-cuda-driver-probe",
        "support_claim": False,
        "target": WINDOWS_GNU_TARGET,
        "platform_supported": True,
        "status": "probe-complete",
        "reason_code": None,
        "driver_loaded": True,
        "driver_version": SYSTEM32_VERSION,
        "device_count": 1,
        "cuda_result": 0,
        "devices": [
            {
                "ordinal": 0,
                "name": name,
                "compute_major": major,
                "compute_minor": minor,
                "sm": f"sm_{major}{minor}",
            }
        ],
    }
    log = windows.system32_log()
    assert log is not None
    assert log[0] == rf"loaded {SYSTEM32}\{NVCUDA}"
    assert called_symbols(log) == PROBE_CALLS
    assert "CUDA_DISABLE_JIT=1 CUDA_FORCE_PRELOAD_LIBRARIES=0" in log[2], log
    assert windows.decoy_logs() == NO_DECOY_LOADED


def test_smoke_runs_its_lifetime_on_system32s_nvcuda_only(windows: WindowsHost) -> None:
    windows.install_system32_driver()
    run = windows.run([rf"{PROBE_DIR}\{SMOKE_EXE}", "--device", "0"])
    assert run.returncode == 0, (run.stdout, run.stderr)
    record = run.record()
    assert (record["status"], record["reason_code"], record["target"]) == (
        "smoke-complete",
        None,
        WINDOWS_GNU_TARGET,
    ), record
    log = windows.system32_log()
    assert log is not None
    assert log[0] == rf"loaded {SYSTEM32}\{NVCUDA}"
    symbols = called_symbols(log)
    assert symbols[:3] == ["cuInit", "cuDeviceGet", "cuCtxCreate_v2"], log
    assert symbols[-1] == "cuCtxDestroy_v2", log
    assert "leaked_streams=0 leaked_allocations=0" in log[-1], log
    assert windows.decoy_logs() == NO_DECOY_LOADED


def test_without_system32s_nvcuda_no_decoy_is_loaded(windows: WindowsHost) -> None:
    run = windows.run([rf"{PROBE_DIR}\{PROBE_EXE}"])
    assert run.returncode == 0, run.stderr
    record = run.record()
    assert {key: record[key] for key in ("status", "reason_code", "driver_loaded")} == {
        "status": "unavailable",
        "reason_code": "NVCUDA_DLL_NOT_FOUND",
        "driver_loaded": False,
    }, record
    assert record["driver_version"] is None
    assert windows.system32_log() is None
    assert windows.decoy_logs() == NO_DECOY_LOADED


@pytest.mark.parametrize(
    ("cwd", "found"),
    [(PROBE_DIR, PROBE_DIR), (CWD_DIR, CWD_DIR), ("C:\\", PATH_DIR)],
    ids=["beside-the-probe", "working-directory", "on-path"],
)
def test_each_decoy_is_what_a_search_by_name_finds(
    windows: WindowsHost, cwd: str, found: str
) -> None:
    # The control: Windows' own search by name (rundll32 loads "nvcuda.dll"
    # as LoadLibrary does) reaches each decoy; the probe's never does.
    run = windows.run([rf"{SYSTEM32}\rundll32.exe", f"{NVCUDA},cuInit"], cwd=cwd)
    assert run.returncode == 0, run.stderr
    logs = windows.decoy_logs()
    log = logs.pop(found)
    assert log is not None, logs
    assert log[0] == rf"loaded {found}\{NVCUDA}", log
    assert all(other is None for other in logs.values()), logs
