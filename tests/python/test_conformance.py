"""Preflight's check order and build contributions, against values written out, not the spec's.

The check order is tested by stacking faults: with the faults of steps k..n
all present, the code of step k must win.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cuda_support import (
    CAPABILITIES,
    ProbeFactory,
    framework_requirement,
    profile_for,
    raw_requirement,
    ready_options,
    report,
    request_for,
    unavailable_report,
)
from rextio.devices import DevicePreflightResult, DevicePreflightStatus

from rextio_device_cuda import CudaDeviceProvider, CudaProviderConfig
from rextio_device_cuda.probe import CudaProbeReport, CudaToolkitReport, parse_probe_report

RAW = "cuda-linux-x86_64"
TORCH = "cuda-libtorch-linux-x86_64"
TFE = "cuda-tensorflow-tfe-linux-x86_64"
LANE = {TORCH: "libtorch", TFE: "tensorflow-tfe"}


@dataclass
class Setup:
    """Everything one preflight is built from; each fault changes one part."""

    capability: str = RAW
    provider_id: str = "rextio-device-cuda"
    profile: dict[str, Any] = field(default_factory=dict)
    requirement: dict[str, Any] = field(default_factory=dict)
    options: dict[str, str | None] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)
    unavailable: str | None = None
    exit_code: int = 0

    def preflight(self, probes: ProbeFactory) -> DevicePreflightResult:
        value = (
            unavailable_report(
                self.unavailable,
                **{key: value for key, value in self.report.items() if key == "target"},
            )
            if self.unavailable is not None
            else report(**self.report)
        )
        probe = probes.shell(f"echo '{json.dumps(value)}'\nexit {self.exit_code}\n")
        options = {**ready_options(probe), **self.options}
        lane = LANE.get(self.capability)
        requirement = (
            raw_requirement(**self.requirement)
            if lane is None
            else framework_requirement(lane, **self.requirement)
        )
        profile_capability = self.capability if self.capability in CAPABILITIES else RAW
        request = request_for(
            self.capability,
            {key: value for key, value in options.items() if value is not None},
            provider_id=self.provider_id,
            profile=profile_for(profile_capability, requirements=(requirement,), **self.profile),
        )
        provider = CudaDeviceProvider(CudaProviderConfig(**self.config))
        return provider.preflight(request)


Fault = Callable[[Setup, Path], None]


def _set(part: str, **values: Any) -> Fault:
    def apply(setup: Setup, tmp: Path) -> None:
        getattr(setup, part).update(values)

    return apply


def _attribute(name: str, value: Any) -> Fault:
    def apply(setup: Setup, tmp: Path) -> None:
        setattr(setup, name, value)

    return apply


def _old_toolkit(setup: Setup, tmp: Path) -> None:
    root = tmp / "old-cuda"
    (root / "include").mkdir(parents=True)
    (root / "include" / "cuda.h").write_text("")
    (root / "lib64").mkdir()
    (root / "lib64" / "libcudart.so").write_bytes(b"")
    (root / "version.json").write_text(json.dumps({"cuda": {"version": "11.8"}}))
    setup.options["toolkit_root"] = str(root)


RAW_CHAIN: list[tuple[str, Fault]] = [
    ("PROVIDER_ID_MISMATCH", _attribute("provider_id", "another-provider")),
    ("CAPABILITY_UNKNOWN", _attribute("capability", "cuda-linux-riscv64")),
    ("TARGET_MISMATCH", _set("profile", triple="aarch64-unknown-linux-gnu")),
    ("PROVIDER_OPTION_UNKNOWN", _set("options", colour="red")),
    ("CUDA_LAYOUT_UNSUPPORTED", _set("requirement", layouts=("strided",))),
    ("CUDA_ARCHITECTURE_UNSUPPORTED", _set("requirement", sm="sm_95")),
    ("DEVICE_CONFIGURATION_CONFLICT", _set("config", device_ordinal=1)),
    ("DEVICE_ORDINAL_INVALID", _set("options", device_ordinal="x")),
    ("INVALID_SM", _set("options", sm="sm80")),
    ("DEVICE_REQUIREMENT_MISMATCH", _set("requirement", ordinal=1)),
    ("PROBE_NOT_CONFIGURED", _set("options", probe_executable=None)),
    ("PROBE_EXIT_NONZERO", _attribute("exit_code", 3)),
    ("PROBE_TARGET_MISMATCH", _set("report", target=("windows", "x86_64", "msvc"))),
    ("NO_CUDA_DEVICES", _attribute("unavailable", "NO_CUDA_DEVICES")),
    ("DRIVER_VERSION_TOO_OLD", _set("report", driver_version=11080)),
    ("CUDA_SM_MISMATCH", _set("report", sms=("sm_86",))),
    ("TOOLKIT_VERSION_TOO_OLD", _old_toolkit),
]

FRAMEWORK_CHAIN: list[tuple[str, Fault]] = [
    ("TARGET_MISMATCH", _set("profile", triple="aarch64-unknown-linux-gnu")),
    ("ARTIFACT_KIND_UNSUPPORTED", _set("profile", kind="rust-crate")),
    ("PROVIDER_OPTION_UNKNOWN", _set("options", toolkit_root="/opt/cuda")),
    ("TOOLKIT_ROOT_UNSUPPORTED", _set("config", toolkit_root=Path("/opt/cuda"))),
    ("RUNTIME_REUSE_REQUIRED", _set("requirement", reuse_domain_runtime=False)),
    ("AT_MOST_ONE_SM_ALLOWED", _set("requirement", architectures=("sm_80", "sm_86"))),
    ("FEATURES_INCOMPATIBLE", _set("requirement", features=("inference",))),
    ("LAYOUT_INCOMPATIBLE", _set("requirement", layouts=("unknown",))),
    ("PROBE_CONFIGURATION_CONFLICT", _set("config", probe_path=Path("/elsewhere/probe"))),
    ("SM_NOT_CONFIGURED", _set("options", sm=None)),
    ("PROBE_TARGET_MISMATCH", _set("report", target=("windows", "x86_64", "msvc"))),
    ("DRIVER_VERSION_TOO_OLD", _set("report", driver_version=11080)),
    ("CUDA_SM_MISMATCH", _set("report", sms=("sm_86",))),
]


@pytest.mark.parametrize(
    "start", range(len(RAW_CHAIN)), ids=[f"{i:02d}-{code}" for i, (code, _) in enumerate(RAW_CHAIN)]
)
def test_raw_check_order(start: int, probes: ProbeFactory, tmp_path: Path) -> None:
    setup = Setup()
    for _, fault in RAW_CHAIN[start:]:
        fault(setup, tmp_path)
    result = setup.preflight(probes)
    assert result.reason_codes == (RAW_CHAIN[start][0],)
    assert result.observations == ()
    incompatible = start < 3
    assert result.status is (
        DevicePreflightStatus.INCOMPATIBLE if incompatible else DevicePreflightStatus.UNAVAILABLE
    )


@pytest.mark.parametrize("capability", [TORCH, TFE])
@pytest.mark.parametrize(
    "start",
    range(len(FRAMEWORK_CHAIN)),
    ids=[f"{i:02d}-{code}" for i, (code, _) in enumerate(FRAMEWORK_CHAIN)],
)
def test_framework_check_order(
    start: int, capability: str, probes: ProbeFactory, tmp_path: Path
) -> None:
    setup = Setup(capability=capability, requirement={"sm": "sm_80"})
    for _, fault in FRAMEWORK_CHAIN[start:]:
        fault(setup, tmp_path)
    code = FRAMEWORK_CHAIN[start][0]
    prefix = "LIBTORCH_" if capability == TORCH else "TENSORFLOW_TFE_"
    prefixed = {
        "ARTIFACT_KIND_UNSUPPORTED",
        "TOOLKIT_ROOT_UNSUPPORTED",
        "RUNTIME_REUSE_REQUIRED",
        "FEATURES_INCOMPATIBLE",
        "LAYOUT_INCOMPATIBLE",
    }
    expected = prefix + code if code in prefixed else code
    result = setup.preflight(probes)
    assert result.reason_codes == (expected,)
    incompatible = start < 2
    assert result.status is (
        DevicePreflightStatus.INCOMPATIBLE if incompatible else DevicePreflightStatus.UNAVAILABLE
    )


def test_tfe_requires_cpython_before_the_device_requirement(probes: ProbeFactory) -> None:
    setup = Setup(
        capability=TFE,
        profile={"python_fallback_backend": "nuitka"},
        requirement={"logical_device": "cuda:3"},
    )
    assert setup.preflight(probes).reason_codes == ("TENSORFLOW_TFE_CPYTHON_REQUIRED",)


# -- step 7, raw lanes: which requirements count ---------------------------------------


def _raw_result(
    probes: ProbeFactory, *requirements: Any, options: dict[str, str] | None = None
) -> DevicePreflightResult:
    probe = probes.printing(report())
    request = request_for(
        RAW,
        {**ready_options(probe), **(options or {})},
        profile=profile_for(RAW, requirements=requirements),
    )
    return CudaDeviceProvider().preflight(request)


def test_raw_lane_skips_requirements_core_cannot_normalize(probes: ProbeFactory) -> None:
    result = _raw_result(
        probes,
        raw_requirement(logical_device="quantum:0", sm=None),
        raw_requirement(logical_device="cpu:0", backend=None, sm=None),
        raw_requirement(),
    )
    assert result.status is DevicePreflightStatus.READY, result.reason_codes


def test_raw_lane_checks_each_cuda_requirement_sm_before_counting(probes: ProbeFactory) -> None:
    assert _raw_result(probes, raw_requirement(), raw_requirement(1, sm=None)).reason_codes == (
        "EXPLICIT_SM_REQUIRED",
    )
    assert _raw_result(probes, raw_requirement(), raw_requirement(1, sm="sm8")).reason_codes == (
        "INVALID_SM",
    )


# -- steps 9-10: conflicts as strings, ordinals as ASCII digits --------------------------


@pytest.mark.parametrize(
    ("ordinal", "code"),
    [("00", None), ("0000", None), ("1023", "CUDA_DEVICE_NOT_FOUND"),
     ("1024", "DEVICE_ORDINAL_INVALID"), ("01024", "DEVICE_ORDINAL_INVALID"),
     ("+0", "DEVICE_ORDINAL_INVALID"), (" 0", "DEVICE_ORDINAL_INVALID"),
     ("0x0", "DEVICE_ORDINAL_INVALID"), ("\uff10", "DEVICE_ORDINAL_INVALID")],
)  # fmt: skip
def test_device_ordinal_text(ordinal: str, code: str | None, probes: ProbeFactory) -> None:
    index = int(ordinal) if ordinal.isascii() and ordinal.isdigit() else 0
    requirement = raw_requirement(index if index <= 1023 else 0)
    result = _raw_result(probes, requirement, options={"device_ordinal": ordinal})
    if code is None:
        assert result.status is DevicePreflightStatus.READY, result.reason_codes
        assert dict(result.observations)["selected.device"] == "0"
    else:
        assert result.reason_codes == (code,)


def test_conflicts_compare_strings(probes: ProbeFactory) -> None:
    probe = probes.printing(report())
    same = CudaDeviceProvider(CudaProviderConfig(probe_path=probe, device_ordinal=0, sm="sm_80"))
    assert same.preflight(request_for(RAW, ready_options(probe))).status is (
        DevicePreflightStatus.READY
    )
    request = request_for(RAW, ready_options(probe, device_ordinal="00"))
    assert same.preflight(request).reason_codes == ("DEVICE_CONFIGURATION_CONFLICT",)
    request = request_for(RAW, ready_options(probe, probe_executable=f"{probe.parent}//probe"))
    assert same.preflight(request).reason_codes == ("PROBE_CONFIGURATION_CONFLICT",)


# -- steps 13 and 19: injected runner and inspector ---------------------------------------


class _Runner:
    def __init__(self, value: dict[str, Any]) -> None:
        self.value = value

    def run(self) -> CudaProbeReport:
        return parse_probe_report(json.dumps(self.value).encode())


class _Inspector:
    def __init__(self, version: str, components: tuple[str, ...]) -> None:
        self.version = version
        self.components = components

    def inspect(self, target_triple: str) -> CudaToolkitReport:
        return CudaToolkitReport(self.version, self.version, self.components)


FULL = ("cuda-header", "cuda-runtime")


def _injected(
    driver_version: int = 12080, inspector: _Inspector | None = None, capability: str = RAW
) -> DevicePreflightResult:
    provider = CudaDeviceProvider(
        probe_runner=_Runner(report(driver_version=driver_version)), toolkit_inspector=inspector
    )
    options = {"device_ordinal": "0", "sm": "sm_80"}
    return provider.preflight(request_for(capability, options))


def test_an_injected_runner_needs_no_probe_path() -> None:
    assert _injected().status is DevicePreflightStatus.READY


@pytest.mark.parametrize(
    ("driver", "toolkit", "code"),
    [
        (12080, "12.8", None),
        (12089, "12.8.1", None),
        (12079, "12.8", "DRIVER_TOOLKIT_INCOMPATIBLE"),
        (12990, "12.99", None),
        (13000, "12.99", None),
        (12980, "12.99", "DRIVER_TOOLKIT_INCOMPATIBLE"),
        (12100, "12.10", None),
        (12090, "12.10", "DRIVER_TOOLKIT_INCOMPATIBLE"),
    ],
)
def test_driver_toolkit_compatibility(driver: int, toolkit: str, code: str | None) -> None:
    result = _injected(driver, _Inspector(toolkit, FULL))
    if code is None:
        assert result.status is DevicePreflightStatus.READY, result.reason_codes
        assert dict(result.observations)["toolkit.version"] == toolkit
    else:
        assert result.reason_codes == (code,)


def test_toolkit_report_checks_follow_section_5_order() -> None:
    # Runtime mismatch, then the 12.0 floor, then the components.
    assert _injected(inspector=_Inspector("11.8", ("cuda-header",))).reason_codes == (
        "TOOLKIT_VERSION_TOO_OLD",
    )
    assert _injected(inspector=_Inspector("12.4", ("cuda-header",))).reason_codes == (
        "TOOLKIT_COMPONENT_INVALID",
    )


def test_an_injected_inspector_is_ignored_by_framework_lanes() -> None:
    result = _injected(inspector=_Inspector("11.0", FULL), capability=TORCH)
    assert result.status is DevicePreflightStatus.READY


# -- ready observations and contributions, exactly -----------------------------------------

COMMON = {
    "device.count": "1",
    "driver.version": "12080",
    "policy.minimum-driver-version": "12000",
    "probe.schema": "1",
    "selected.device": "0",
    "selected.sm": "sm_80",
    "target.arch": "x86_64",
    "target.os": "linux",
}
OBSERVATIONS = {
    RAW: {
        **COMMON,
        "policy.minimum-toolkit-version": "12.0",
        "toolkit.runtime": "not-configured",
        "toolkit.version": "not-configured",
    },
    TORCH: {
        **COMMON,
        "framework.runtime": "libtorch",
        "framework.runtime-pin": "2.11.0",
        "framework.binding-pin": "0.24.0",
        "framework.reuse": "required-unverified",
    },
    TFE: {
        **COMMON,
        "framework.runtime": "tensorflow-tfe",
        "framework.runtime-pin": "2.21.0",
        "framework.binding-pin": "cpython-3.11-private-eager-abi",
        "framework.reuse": "required-unverified",
    },
}


def _contract(kind: str, owner: str, **may: bool) -> dict[str, Any]:
    return {
        "resource_kind": kind,
        "owner": owner,
        "access": "owned" if owner == "provider" else "borrow-validate",
        "may_allocate": may.get("allocate", False),
        "may_replace": False,
        "may_synchronize": may.get("synchronize", False),
    }


BORROWED = {
    kind: _contract(kind, "framework")
    for kind in (
        "framework.tensor",
        "framework.allocator",
        "framework.current-stream",
        "framework.event",
        "framework.eager-context",
    )
}
CONTRIBUTIONS: dict[str, dict[str, Any]] = {
    RAW: {
        "package_references": [
            "generated/device-providers/rextio-device-cuda/rextio-cuda-runtime/Cargo.toml"
        ],
        "generated_helper_ids": ["rextio_cuda_runtime_v1"],
        "runtime_check_ids": ["rextio_cuda_driver_inventory_v1"],
        "resources": [
            _contract("raw.cuda.context", "provider", allocate=True),
            _contract("raw.cuda.dedicated-stream", "provider", allocate=True, synchronize=True),
            _contract("raw.cuda.device-memory", "provider", allocate=True),
            BORROWED["framework.tensor"],
            BORROWED["framework.allocator"],
            BORROWED["framework.current-stream"],
            BORROWED["framework.event"],
        ],
    },
    TORCH: {
        "package_references": [],
        "generated_helper_ids": [],
        "runtime_check_ids": [],
        "resources": [
            BORROWED["framework.tensor"],
            BORROWED["framework.allocator"],
            BORROWED["framework.current-stream"],
        ],
    },
    TFE: {
        "package_references": [],
        "generated_helper_ids": [],
        "runtime_check_ids": [],
        "resources": [BORROWED["framework.tensor"], BORROWED["framework.eager-context"]],
    },
}


@pytest.mark.parametrize("capability", [RAW, TORCH, TFE])
def test_ready_observations_and_contribution_are_exactly_the_contracts(
    capability: str, probes: ProbeFactory
) -> None:
    request = request_for(capability, ready_options(probes.printing(report())))
    provider = CudaDeviceProvider()
    result = provider.preflight(request)
    assert result.status is DevicePreflightStatus.READY, result.reason_codes
    assert dict(result.observations) == OBSERVATIONS[capability]
    assert result.support_claim is False
    contribution: dict[str, Any] = provider.build_contribution(request).to_dict()
    expected = CONTRIBUTIONS[capability]
    assert contribution["cargo_features"] == []
    assert contribution["native_libraries"] == []
    for key in ("package_references", "generated_helper_ids", "runtime_check_ids"):
        assert contribution[key] == expected[key]
    resources: list[dict[str, Any]] = contribution["resource_contracts"]
    assert sorted(resources, key=json.dumps) == sorted(expected["resources"], key=json.dumps)
    assert resources == sorted(resources, key=lambda item: item["resource_kind"])
