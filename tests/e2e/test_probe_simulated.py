"""The real probe and its reviewed loader against the simulated driver."""

from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path
from typing import Any

import pytest
from sim_namespace import DriverLayout, SimulatedHost, assert_no_device_probe, rename_export

from rextio_device_cuda._provider_spec import PROVIDER_SPEC
from rextio_device_cuda.probe import parse_probe_report

TWO_DEVICES = (
    "driver_version=12040",
    "device=NVIDIA Simulated A100|8|0",
    "device=NVIDIA Simulated L4|8|9",
)
VERSION_OK = "cuDriverGetVersion -> 0 version=12040"
CU_INIT_OK = (
    "cuInit flags=0 CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_DISABLE_JIT=1 "
    "CUDA_FORCE_PRELOAD_LIBRARIES=0 -> 0"
)
INVENTORY_SYMBOLS = {
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceComputeCapability",
}


def _target() -> dict[str, str]:
    return {"os": "linux", "arch": "x86_64", "environment": "gnu"}


def _failure(status: str, reason: str, **fields: Any) -> dict[str, Any]:
    report: dict[str, Any] = {
        "schema_version": "1",
        "probe": "rextio-cuda-driver-probe",
        "support_claim": False,
        "target": _target(),
        "platform_supported": True,
        "status": status,
        "reason_code": reason,
        "driver_loaded": True,
        "driver_version": None,
        "device_count": None,
        "cuda_result": None,
        "devices": [],
    }
    report.update(fields)
    return report


LOADER_RULES = frozenset(rule.name for rule in PROVIDER_SPEC.loader.rules)


def _probe(sim_host: SimulatedHost, layout: DriverLayout) -> tuple[dict[str, Any], tuple[str, ...]]:
    run = sim_host.run(layout, [sim_host.native.probe])
    assert run.returncode == 0, run.stderr
    record = run.record()
    # Every report, complete or not, satisfies the provider's schema-1 parser,
    # and a refusal names one of the probe's own codes (the ones preflight
    # passes through).
    parse_probe_report(run.stdout)
    reason = record["reason_code"]
    assert reason is None or reason in PROVIDER_SPEC.probe_report.reason_codes, reason
    # refusing_rule and loader_reason come last, and only when the loader refused
    # an image (by a rule, or the dynamic loader after review).
    keys = list(_failure("unavailable", "X"))
    keys += [key for key in ("refusing_rule", "loader_reason") if key in record]
    assert list(record) == keys, "keys must keep contract order"
    return record, run.calls


def _symbols(calls: tuple[str, ...]) -> set[str]:
    return {line.split(" ", 1)[0] for line in calls}


@pytest.mark.parametrize("install", ["file", "link-inside"])
def test_probe_inventories_two_configured_devices(sim_host: SimulatedHost, install: str) -> None:
    record, calls = _probe(sim_host, DriverLayout(config=TWO_DEVICES, install=install))
    assert record == {
        "schema_version": "1",
        "probe": "rextio-cuda-driver-probe",
        "support_claim": False,
        "target": _target(),
        "platform_supported": True,
        "status": "probe-complete",
        "reason_code": None,
        "driver_loaded": True,
        "driver_version": 12040,
        "device_count": 2,
        "cuda_result": 0,
        "devices": [
            {
                "ordinal": 0,
                "name": "NVIDIA Simulated A100",
                "compute_major": 8,
                "compute_minor": 0,
                "sm": "sm_80",
            },
            {
                "ordinal": 1,
                "name": "NVIDIA Simulated L4",
                "compute_major": 8,
                "compute_minor": 9,
                "sm": "sm_89",
            },
        ],
    }
    # The probe never creates a context, allocates or runs anything else.
    assert _symbols(calls) == INVENTORY_SYMBOLS
    # The version is asked first; the driver environment is set before
    # cuInit.
    assert calls[:2] == (VERSION_OK, CU_INIT_OK)
    assert "cuDeviceGetName len=256 device=1 -> 0 bytes=19" in calls


