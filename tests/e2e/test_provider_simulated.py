"""The installed provider resolves a ready plan through Rextio Core with the real probe.

The Python process itself runs inside the simulated-driver namespace, so the
provider spawns the real probe binary, which loads the simulated driver from
the reviewed path.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from sim_namespace import (
    DriverLayout,
    SimulatedHost,
    assert_no_device_preflight,
    preflight_argv,
)

from rextio_device_cuda._provider_spec import PROVIDER_SPEC

RESOLVE_SCRIPT = """
import json
import sys

from rextio.artifacts.models import DeviceRequirement
from rextio.artifacts.profiles import rust_crate_profile
from rextio.devices import (
    DevicePreflightRequest,
    DeviceProviderError,
    DeviceProviderOptions,
    DeviceProviderSelection,
    load_selected_device_provider,
    resolve_device_plan,
)

probe, device, sm = sys.argv[1:4]
selection = DeviceProviderSelection("rextio-device-cuda", "cuda-linux-x86_64")
provider, source = load_selected_device_provider(selection)
requirement = DeviceRequirement(
    logical_device=f"cuda:{device}",
    backend="cuda",
    runtime="cuda-driver",
    features=("driver-api",),
    memory_spaces=("device",),
    architectures=(sm,),
)
profile = rust_crate_profile("x86_64-unknown-linux-gnu", device_requirements=(requirement,))
options = DeviceProviderOptions(
    (("probe_executable", probe), ("device_ordinal", device), ("sm", sm))
)
try:
    plan = resolve_device_plan(
        artifact_profile=profile,
        selection=selection,
        providers={"rextio-device-cuda": provider},
        provider_sources={"rextio-device-cuda": source},
        options=options,
    )
except DeviceProviderError as error:
    result = provider.preflight(DevicePreflightRequest(profile, selection, options))
    print(json.dumps({"error": str(error), "reason_codes": list(result.reason_codes)}))
    raise SystemExit(1)
try:
    public_plan = plan.to_dict()
except ValueError as error:  # Core bounds lowering authorizations to gpu:0
    public_plan = {"unavailable": str(error)}
