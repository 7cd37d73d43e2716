"""Preflight through the real Core: every lane ready, every reason code reached."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

import pytest
from cuda_support import (
    CAPABILITIES,
    LANES,
    SPEC,
    ProbeFactory,
    framework_requirement,
    lane_pins,
    profile_for,
    raw_requirement,
    ready_options,
    report,
    request_for,
    unavailable_report,
)
from rextio.artifacts.models import RuntimeRequirement
from rextio.devices import (
    DevicePreflightRequest,
    DevicePreflightStatus,
    DeviceProviderError,
    DeviceProviderOptions,
    DeviceProviderSelection,
    load_selected_device_provider,
    resolve_device_plan,
)

from rextio_device_cuda import CudaDeviceProvider, CudaProviderConfig, _preflight_checks
from rextio_device_cuda.probe import (
    CudaProbeReport,
    CudaToolkitReport,
    SubprocessProbeRunner,
    parse_probe_report,
)

RAW = "cuda-linux-x86_64"
AARCH64 = "cuda-linux-aarch64"
WINDOWS = "cuda-windows-x86_64"
TORCH = "cuda-libtorch-linux-x86_64"
TFE = "cuda-tensorflow-tfe-linux-x86_64"
TARGETS = {
    triple: (value["os"], value["arch"], value["environment"])
    for triple, value in SPEC["probe_targets"].items()
}


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list | tuple):
        return [text for item in value for text in _strings(item)]
    return []


def _absolute(text: str) -> bool:
    return PurePosixPath(text).is_absolute() or PureWindowsPath(text).is_absolute()


@pytest.mark.parametrize("capability_id", sorted(CAPABILITIES))
def test_every_capability_resolves_ready_through_core(
    capability_id: str, probes: ProbeFactory
) -> None:
    triple = CAPABILITIES[capability_id]["target_triple"]
    probe = probes.printing(report(target=TARGETS[triple]))
    selection = DeviceProviderSelection("rextio-device-cuda", capability_id)
    provider, source = load_selected_device_provider(selection)
    options = DeviceProviderOptions(tuple(sorted(ready_options(probe).items())))
    plan = resolve_device_plan(
        artifact_profile=profile_for(capability_id),
        selection=selection,
        providers={"rextio-device-cuda": provider},
        provider_sources={"rextio-device-cuda": source},
        options=options,
    )
    assert plan is not None
    assert plan.preflight.status is DevicePreflightStatus.READY
    assert plan.preflight.support_claim is False
    observed = dict(plan.preflight.observations)
    assert observed["selected.sm"] == "sm_80"
    assert observed["selected.device"] == "0"
    assert observed["probe.schema"] == "1"
    assert observed["policy.minimum-driver-version"] == "12000"
    lane = LANES[CAPABILITIES[capability_id]["lane"]]
    for key, value in lane["observations"].items():
        assert observed[key] == value
    if lane["toolkit_inspection"]:
        assert observed["toolkit.version"] == "not-configured"
        assert observed["policy.minimum-toolkit-version"] == "12.0"
    else:
        assert "toolkit.version" not in observed
    lock = plan.lock_record().to_dict()
    assert lock["option_keys"] == ["device_ordinal", "probe_executable", "sm"]
    assert plan.report_record().to_dict()["support_claim"] is False
    public = plan.to_dict()
    assert not [text for text in _strings(public) if _absolute(text)]
    assert str(probe) not in json.dumps(public)
    assert probes.marker().read_text() == "ran\n"


def test_raw_lane_reports_an_inspected_toolkit(
    probes: ProbeFactory, make_toolkit: Callable[..., Path]
) -> None:
    toolkit = make_toolkit("12.4.1")
    probe = probes.printing(report())
    provider = CudaDeviceProvider()
    request = request_for(RAW, ready_options(probe, toolkit_root=str(toolkit)))
    result = provider.preflight(request)
    assert result.status is DevicePreflightStatus.READY, result.reason_codes
    observed = dict(result.observations)
    assert observed["toolkit.version"] == "12.4.1"
    assert observed["toolkit.runtime"] == "12.4.1"
    contribution = provider.build_contribution(request)
    assert contribution.package_references == (
        "generated/device-providers/rextio-device-cuda/rextio-cuda-runtime/Cargo.toml",
    )
    assert contribution.native_libraries == ()


def test_contributions_follow_the_lane(probes: ProbeFactory) -> None:
    probe = probes.printing(report())
    provider = CudaDeviceProvider()
    kinds: dict[str, list[str]] = {}
    for capability_id in (RAW, TORCH, TFE):
        request = request_for(capability_id, ready_options(probe))
        assert provider.preflight(request).status is DevicePreflightStatus.READY
        contribution = provider.build_contribution(request)
        kinds[capability_id] = [item.resource_kind for item in contribution.resource_contracts]
        if capability_id != RAW:
            assert contribution.package_references == ()
            assert contribution.generated_helper_ids == ()
            assert contribution.runtime_check_ids == ()
            assert all(item.owner.value == "framework" for item in contribution.resource_contracts)
    assert kinds[TORCH] == ["framework.allocator", "framework.current-stream", "framework.tensor"]
    assert kinds[TFE] == ["framework.eager-context", "framework.tensor"]
    assert "raw.cuda.context" in kinds[RAW]


def test_build_contribution_requires_successful_preflight(probes: ProbeFactory) -> None:
    provider = CudaDeviceProvider()
    good = probes.printing(report(), name="good")
    request = request_for(RAW, ready_options(good))
    with pytest.raises(DeviceProviderError, match="requires successful preflight"):
        provider.build_contribution(request)
    assert provider.preflight(request).status is DevicePreflightStatus.READY
    provider.build_contribution(request)
    # The same request now fails (the probe reports another SM): success revoked.
    good.write_text(probes.printing(report(sms=("sm_86",)), name="other").read_text())
    assert provider.preflight(request).reason_codes == ("CUDA_SM_MISMATCH",)
    with pytest.raises(DeviceProviderError, match="requires successful preflight"):
        provider.build_contribution(request)


# -- the reason-code table ------------------------------------------------------------


@dataclass
class Context:
    """What a table row may use to build its provider and request."""

    probes: ProbeFactory
    tmp: Path
    make_toolkit: Callable[..., Path]

    def probe(self, value: object = None) -> Path:
        return self.probes.printing(report() if value is None else value)

    def script(self, body: str) -> Path:
        marker = self.probes.marker()
        return self.probes.shell(f"echo ran >> '{marker}'\n{body}")


Build = Callable[[Context], tuple[CudaDeviceProvider, DevicePreflightRequest]]


@dataclass
class Case:
    code: str
    build: Build
    ran: bool
    incompatible: bool = False


def _plain(
    capability: str = RAW,
    options: Callable[[Context], dict[str, str]] | None = None,
    *,
    config: Callable[[Context], CudaProviderConfig] | None = None,
    provider_id: str = "rextio-device-cuda",
    runner: Callable[[Context], Any] | None = None,
    inspector: Callable[[Context], Any] | None = None,
    **profile: Any,
) -> Build:
    def build(ctx: Context) -> tuple[CudaDeviceProvider, DevicePreflightRequest]:
        chosen = options(ctx) if options is not None else ready_options(ctx.probe())
        profile_capability = capability if capability in CAPABILITIES else RAW
        request = request_for(
            capability,
            chosen,
            provider_id=provider_id,
            profile=profile_for(profile_capability, **profile),
        )
        provider = CudaDeviceProvider(
            config(ctx) if config is not None else None,
            probe_runner=runner(ctx) if runner is not None else None,
            toolkit_inspector=inspector(ctx) if inspector is not None else None,
        )
        return provider, request

    return build


def _with(**extra: str) -> Callable[[Context], dict[str, str]]:
    return lambda ctx: ready_options(ctx.probe(), **extra)


def _without(key: str) -> Callable[[Context], dict[str, str]]:
    def options(ctx: Context) -> dict[str, str]:
        chosen = ready_options(ctx.probe())
        del chosen[key]
        return chosen

    return options


def _probe_options(make: Callable[[Context], Path]) -> Callable[[Context], dict[str, str]]:
    return lambda ctx: ready_options(make(ctx))


def _forged_options(ctx: Context) -> tuple[CudaDeviceProvider, DevicePreflightRequest]:
    request = request_for(RAW, ready_options(ctx.probe()))
    options = DeviceProviderOptions((("sm", "sm_80"),))
    object.__setattr__(options, "values", ((7, "sm_80"),))
    return CudaDeviceProvider(), dataclasses.replace(request, options=options)


class _ForgedRunner:
    """A programmatic runner whose record was altered after validation."""

    def __init__(self, ctx: Context, **changes: Any) -> None:
        self.ctx = ctx
        self.changes = changes

    def run(self) -> CudaProbeReport:
        self.ctx.probes.marker().write_text("ran\n")
        parsed = parse_probe_report(json.dumps(report()).encode())
        for name, value in self.changes.items():
            object.__setattr__(parsed, name, value)
        return parsed


class _FixedInspector:
    def __init__(
        self,
        toolkit: str,
        runtime: str,
        components: tuple[str, ...] = ("cuda-header", "cuda-runtime"),
    ) -> None:
        self.fields = (toolkit, runtime, components)

    def inspect(self, target_triple: str) -> CudaToolkitReport:
        # The report validates on construction, inside inspect().
        return CudaToolkitReport(*self.fields)


def _toolkit(**kwargs: Any) -> Callable[[Context], dict[str, str]]:
    return lambda ctx: ready_options(ctx.probe(), toolkit_root=str(ctx.make_toolkit(**kwargs)))


def _architecture(
    sm: str, driver_version: int, toolkit: str | None = None, device_sm: str | None = None
) -> Build:
    """Selects ``sm`` on a driver of ``driver_version``, optionally with a toolkit."""

    def options(ctx: Context) -> dict[str, str]:
        probe = ctx.probe(report(sms=(device_sm or sm,), driver_version=driver_version))
        extra = {} if toolkit is None else {"toolkit_root": str(ctx.make_toolkit(toolkit))}
        return ready_options(probe, sm=sm, **extra)

    return _plain(options=options, requirements=(raw_requirement(sm=sm),))


def _escaping_toolkit(ctx: Context) -> dict[str, str]:
    root = ctx.make_toolkit(components=False)
    (root / "include" / "cuda.h").write_text("/* header */\n")
    outside = ctx.tmp / "outside-libcudart.so"
    outside.write_bytes(b"\x7fELF")
    (root / "lib64").mkdir()
    (root / "lib64" / "libcudart.so").symlink_to(outside)
    return ready_options(ctx.probe(), toolkit_root=str(root))


def _no_version_toolkit(ctx: Context) -> dict[str, str]:
    root = ctx.make_toolkit()
    (root / "version.json").unlink()
    return ready_options(ctx.probe(), toolkit_root=str(root))


def _binary(ctx: Context) -> Path:
    """A compiled probe: a pin refuses scripts."""
    return ctx.probes.binary(report())


def _huge(ctx: Context) -> Path:
    """A sparse file one byte above the pinned-probe bound."""
    path = ctx.probes.write_bytes("huge", b"\x7fELF")
    os.truncate(path, SPEC["probe_runner"]["max_pinned_probe_bytes"] + 1)
    return path


def _malformed_elf(ctx: Context) -> Path:
    """ELF magic and nothing the loader could read: what it would load is unknown."""
    return ctx.probes.write_bytes("malformed", b"\x7fELF")


def _pinned_to_itself(make: Callable[[Context], Path]) -> Callable[[Context], dict[str, str]]:
    def options(ctx: Context) -> dict[str, str]:
        path = make(ctx)
        return ready_options(path, probe_sha256=hashlib.sha256(path.read_bytes()).hexdigest())

    return options


def _pinned(make: Callable[[Context], Path], pin: str) -> Callable[[Context], dict[str, str]]:
    return lambda ctx: ready_options(make(ctx), probe_sha256=pin)


def _non_executable(ctx: Context) -> Path:
    path = ctx.probe()
    path.chmod(0o644)
    return path


def _pins(lane: str, name: str, version: str) -> tuple[RuntimeRequirement, ...]:
    return tuple(
        RuntimeRequirement(pin.name, version, pin.features) if pin.name == name else pin
        for pin in lane_pins(lane)
    )


def _requirement_case(code: str, capability: str, **changes: Any) -> Case:
    """A framework lane refusing its one requirement with ``changes``."""
    requirement = framework_requirement(CAPABILITIES[capability]["lane"], **changes)
    return Case(code, _plain(capability, requirements=(requirement,)), False)


CASES: list[Case] = [
    # 1-4: incompatible, before anything else.
    Case("PROVIDER_ID_MISMATCH", _plain(provider_id="another-provider"), False, True),
    Case("CAPABILITY_UNKNOWN", _plain("cuda-linux-riscv64"), False, True),
    Case("TARGET_MISMATCH", _plain(RAW, triple="aarch64-unknown-linux-gnu"), False, True),
    Case("LIBTORCH_ARTIFACT_KIND_UNSUPPORTED", _plain(TORCH, kind="rust-crate"), False, True),
    Case("TENSORFLOW_TFE_ARTIFACT_KIND_UNSUPPORTED", _plain(TFE, kind="rust-crate"), False, True),
    # 5-6: options.
    Case("PROVIDER_OPTIONS_INVALID", _forged_options, False),
    Case("PROVIDER_OPTION_UNKNOWN", _plain(options=_with(colour="red")), False),
    Case("PROVIDER_OPTION_UNKNOWN", _plain(TORCH, options=_with(toolkit_root="/opt/cuda")), False),
    Case("PROBE_SHA256_INVALID", _plain(options=_with(probe_sha256="0" * 63)), False),
    Case("PROBE_SHA256_INVALID", _plain(TFE, options=_with(probe_sha256="F" * 64)), False),
    # driver_root (every lane): an absolute directory.
    Case("DRIVER_ROOT_NOT_ABSOLUTE", _plain(options=_with(driver_root="usr/local/cuda")), False),
    Case("DRIVER_ROOT_NOT_ABSOLUTE", _plain(TORCH, options=_with(driver_root="compat")), False),
    Case("DRIVER_ROOT_NOT_ABSOLUTE", _plain(TFE, options=_with(driver_root="~/compat")), False),
    Case("DRIVER_ROOT_NOT_ABSOLUTE", _plain(WINDOWS, options=_with(driver_root="./c")), False),
    Case(
        "LIBTORCH_TOOLKIT_ROOT_UNSUPPORTED",
        _plain(TORCH, config=lambda ctx: CudaProviderConfig(toolkit_root=ctx.tmp)),
        False,
    ),
    Case(
        "TENSORFLOW_TFE_TOOLKIT_ROOT_UNSUPPORTED",
        _plain(TFE, config=lambda ctx: CudaProviderConfig(toolkit_root=ctx.tmp)),
        False,
    ),
    # 7: raw requirement checks.
    Case("EXPLICIT_SM_REQUIRED", _plain(requirements=(raw_requirement(sm=None),)), False),
    Case("INVALID_SM", _plain(requirements=(raw_requirement(sm="sm_8x"),)), False),
    Case(
        "EXACTLY_ONE_CUDA_DEVICE_REQUIRED",
        _plain(requirements=(raw_requirement(0), raw_requirement(1))),
        False,
    ),
    Case(
        "FRAMEWORK_RUNTIME_REUSE_UNSUPPORTED",
        _plain(requirements=(raw_requirement(reuse_domain_runtime=True),)),
        False,
    ),
    Case(
        "CUDA_RUNTIME_INCOMPATIBLE",
        _plain(requirements=(raw_requirement(runtime="libtorch"),)),
        False,
    ),
    Case(
        "CUDA_FEATURE_UNSUPPORTED",
        _plain(requirements=(raw_requirement(features=("kernels",)),)),
        False,
    ),
    Case(
        "CUDA_MEMORY_SPACE_UNSUPPORTED",
        _plain(requirements=(raw_requirement(memory_spaces=("unified",)),)),
        False,
    ),
    Case(
        "CUDA_LAYOUT_UNSUPPORTED",
        _plain(requirements=(raw_requirement(layouts=("strided",)),)),
        False,
    ),
    # 7: libtorch requirement checks.
    Case("EXACTLY_ONE_CUDA_DEVICE_REQUIRED", _plain(TORCH, requirements=()), False),
    _requirement_case("CUDA_DEVICE_REQUIREMENT_INVALID", TORCH, logical_device="quantum:0"),
    _requirement_case("LIBTORCH_CUDA_DEVICE_UNSUPPORTED", TORCH, logical_device="gpu:1"),
    _requirement_case("LIBTORCH_RUNTIME_REQUIRED", TORCH, runtime="torchscript"),
    _requirement_case("LIBTORCH_RUNTIME_REUSE_REQUIRED", TORCH, reuse_domain_runtime=False),
    _requirement_case("AT_MOST_ONE_SM_ALLOWED", TORCH, architectures=("sm_80", "sm_86")),
    _requirement_case("INVALID_SM", TORCH, sm="sm80"),
    _requirement_case("LIBTORCH_FEATURES_INCOMPATIBLE", TORCH, features=("inference",)),
    _requirement_case("LIBTORCH_LAYOUT_INCOMPATIBLE", TORCH, layouts=("dense",)),
    _requirement_case("LIBTORCH_MEMORY_SPACE_INCOMPATIBLE", TORCH, memory_spaces=("host",)),
    Case(
        "LIBTORCH_RUNTIME_PINS_REQUIRED",
        _plain(TORCH, runtime_requirements=_pins("libtorch", "libtorch", "2.10.0")),
        False,
    ),
    # 7: TensorFlow TFE requirement checks.
    Case("TENSORFLOW_TFE_CPYTHON_REQUIRED", _plain(TFE, python_fallback_backend="nuitka"), False),
    _requirement_case("TENSORFLOW_TFE_CUDA_DEVICE_UNSUPPORTED", TFE, logical_device="cuda:2"),
    _requirement_case("TENSORFLOW_TFE_RUNTIME_REQUIRED", TFE, runtime="libtorch"),
    _requirement_case("TENSORFLOW_TFE_RUNTIME_REUSE_REQUIRED", TFE, reuse_domain_runtime=False),
    _requirement_case("TENSORFLOW_TFE_FEATURES_INCOMPATIBLE", TFE, features=("eager",)),
    _requirement_case("TENSORFLOW_TFE_LAYOUT_INCOMPATIBLE", TFE, layouts=("strided",)),
    _requirement_case("TENSORFLOW_TFE_MEMORY_SPACE_INCOMPATIBLE", TFE, memory_spaces=("host",)),
    Case(
        "TENSORFLOW_TFE_RUNTIME_PINS_REQUIRED",
        _plain(TFE, runtime_requirements=_pins("tensorflow-tfe", "tensorflow", "2.20.0")),
        False,
    ),
    # 8: the requirement's SM is outside the vocabulary.
    Case(
        "CUDA_ARCHITECTURE_UNSUPPORTED", _plain(requirements=(raw_requirement(sm="sm_95"),)), False
    ),
    # 9: option and constructor disagree.
    Case(
        "PROBE_CONFIGURATION_CONFLICT",
        _plain(config=lambda ctx: CudaProviderConfig(probe_path=ctx.tmp / "other-probe")),
        False,
    ),
    Case(
        "PROBE_CONFIGURATION_CONFLICT",
        _plain(
            options=_with(probe_sha256="0" * 64),
            config=lambda ctx: CudaProviderConfig(probe_sha256="1" * 64),
        ),
        False,
    ),
    # An injected runner decides where it looks: a driver root cannot bind it.
    Case(
        "PROBE_CONFIGURATION_CONFLICT",
        _plain(
            options=lambda ctx: {"device_ordinal": "0", "sm": "sm_80", "driver_root": "/opt/x"},
            runner=lambda ctx: SubprocessProbeRunner(ctx.probe()),
        ),
        False,
    ),
    Case(
        "TOOLKIT_CONFIGURATION_CONFLICT",
        _plain(
            options=_with(toolkit_root="/opt/cuda-a"),
            config=lambda ctx: CudaProviderConfig(toolkit_root=Path("/opt/cuda-b")),
        ),
        False,
    ),
    Case(
        "DEVICE_CONFIGURATION_CONFLICT",
        _plain(config=lambda ctx: CudaProviderConfig(device_ordinal=1)),
        False,
    ),
    Case(
        "SM_CONFIGURATION_CONFLICT",
        _plain(config=lambda ctx: CudaProviderConfig(sm="sm_86")),
        False,
    ),
    # 10-12: the effective selection.
    Case("DEVICE_ORDINAL_NOT_CONFIGURED", _plain(options=_without("device_ordinal")), False),
    Case("DEVICE_ORDINAL_INVALID", _plain(options=_with(device_ordinal="1024")), False),
    Case("DEVICE_ORDINAL_INVALID", _plain(options=_with(device_ordinal="\u0663")), False),
    Case("SM_NOT_CONFIGURED", _plain(options=_without("sm")), False),
    Case("INVALID_SM", _plain(options=_with(sm="sm80")), False),
    Case("CUDA_ARCHITECTURE_UNSUPPORTED", _plain(options=_with(sm="sm_95")), False),
    Case("DEVICE_REQUIREMENT_MISMATCH", _plain(options=_with(device_ordinal="1")), False),
    Case("PROBE_NOT_CONFIGURED", _plain(options=_without("probe_executable")), False),
    # 14: the runner.
    Case(
        "PROBE_PATH_NOT_ABSOLUTE",
        _plain(options=lambda ctx: ready_options(Path("relative/probe"))),
        False,
    ),
    Case(
        "PROBE_NOT_FOUND",
        _plain(options=lambda ctx: ready_options(ctx.tmp / "missing-probe")),
        False,
    ),
    Case("PROBE_NOT_EXECUTABLE", _plain(options=_probe_options(_non_executable)), False),
    Case("PROBE_NOT_EXECUTABLE", _plain(options=lambda ctx: ready_options(ctx.tmp)), False),
    Case(
        "PROBE_EXECUTION_FAILED",
        _plain(options=_probe_options(lambda ctx: ctx.probes.write("bad", "#!/nonexistent/sh\n"))),
        False,
    ),
    # Pinned: a digest that differs is refused before the probe is spawned.
    Case("PROBE_DIGEST_MISMATCH", _plain(options=_pinned(_binary, "0" * 64)), False),
    Case("PROBE_DIGEST_MISMATCH", _plain(TORCH, options=_pinned(_binary, "0" * 64)), False),
    Case("PROBE_TOO_LARGE", _plain(options=_pinned(_huge, "0" * 64)), False),
    Case(
        "PROBE_PIN_LOADER_UNTRUSTED",
        _plain(options=_pinned_to_itself(_malformed_elf)),
        False,
    ),
    Case(
        "PROBE_PIN_SCRIPT_UNSUPPORTED",
        _plain(options=_pinned(lambda ctx: ctx.probe(), "0" * 64)),
        False,
    ),
    Case(
        "PROBE_TIMEOUT",
        _plain(
            runner=lambda ctx: SubprocessProbeRunner(
                ctx.script("exec sleep 30"), timeout_seconds=0.5
            )
        ),
        True,
    ),
    Case(
        "PROBE_OUTPUT_TOO_LARGE",
        _plain(options=_probe_options(lambda ctx: ctx.script("exec yes flood"))),
        True,
    ),
    Case(
        "PROBE_EXIT_NONZERO",
        _plain(
            options=_probe_options(lambda ctx: ctx.script(f"echo '{json.dumps(report())}'\nexit 3"))
        ),
        True,
    ),
    # 14: the parser.
    Case(
        "PROBE_OUTPUT_INVALID",
        _plain(options=_probe_options(lambda ctx: ctx.probe("not json"))),
        True,
    ),
    Case(
        "PROBE_SCHEMA_INVALID",
        _plain(options=_probe_options(lambda ctx: ctx.probe(report(schema_version="2")))),
        True,
    ),
    # 15-18: the report.
    Case(
        "PROBE_TARGET_MISMATCH",
        _plain(
            options=_probe_options(
                lambda ctx: ctx.probe(report(target=("windows", "x86_64", "msvc")))
            )
        ),
        True,
    ),
    Case(
        "LIBCUDA_SO_NOT_FOUND",
        _plain(
            options=_probe_options(
                lambda ctx: ctx.probe(unavailable_report("LIBCUDA_SO_NOT_FOUND"))
            )
        ),
        True,
    ),
    Case(
        "NO_CUDA_DEVICES",
        _plain(
            options=_probe_options(lambda ctx: ctx.probe(unavailable_report("NO_CUDA_DEVICES")))
        ),
        True,
    ),
    Case(
        "UNSUPPORTED_TARGET",
        _plain(
            options=_probe_options(
                lambda ctx: ctx.probe(
                    dict(
                        unavailable_report("UNSUPPORTED_TARGET"),
                        status="unsupported",
                        platform_supported=False,
                    )
                )
            )
        ),
        True,
    ),
    # Step 16: any schema-valid code passes through, also one this package's
    # probe never emits (another or a newer probe) or another stage's code.
    Case(
        "SOMETHING_ELSE",
        _plain(options=_probe_options(lambda ctx: ctx.probe(unavailable_report("SOMETHING_ELSE")))),
        True,
    ),
    Case(
        "PROVIDER_ID_MISMATCH",
        _plain(
            options=_probe_options(
                lambda ctx: ctx.probe(unavailable_report("PROVIDER_ID_MISMATCH"))
            )
        ),
        True,
    ),
    # PROBE_NOT_READY only when the report carries no code (an altered record).
    Case(
        "PROBE_NOT_READY",
        _plain(
            runner=lambda ctx: _ForgedRunner(
                ctx, status="unavailable", reason_code=None, devices=(), device_count=None
            )
        ),
        True,
    ),
    # Unreachable through the parser; a programmatic runner's altered record.
    Case(
        "DRIVER_VERSION_UNAVAILABLE",
        _plain(runner=lambda ctx: _ForgedRunner(ctx, driver_version=None)),
        True,
    ),
    Case(
        "DRIVER_VERSION_TOO_OLD",
        _plain(options=_probe_options(lambda ctx: ctx.probe(report(driver_version=11080)))),
        True,
    ),
    Case(
        "DRIVER_VERSION_TOO_OLD",
        _plain(config=lambda ctx: CudaProviderConfig(minimum_driver_version=12090)),
        True,
    ),
    Case(
        "CUDA_DEVICE_NOT_FOUND",
        _plain(options=_with(device_ordinal="1"), requirements=(raw_requirement(1),)),
        True,
    ),
    Case(
        "CUDA_SM_MISMATCH",
        _plain(options=_probe_options(lambda ctx: ctx.probe(report(sms=("sm_86",))))),
        True,
    ),
    # After step 17: an RTX 5090 on a 12.4 driver, before the SM check.
    Case("CUDA_ARCHITECTURE_DRIVER_TOO_OLD", _architecture("sm_120", 12040), True),
    Case("CUDA_ARCHITECTURE_DRIVER_TOO_OLD", _architecture("sm_107", 13030), True),
    Case(
        "CUDA_ARCHITECTURE_DRIVER_TOO_OLD", _architecture("sm_120", 12060, device_sm="sm_80"), True
    ),
    Case("CUDA_SM_MISMATCH", _architecture("sm_120", 12080, device_sm="sm_80"), True),
    # 19: the toolkit (raw lanes).
    Case("TOOLKIT_PATH_NOT_ABSOLUTE", _plain(options=_with(toolkit_root="relative/cuda")), True),
    Case(
        "TOOLKIT_NOT_FOUND",
        _plain(options=lambda ctx: ready_options(ctx.probe(), toolkit_root=str(ctx.tmp / "none"))),
        True,
    ),
    Case("TOOLKIT_VERSION_UNAVAILABLE", _plain(options=_no_version_toolkit), True),
    Case("TOOLKIT_VERSION_INVALID", _plain(options=_toolkit(version="12.x")), True),
    Case("TOOLKIT_COMPONENT_MISSING", _plain(options=_toolkit(components=False)), True),
    Case("TOOLKIT_COMPONENT_MISSING", _plain(options=_escaping_toolkit), True),
    # A well-formed report whose components are not this target's.
    Case(
        "TOOLKIT_COMPONENT_INVALID",
        _plain(inspector=lambda ctx: _FixedInspector("12.4", "12.4", ("cuda-header",))),
        True,
    ),
    Case(
        "TOOLKIT_RUNTIME_VERSION_MISMATCH",
        _plain(inspector=lambda ctx: _FixedInspector("12.4", "12.3")),
        True,
    ),
    Case("TOOLKIT_VERSION_TOO_OLD", _plain(options=_toolkit(version="11.8")), True),
    Case(
        "TOOLKIT_VERSION_TOO_OLD",
        _plain(
            options=_toolkit(version="12.4"),
            config=lambda ctx: CudaProviderConfig(minimum_toolkit_version=(12, 6)),
        ),
        True,
    ),
    Case("DRIVER_TOOLKIT_INCOMPATIBLE", _plain(options=_toolkit(version="12.9")), True),
    Case("DRIVER_TOOLKIT_INCOMPATIBLE", _architecture("sm_70", 12090, toolkit="13.0.1"), True),
    # Last in step 19: the toolkit's release cannot compile the SM.
    *(
        Case("TOOLKIT_ARCHITECTURE_UNSUPPORTED", _architecture(sm, driver, toolkit=toolkit), True)
        for sm, driver, toolkit in (
            ("sm_70", 13000, "13.0.1"),
            ("sm_120", 12080, "12.6.3"),
            ("sm_101", 13000, "13.0"),
        )
    ),
]

# Codes only the Rust probe (section 6) or the lifetime smoke (section 8) emit;
# the provider passes them through (LIBCUDA_SO_NOT_FOUND, NO_CUDA_DEVICES above).
PROBE_AND_SMOKE_CODES = {
    "LIBCUDA_SO_NOT_FOUND",
    "LIBCUDA_SO_LOAD_FAILED",
    "NVCUDA_DLL_NOT_FOUND",
    "REQUIRED_SYMBOL_MISSING",
    "CU_INIT_FAILED",
    "CU_DRIVER_VERSION_FAILED",
    "CU_DEVICE_COUNT_FAILED",
    "CU_DEVICE_GET_FAILED",
    "CU_DEVICE_NAME_FAILED",
    "CU_DEVICE_CAPABILITY_FAILED",
    "INVALID_DEVICE_COUNT",
    "NO_CUDA_DEVICES",
    "INVALID_COMPUTE_CAPABILITY",
    "CONTEXT_CREATE_OR_DETACH_FAILED",
    "STREAM_CREATE_FAILED",
    "DEVICE_ALLOCATION_FAILED",
    "STREAM_SYNCHRONIZE_FAILED",
    "DEVICE_COPY_FAILED",
    "DEVICE_ROUND_TRIP_MISMATCH",
    "DEVICE_FREE_FAILED",
    "STREAM_DESTROY_FAILED",
    "CONTEXT_DESTROY_FAILED",
    "INVALID_ARGUMENTS",
    "DRIVER_PROCESSES_SURVIVED",
}


def test_the_table_covers_every_provider_runner_parser_and_toolkit_code() -> None:
    covered = {case.code for case in CASES}
    expected = set(SPEC["reason_codes"]) - PROBE_AND_SMOKE_CODES
    assert expected - covered == set()
    assert set(SPEC["reason_codes"]) >= PROBE_AND_SMOKE_CODES
    incompatible = {case.code for case in CASES if case.incompatible}
    assert incompatible == set(SPEC["incompatible_reason_codes"])


@pytest.mark.parametrize(
    "case", CASES, ids=[f"{index:02d}-{case.code}" for index, case in enumerate(CASES)]
)
def test_reason_code(
    case: Case, probes: ProbeFactory, tmp_path: Path, make_toolkit: Callable[..., Path]
) -> None:
    provider, request = case.build(Context(probes, tmp_path, make_toolkit))
    result = provider.preflight(request)
    assert result.reason_codes == (case.code,)
    expected = (
        DevicePreflightStatus.INCOMPATIBLE
        if case.incompatible
        else DevicePreflightStatus.UNAVAILABLE
    )
    assert result.status is expected
    assert result.observations == ()
    assert result.support_claim is False
    assert probes.marker().exists() is case.ran
    with pytest.raises(DeviceProviderError, match="requires successful preflight"):
        provider.build_contribution(request)
    # A refusal decided by what the probe, driver or toolkit reported says what that was.
    _, refusal = provider._preflight_outcome(request)
    assert isinstance(refusal, _preflight_checks.Refusal)
    assert refusal.reason_code == case.code
    if case.code in OBSERVED_CODES:
        assert refusal.facts, case.code
    if refusal.facts is not None:
        assert str(tmp_path) not in refusal.facts
        assert "/" not in refusal.facts, refusal.facts


# The codes whose refusal is decided by an observation (the human
# lines state it): the probe's report, the driver, the device and the toolkit.
OBSERVED_CODES = {
    "CUDA_ARCHITECTURE_UNSUPPORTED",
    "DEVICE_REQUIREMENT_MISMATCH",
    "PROBE_TARGET_MISMATCH",
    "NO_CUDA_DEVICES",
    "LIBCUDA_SO_NOT_FOUND",
    "DRIVER_VERSION_TOO_OLD",
    "CUDA_ARCHITECTURE_DRIVER_TOO_OLD",
    "CUDA_DEVICE_NOT_FOUND",
    "CUDA_SM_MISMATCH",
    # (TOOLKIT_VERSION_TOO_OLD below 12.0 is the toolkit record's own refusal,
    # raised before its version reaches the provider: no facts to state.)
    "DRIVER_TOOLKIT_INCOMPATIBLE",
    "TOOLKIT_ARCHITECTURE_UNSUPPORTED",
}


def test_a_refusal_before_the_probe_runs_still_revokes(probes: ProbeFactory) -> None:
    # The probe vanishes: the runner refuses before spawning anything.
    provider = CudaDeviceProvider()
    good = probes.printing(report(), name="good")
    request = request_for(RAW, ready_options(good))
    assert provider.preflight(request).status is DevicePreflightStatus.READY
    provider.build_contribution(request)
    good.unlink()
    assert provider.preflight(request).reason_codes == ("PROBE_NOT_FOUND",)
    with pytest.raises(DeviceProviderError, match="requires successful preflight"):
        provider.build_contribution(request)


def test_repeated_outcomes_give_equal_results(probes: ProbeFactory) -> None:
    provider = CudaDeviceProvider()
    request = request_for(RAW, ready_options(probes.printing(report())))
    first = provider.preflight(request)
    second = provider.preflight(request)
    assert first == second
    assert first.status is DevicePreflightStatus.READY
    assert first.to_dict() == second.to_dict()


@pytest.mark.parametrize("capability", sorted(CAPABILITIES))
def test_a_driver_root_becomes_the_probes_only_argument(
    probes: ProbeFactory, capability: str
) -> None:
    # `driver_root` (every lane) runs the probe as
    # `rextio-cuda-driver-probe --driver-root DIR`; without it, no argument.
    seen = probes.directory / "argv.json"
    target = TARGETS[CAPABILITIES[capability]["target_triple"]]
    body = (
        "import json, sys\n"
        f"open({str(seen)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        f"print({json.dumps(report(target=target))!r})\n"
    )
    probe = probes.python(body)
    directory = "/opt/nvidia/l4t-gpu-libs/openrm"
    given = CudaDeviceProvider().preflight(
        request_for(capability, ready_options(probe, driver_root=directory))
    )
    plain = CudaDeviceProvider().preflight(request_for(capability, ready_options(probe)))
    assert given.status is DevicePreflightStatus.READY, given.reason_codes
    assert plain.status is DevicePreflightStatus.READY, plain.reason_codes
    runs = [json.loads(line) for line in seen.read_text(encoding="utf-8").splitlines()]
    assert runs == [["--driver-root", directory], []]
    # The directory is never observed.
    assert directory not in json.dumps(given.to_dict())


# -- what a provider keeps between preflights -------------------------------------------


def test_a_provider_keeps_each_requests_checks_apart(probes: ProbeFactory) -> None:
    # Requests that differ only in an option's value, in either order and
    # again, each get their own verdict.
    provider = CudaDeviceProvider()
    ready = request_for(RAW, ready_options(probes.printing(report())))
    other_sm = request_for(RAW, ready_options(probes.printing(report()), sm="sm_90"))
    other_probe = request_for(RAW, ready_options(probes.directory / "missing"))
    for _ in range(3):
        assert provider.preflight(ready).status is DevicePreflightStatus.READY
        assert provider.preflight(other_sm).reason_codes == ("DEVICE_REQUIREMENT_MISMATCH",)
        assert provider.preflight(other_probe).reason_codes == ("PROBE_NOT_FOUND",)
        # A request equal to one seen before, built anew, is the same request.
        rebuilt = request_for(RAW, ready_options(probes.printing(report())))
        assert provider.preflight(rebuilt).status is DevicePreflightStatus.READY
        provider.build_contribution(rebuilt)


def test_unhashable_forged_option_values_are_still_checked(probes: ProbeFactory) -> None:
    # Option values a forged object holds in lists: the same verdict every time.
    options = DeviceProviderOptions((("sm", "sm_80"),))
    object.__setattr__(options, "values", [["sm", "sm_80"]])
    request = dataclasses.replace(request_for(RAW, {}), options=options)
    provider = CudaDeviceProvider()
    first = provider.preflight(request)
    assert provider.preflight(request) == first
    assert first.status is not DevicePreflightStatus.READY