def test_probe_sets_the_driver_environment_whatever_it_inherits(sim_host: SimulatedHost) -> None:
    inherited = {
        "CUDA_DEVICE_ORDER": "FASTEST_FIRST",
        "CUDA_DISABLE_JIT": "0",
        "CUDA_FORCE_PRELOAD_LIBRARIES": "1",
    }
    run = sim_host.run(DriverLayout(config=TWO_DEVICES), [sim_host.native.probe], inherited)
    assert run.record()["status"] == "probe-complete"
    assert run.calls[:2] == (VERSION_OK, CU_INIT_OK)


def test_probe_numbers_devices_in_pci_bus_order_as_nvidia_smi_does(
    sim_host: SimulatedHost,
) -> None:
    # CUDA_DEVICE_ORDER=PCI_BUS_ID is what cuInit sees, even
    # when the caller asked for the driver's default (fastest first) order;
    # and the probe asks nothing of a device before cuInit has seen it.
    inherited = {"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}
    run = sim_host.run(DriverLayout(config=TWO_DEVICES), [sim_host.native.probe], inherited)
    assert run.record()["status"] == "probe-complete"
    init = [index for index, call in enumerate(run.calls) if call.startswith("cuInit ")]
    assert len(init) == 1, run.calls
    assert " CUDA_DEVICE_ORDER=PCI_BUS_ID " in run.calls[init[0]], run.calls
    assert all(call.startswith("cuDriverGetVersion") for call in run.calls[: init[0]]), run.calls


def test_probe_ignores_library_search_environment(sim_host: SimulatedHost, tmp_path: Path) -> None:
    # A usable image named libcuda.so.1 on every search path a dynamic loader
    # or a careless probe might consult: none of them is a reviewed path.
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "libcuda.so.1").write_bytes(sim_host.native.sim_driver.read_bytes())
    (planted / "libcuda.so.1").chmod(0o755)
    (planted / "nvcuda.dll").write_bytes(b"MZ")
    search = {
        name: str(planted)
        for name in ("LD_LIBRARY_PATH", "PATH", "CUDA_PATH", "CUDA_HOME", "LIBCUDA_PATH")
    }
    run = sim_host.run(DriverLayout(install="absent"), [sim_host.native.probe], search)
    assert run.returncode == 0, run.stderr
    parse_probe_report(run.stdout)
    assert run.record() == _failure("unavailable", "LIBCUDA_SO_NOT_FOUND", driver_loaded=False)
    assert run.calls == ()


def test_probe_reports_no_devices_as_the_real_driver_does(sim_host: SimulatedHost) -> None:
    # No device configured: cuInit answers 100 (CUDA_ERROR_NO_DEVICE), as
    # NVIDIA's driver does on a host without a GPU; the same expectation runs
    # against the real libcuda in test_real_driver.py.
    run = sim_host.run(DriverLayout(config=("driver_version=12080",)), [sim_host.native.probe])
    assert_no_device_probe(run, driver_version=12080)
    assert run.calls == (
        "cuDriverGetVersion -> 0 version=12080",
        CU_INIT_OK.replace("-> 0", "-> 100"),
    )


def test_probe_reports_a_zero_device_count(sim_host: SimulatedHost) -> None:
    record, calls = _probe(sim_host, DriverLayout(config=("device_count=0",)))
    assert record == _failure(
        "unavailable", "NO_CUDA_DEVICES", driver_version=12040, device_count=0, cuda_result=0
    )
    assert calls[-1] == "cuDeviceGetCount -> 0 count=0"


def test_probe_reports_cu_init_failure_with_its_result(sim_host: SimulatedHost) -> None:
    record, calls = _probe(sim_host, DriverLayout(config=(*TWO_DEVICES, "fail=cuInit:999")))
    assert record == _failure(
        "unavailable", "CU_INIT_FAILED", driver_version=12040, cuda_result=999
    )
    assert calls == (VERSION_OK, CU_INIT_OK.replace("-> 0", "-> 999"))