print(json.dumps({
    "preflight": plan.preflight.to_dict(),
    "contribution": plan.contribution.to_dict(),
    "public_plan": public_plan,
}, sort_keys=True))
"""

TWO_DEVICES = (
    "driver_version=12040",
    "device=NVIDIA Simulated A100|8|0",
    "device=NVIDIA Simulated L4|8|9",
)


def _resolve(
    sim_host: SimulatedHost, tmp_path: Path, layout: DriverLayout, device: str, sm: str
) -> tuple[int, dict[str, object]]:
    script = tmp_path / "resolve_plan.py"
    script.write_text(RESOLVE_SCRIPT, encoding="utf-8")
    run = sim_host.run(
        layout, [sys.executable, script, str(sim_host.native.probe.resolve()), device, sm]
    )
    assert run.stdout, run.stderr
    plan: dict[str, object] = json.loads(run.stdout)
    return run.returncode, plan


@pytest.mark.parametrize(("device", "sm"), [("0", "sm_80"), ("1", "sm_89")])
def test_installed_provider_resolves_a_ready_plan_with_the_real_probe(
    sim_host: SimulatedHost, tmp_path: Path, device: str, sm: str
) -> None:
    status, plan = _resolve(sim_host, tmp_path, DriverLayout(config=TWO_DEVICES), device, sm)
    assert status == 0, plan
    preflight = plan["preflight"]
    assert isinstance(preflight, dict)
    assert preflight["status"] == "ready"
    assert preflight["support_claim"] is False
    observations = {item["key"]: item["value"] for item in preflight["observations"]}
    assert observations == {
        "device.count": "2",
        "driver.version": "12040",
        "policy.minimum-driver-version": "12000",
        "policy.minimum-toolkit-version": "12.0",
        "probe.schema": "1",
        "selected.device": device,
        "selected.sm": sm,
        "target.arch": "x86_64",
        "target.os": "linux",
        "toolkit.runtime": "not-configured",
        "toolkit.version": "not-configured",
    }
    # The public plan is redacted: the probe path is never in it.
    assert str(sim_host.native.probe.resolve()) not in json.dumps(plan)
    if device == "0":
        public_plan = plan["public_plan"]
        assert isinstance(public_plan, dict)
        assert public_plan["options"]["option_keys"] == ["device_ordinal", "probe_executable", "sm"]
    contribution = plan["contribution"]
    assert isinstance(contribution, dict)
    assert contribution["runtime_check_ids"] == ["rextio_cuda_driver_inventory_v1"]


def test_provider_refuses_when_the_simulated_device_has_another_sm(
    sim_host: SimulatedHost, tmp_path: Path
) -> None:
    status, outcome = _resolve(sim_host, tmp_path, DriverLayout(config=TWO_DEVICES), "0", "sm_90")
    assert (status, outcome["reason_codes"]) == (1, ["CUDA_SM_MISMATCH"])


def test_provider_passes_the_probe_reason_through(sim_host: SimulatedHost, tmp_path: Path) -> None:
    status, outcome = _resolve(sim_host, tmp_path, DriverLayout(install="absent"), "0", "sm_80")
    assert (status, outcome["reason_codes"]) == (1, ["LIBCUDA_SO_NOT_FOUND"])


def test_preflight_names_no_devices_as_with_the_real_driver(sim_host: SimulatedHost) -> None:
    layout = DriverLayout(config=("driver_version=12040",))
    run = sim_host.run(layout, preflight_argv(sys.executable, sim_host.native.probe))
    assert_no_device_preflight(run)
    assert [line.split(" ", 1)[0] for line in run.calls] == ["cuDriverGetVersion", "cuInit"]


@pytest.mark.parametrize(
    ("driver_version", "sm", "expected"),
    [
        # An sm_120 device on a 12.8 driver is ready; on 12.4 it is refused.
        (12080, "sm_120", None),
        (12040, "sm_120", "CUDA_ARCHITECTURE_DRIVER_TOO_OLD"),
        (12080, "sm_121", "CUDA_ARCHITECTURE_DRIVER_TOO_OLD"),
        (12090, "sm_121", None),
    ],
)
def test_today_s_gpus_against_the_driver_s_release(
    sim_host: SimulatedHost, tmp_path: Path, driver_version: int, sm: str, expected: str | None
) -> None:
    major, minor = int(sm[3:-1]), int(sm[-1])
    layout = DriverLayout(
        config=(f"driver_version={driver_version}", f"device=NVIDIA Simulated {sm}|{major}|{minor}")
    )
    status, outcome = _resolve(sim_host, tmp_path, layout, "0", sm)
    if expected is None:
        assert status == 0, outcome
        preflight = outcome["preflight"]
        assert isinstance(preflight, dict)
        observations = {item["key"]: item["value"] for item in preflight["observations"]}
        assert (observations["selected.sm"], observations["driver.version"]) == (
            sm,
            str(driver_version),
        )
    else:
        assert (status, outcome["reason_codes"]) == (1, [expected])


@pytest.mark.parametrize(
    ("failure", "name", "words"),
    [
        ("cuInit:304", "CUDA_ERROR_OPERATING_SYSTEM", "seccomp"),
        ("cuInit:803", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "kernel module"),
        ("cuInit:999", "CUDA_ERROR_UNKNOWN", "nvidia-uvm"),
    ],
)
def test_preflight_names_the_driver_s_result_and_its_remedy(
    sim_host: SimulatedHost, failure: str, name: str, words: str
) -> None:
    layout = DriverLayout(
        config=("driver_version=12080", "device=NVIDIA Simulated A100|8|0", f"fail={failure}")
    )
    run = sim_host.run(layout, preflight_argv(sys.executable, sim_host.native.probe))
    refusal = json.loads(run.stdout)
    value = int(failure.split(":")[1])
    assert (refusal["reason_code"], refusal["cuda_result"]) == ("CU_INIT_FAILED", value)
    assert refusal["cuda_result_name"] == name
    assert f"The driver returned {value} ({name})." in refusal["explanation"]
    assert words in refusal["remedy"]
    assert refusal["observed"] == "the probe loaded driver 12.8 (12080)"
    assert str(sim_host.native.probe.resolve()) not in run.stdout + run.stderr


def test_a_refused_driver_image_is_named_by_the_rule_the_probe_recorded(
    sim_host: SimulatedHost,
) -> None:
    # The reviewed path holds the driver, but group- and other-writable.
    layout = DriverLayout(config=("driver_version=12080",), image_mode=0o666)
    run = sim_host.run(layout, preflight_argv(sys.executable, sim_host.native.probe))
    refusal = json.loads(run.stdout)
    assert refusal["reason_code"] == "LIBCUDA_SO_LOAD_FAILED"
    assert refusal["observed"] == (
        "the loader's rule `mode` refused the libcuda.so.1 the probe found"
    )
    assert run.calls == ()
    assert "/usr/" not in refusal["observed"]


def test_no_driver_names_the_directories_of_the_probes_own_architecture(
    sim_host: SimulatedHost,
) -> None:
    # (A --driver-root that does not exist is the command's argument error.)
    run = sim_host.run(
        DriverLayout(install="absent"), preflight_argv(sys.executable, sim_host.native.probe)
    )
    refusal = json.loads(run.stdout)
    assert refusal["reason_code"] == "LIBCUDA_SO_NOT_FOUND"
    assert refusal["observed"] == "the probe searched its x86_64 directories"
    searched = {entry.arch: entry.dirs for entry in PROVIDER_SPEC.loader.linux_candidate_dirs}
    assert refusal["explanation"] == (
        f"No libcuda.so.1 exists where the probe looked: {', '.join(searched['x86_64'])}."
    )