@pytest.mark.parametrize(
    ("failing", "reason", "driver_version"),
    [
        ("cuDriverGetVersion", "CU_DRIVER_VERSION_FAILED", None),
        ("cuInit", "CU_INIT_FAILED", 12040),
        ("cuDeviceGetCount", "CU_DEVICE_COUNT_FAILED", 12040),
        ("cuDeviceGet", "CU_DEVICE_GET_FAILED", 12040),
        ("cuDeviceGetName", "CU_DEVICE_NAME_FAILED", 12040),
        ("cuDeviceComputeCapability", "CU_DEVICE_CAPABILITY_FAILED", 12040),
    ],
)
def test_probe_names_the_failing_driver_call(
    sim_host: SimulatedHost, failing: str, reason: str, driver_version: int | None
) -> None:
    record, calls = _probe(sim_host, DriverLayout(config=(*TWO_DEVICES, f"fail={failing}:999")))
    assert record == _failure("unavailable", reason, driver_version=driver_version, cuda_result=999)
    # The probe stops at the failing call.
    assert calls[-1].startswith(f"{failing} "), calls
    assert calls[-1].endswith(" -> 999"), calls
    assert [line.split(" ", 1)[0] for line in calls].count(failing) == 1


def test_probe_reports_a_missing_required_symbol(sim_host: SimulatedHost, tmp_path: Path) -> None:
    image = rename_export(
        sim_host.native.sim_driver, "cuDeviceGetName", tmp_path / "libcuda-no-name.so"
    )
    layout = DriverLayout(config=TWO_DEVICES, image=image)
    record, calls = _probe(sim_host, layout)
    assert record == _failure("unavailable", "REQUIRED_SYMBOL_MISSING")
    # Resolution fails before any driver function is called.
    assert calls == ()
    # stderr names the export the driver lacks (the report carries only the code).
    stderr = sim_host.run(layout, [sim_host.native.probe]).stderr
    assert "REQUIRED_SYMBOL_MISSING" in stderr, stderr
    assert "`cuDeviceGetName`" in stderr, stderr


@pytest.mark.parametrize(("major", "minor"), [(0, 0), (100, 0), (8, 100), (-1, 5)])
def test_probe_refuses_an_invalid_compute_capability(
    sim_host: SimulatedHost, major: int, minor: int
) -> None:
    layout = DriverLayout(config=(f"device=Odd GPU|{major}|{minor}",))
    record, _ = _probe(sim_host, layout)
    assert record == _failure(
        "unavailable", "INVALID_COMPUTE_CAPABILITY", driver_version=12040, cuda_result=0
    )


def test_probe_sanitizes_hostile_device_names(sim_host: SimulatedHost) -> None:
    hostile = (
        "device=\\x1b[31mEvil\\x07\\x09GPU\\x7f\\xc2\\x85!|8|6",
        f"device={'W' * 300}|9|0",
        "device=/etc/shadow|8|0",
        "device=  \\x01\\x02/dev/nvidia0|8|0",
        "device=C:\\\\Windows\\\\gpu|8|0",
        "device=\\xff\\xfeGPU|8|0",
        "device=\\x01\\x02\\x03|8|0",
    )
    record, _ = _probe(sim_host, DriverLayout(config=hostile))
    names = [device["name"] for device in record["devices"]]
    assert names == [
        "[31mEvilGPU!",
        "W" * 160,
        "unknown",
        "unknown",
        "unknown",
        "\ufffd\ufffdGPU",
        "unknown",
    ]


@pytest.mark.parametrize(
    "layout",
    [
        pytest.param(DriverLayout(config=TWO_DEVICES, image_mode=0o664), id="group-writable-image"),
        pytest.param(DriverLayout(config=TWO_DEVICES, image_mode=0o646), id="world-writable-image"),
        pytest.param(
            DriverLayout(config=TWO_DEVICES, modes={"/usr/local/nvidia": 0o775}),
            id="group-writable-ancestor",
        ),
        pytest.param(
            DriverLayout(config=TWO_DEVICES, modes={"/usr/local/nvidia/lib64": 0o757}),
            id="world-writable-parent",
        ),
        # A sticky, root-owned writable directory passes only
        # above root-owned entries (test_loader_attacks shows it passing).
        pytest.param(
            DriverLayout(
                config=TWO_DEVICES,
                modes={"/usr/local": 0o1777},
                extra_steps=("chown 1000 /usr/local/nvidia",),
            ),
            id="sticky-world-writable-usr-local-above-a-users-directory",
        ),
        pytest.param(
            DriverLayout(config=TWO_DEVICES, install="link-to-tmp"), id="link-escaping-to-tmp"
        ),
        pytest.param(
            DriverLayout(config=TWO_DEVICES, install="link-outside-roots"),
            id="link-outside-reviewed-roots",
        ),
        pytest.param(
            DriverLayout(config=TWO_DEVICES, install="link-sibling-prefix"),
            id="link-to-a-string-prefix-sibling-of-a-root",
        ),
        pytest.param(
            DriverLayout(
                config=TWO_DEVICES, install="link-inside", modes={"/usr/local/nvidia/lib64": 0o775}
            ),
            id="link-inside-writable-directory",
        ),
    ],
)
def test_loader_refuses_unsafe_images(sim_host: SimulatedHost, layout: DriverLayout) -> None:
    record, calls = _probe(sim_host, layout)
    # The record names the rule that refused the image (a rule, never a path).
    assert record.pop("refusing_rule") in LOADER_RULES
    assert record == _failure("unavailable", "LIBCUDA_SO_LOAD_FAILED", driver_loaded=False)
    # The refused image was never opened: none of its code ran.
    assert calls == ()


def test_loader_reports_not_found_without_any_candidate(sim_host: SimulatedHost) -> None:
    record, calls = _probe(sim_host, DriverLayout(install="absent"))
    assert record == _failure("unavailable", "LIBCUDA_SO_NOT_FOUND", driver_loaded=False)
    assert calls == ()


def test_loader_refuses_an_image_that_is_not_a_library(
    sim_host: SimulatedHost, tmp_path: Path
) -> None:
    garbage = tmp_path / "garbage.so"
    garbage.write_bytes(b"not an ELF image\n")
    record, _ = _probe(sim_host, DriverLayout(image=garbage))
    # The dynamic loader's own reason, without the path it named.
    assert record == _failure(
        "unavailable",
        "LIBCUDA_SO_LOAD_FAILED",
        driver_loaded=False,
        loader_reason="file too short",
    )


@pytest.mark.parametrize("count", ["-1", "1025", "2147483647"])
def test_probe_refuses_out_of_range_device_counts(sim_host: SimulatedHost, count: str) -> None:
    record, calls = _probe(sim_host, DriverLayout(config=(*TWO_DEVICES, f"device_count={count}")))
    assert record == _failure(
        "unavailable", "INVALID_DEVICE_COUNT", driver_version=12040, cuda_result=0
    )
    # No device is queried past an implausible count.
    assert "cuDeviceGet" not in _symbols(calls)


def test_probe_refuses_an_implausible_driver_version(sim_host: SimulatedHost) -> None:
    record, _ = _probe(sim_host, DriverLayout(config=("driver_version=999", *TWO_DEVICES[1:])))
    assert record == _failure("unavailable", "CU_DRIVER_VERSION_FAILED", cuda_result=0)


def test_sim_driver_exports_every_listed_symbol(sim_host: SimulatedHost) -> None:
    listed = json.loads(
        (Path(__file__).resolve().parents[2] / "templates" / "driver-symbols.json").read_text(
            encoding="utf-8"
        )
    )
    names = [symbol["export"] for symbol in listed["symbols"]]
    library = ctypes.CDLL(str(sim_host.native.sim_driver), mode=os.RTLD_LOCAL)
    assert [name for name in names if not hasattr(library, name)] == []


def test_probe_tells_a_person_why_each_candidate_was_refused(sim_host: SimulatedHost) -> None:
    layout = DriverLayout(config=TWO_DEVICES, modes={"/usr/local/nvidia": 0o775})
    run = sim_host.run(layout, [sim_host.native.probe])
    assert run.record()["reason_code"] == "LIBCUDA_SO_LOAD_FAILED"
    # Paths appear only on stderr, which the provider discards; never in the report.
    assert "/usr/local" not in run.stdout
    assert run.stderr.splitlines() == [
        "refused /usr/local/nvidia/lib64/libcuda.so.1: rule `writable-directory`: a directory "
        "on its way is writable by group or others and not both sticky and owned by root"
    ]
