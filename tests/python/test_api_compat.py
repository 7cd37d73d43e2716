"""The public Python API, pinned exactly as 0.1.0 had it.

Code written against rextio-device-cuda 0.1.0 (the companion plugins' CUDA
candidate builders, 0.1.0's own tests) must keep working unchanged: every
name, field order, keyword constructor, property and validation order below
is part of the contract. Additions are allowed; nothing here may change.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cuda_support import ProbeFactory, ready_options, report, request_for
from rextio.devices import DevicePreflightStatus

from rextio_device_cuda._provider_spec import PROVIDER_SPEC
from rextio_device_cuda.probe import (
    CudaDeviceRecord,
    CudaProbeError,
    CudaProbeReport,
    CudaToolkitReport,
    ProbeTarget,
    parse_probe_report,
)
from rextio_device_cuda.provider import CudaDeviceProvider, CudaProviderConfig

RAW = "cuda-linux-x86_64"

# -- names ------------------------------------------------------------------------------

PUBLIC_NAMES: dict[str, tuple[str, ...]] = {
    "rextio_device_cuda": ("CudaDeviceProvider", "CudaProviderConfig", "provider", "__version__"),
    "rextio_device_cuda.__about__": ("__version__",),
    "rextio_device_cuda.config": (
        "CudaProviderConfig",
        "CUDA_DRIVER_VERSION_FLOOR",
        "CUDA_TOOLKIT_RUNTIME_VERSION_FLOOR",
        "CUDA_TOOLKIT_RUNTIME_VERSION_FLOOR_TEXT",
    ),
    "rextio_device_cuda.provider": (
        "PROVIDER_ID",
        "CAPABILITY_LINUX_X86_64",
        "CAPABILITY_LINUX_AARCH64",
        "CAPABILITY_WINDOWS_X86_64",
        "CAPABILITY_LIBTORCH_LINUX_X86_64",
        "CAPABILITY_TENSORFLOW_TFE_LINUX_X86_64",
        "LIBTORCH_RUNTIME",
        "LIBTORCH_VERSION",
        "TCH_VERSION",
        "TENSORFLOW_TFE_RUNTIME",
        "TENSORFLOW_VERSION",
        "CPYTHON_VERSION",
        "CudaDeviceProvider",
        "provider",
        "CudaProviderConfig",
        "CUDA_DRIVER_VERSION_FLOOR",
        "CudaProbeError",
        "FilesystemToolkitInspector",
        "ProbeRunner",
        "SubprocessProbeRunner",
        "ToolkitInspector",
        "expected_probe_target",
        "__version__",
    ),
    "rextio_device_cuda.probe": (
        "CudaProbeError",
        "ProbeTarget",
        "CudaDeviceRecord",
        "CudaProbeReport",
        "CudaToolkitReport",
        "ProbeRunner",
        "ToolkitInspector",
        "parse_probe_report",
        "SubprocessProbeRunner",
        "FilesystemToolkitInspector",
        "expected_probe_target",
        "CUDA_TOOLKIT_RUNTIME_VERSION_FLOOR",
    ),
}


@pytest.mark.parametrize(
    ("module", "name"),
    [(module, name) for module, names in PUBLIC_NAMES.items() for name in names],
)
def test_every_public_name_imports(module: str, name: str) -> None:
    # What `from module import name` does: import with a fromlist, then getattr.
    imported = __import__(module, fromlist=[name])
    assert hasattr(imported, name)


CONSTANTS: dict[tuple[str, str], object] = {
    ("rextio_device_cuda", "__version__"): "0.2.0",
    ("rextio_device_cuda.provider", "__version__"): "0.2.0",
    ("rextio_device_cuda.__about__", "__version__"): "0.2.0",
    ("rextio_device_cuda.config", "CUDA_DRIVER_VERSION_FLOOR"): 12000,
    ("rextio_device_cuda.provider", "CUDA_DRIVER_VERSION_FLOOR"): 12000,
    ("rextio_device_cuda.config", "CUDA_TOOLKIT_RUNTIME_VERSION_FLOOR"): (12, 0),
    ("rextio_device_cuda.probe", "CUDA_TOOLKIT_RUNTIME_VERSION_FLOOR"): (12, 0),
    ("rextio_device_cuda.config", "CUDA_TOOLKIT_RUNTIME_VERSION_FLOOR_TEXT"): "12.0",
    ("rextio_device_cuda.provider", "PROVIDER_ID"): "rextio-device-cuda",
    ("rextio_device_cuda.provider", "CAPABILITY_LINUX_X86_64"): "cuda-linux-x86_64",
    ("rextio_device_cuda.provider", "CAPABILITY_LINUX_AARCH64"): "cuda-linux-aarch64",
    ("rextio_device_cuda.provider", "CAPABILITY_WINDOWS_X86_64"): "cuda-windows-x86_64",
    ("rextio_device_cuda.provider", "CAPABILITY_LIBTORCH_LINUX_X86_64"): (
        "cuda-libtorch-linux-x86_64"
    ),
    ("rextio_device_cuda.provider", "CAPABILITY_TENSORFLOW_TFE_LINUX_X86_64"): (
        "cuda-tensorflow-tfe-linux-x86_64"
    ),
    ("rextio_device_cuda.provider", "LIBTORCH_RUNTIME"): "libtorch",
    ("rextio_device_cuda.provider", "LIBTORCH_VERSION"): "2.11.0",
    ("rextio_device_cuda.provider", "TCH_VERSION"): "0.24.0",
    ("rextio_device_cuda.provider", "TENSORFLOW_TFE_RUNTIME"): "tensorflow-tfe",
    ("rextio_device_cuda.provider", "TENSORFLOW_VERSION"): "2.21.0",
    ("rextio_device_cuda.provider", "CPYTHON_VERSION"): "3.11",
}


@pytest.mark.parametrize(("where", "value"), list(CONSTANTS.items()), ids=str)
def test_constant_values(where: tuple[str, str], value: object) -> None:
    module, name = where
    actual = getattr(importlib.import_module(module), name)
    assert type(actual) is type(value)
    assert actual == value


def test_the_same_objects_are_reexported() -> None:
    config = importlib.import_module("rextio_device_cuda.config")
    probe = importlib.import_module("rextio_device_cuda.probe")
    provider_module = importlib.import_module("rextio_device_cuda.provider")
    package = importlib.import_module("rextio_device_cuda")
    assert package.CudaProviderConfig is config.CudaProviderConfig
    assert provider_module.CudaProviderConfig is config.CudaProviderConfig
    assert package.CudaDeviceProvider is provider_module.CudaDeviceProvider
    assert package.provider is provider_module.provider
    for name in (
        "CudaProbeError",
        "FilesystemToolkitInspector",
        "ProbeRunner",
        "SubprocessProbeRunner",
        "ToolkitInspector",
        "expected_probe_target",
    ):
        assert getattr(provider_module, name) is getattr(probe, name), name


def test_a_provider_without_configuration_has_the_default_one() -> None:
    # The defaults, the same record every time.
    provider = CudaDeviceProvider()
    assert provider.config == CudaProviderConfig()
    assert provider.config is provider.config
    given = CudaProviderConfig(sm="sm_90")
    assert CudaDeviceProvider(given).config is given


# -- records: fields, order, keyword construction ----------------------------------------

RECORD_FIELDS: dict[type, tuple[str, ...]] = {
    ProbeTarget: ("os", "arch", "environment"),
    CudaDeviceRecord: ("ordinal", "name", "compute_major", "compute_minor", "sm"),
    CudaProbeReport: (
        "target",
        "platform_supported",
        "status",
        "reason_code",
        "driver_loaded",
        "driver_version",
        "device_count",
        "cuda_result",
        "devices",
    ),
    CudaToolkitReport: ("version", "runtime_version", "components"),
}


@pytest.mark.parametrize("record", list(RECORD_FIELDS), ids=lambda record: record.__name__)
def test_record_fields_in_order_and_frozen(record: type) -> None:
    fields = dataclasses.fields(record)
    named = RECORD_FIELDS[record]
    assert tuple(field.name for field in fields[: len(named)]) == named
    # Anything added after 0.1.0 comes last and is optional (the report's
    # refusing_rule), so 0.1.0's positional and keyword construction holds.
    for field in fields[len(named) :]:
        assert field.default is not dataclasses.MISSING, field.name
    assert record.__dataclass_params__.frozen  # type: ignore[attr-defined]


CONFIG_FIELDS = (
    ("probe_path", None),
    ("toolkit_root", None),
    ("device_ordinal", None),
    ("sm", None),
    ("minimum_driver_version", 12000),
    ("minimum_toolkit_version", (12, 0)),
)


def test_config_fields_in_order_and_later_additions_optional() -> None:
    fields = dataclasses.fields(CudaProviderConfig)
    assert tuple((field.name, field.default) for field in fields[: len(CONFIG_FIELDS)]) == (
        CONFIG_FIELDS
    )
    # Anything added after 0.1.0 comes last and is optional.
    for field in fields[len(CONFIG_FIELDS) :]:
        assert field.default is not dataclasses.MISSING, field.name
    assert CudaProviderConfig.__dataclass_params__.frozen  # type: ignore[attr-defined]
    config = CudaProviderConfig(
        probe_path=Path("/opt/probe"),
        toolkit_root=Path("/opt/cuda"),
        device_ordinal=3,
        sm="sm_90",
        minimum_driver_version=12080,
        minimum_toolkit_version=(12, 4),
    )
    assert (config.device_ordinal, config.sm) == (3, "sm_90")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"probe_path": "/opt/probe"}, TypeError, "probe_path"),
        ({"toolkit_root": "/opt/cuda"}, TypeError, "toolkit_root"),
        ({"device_ordinal": 1024}, ValueError, "device_ordinal"),
        ({"sm": "sm80"}, ValueError, "sm"),
        ({"minimum_driver_version": 11999}, ValueError, "at or above 12000"),
        ({"minimum_toolkit_version": (11, 8)}, ValueError, "at or above 12.0"),
    ],
)
def test_config_errors(kwargs: dict[str, Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        CudaProviderConfig(**kwargs)


def _device(**changes: Any) -> CudaDeviceRecord:
    fields: dict[str, Any] = {
        "ordinal": 0,
        "name": "Synthetic GPU",
        "compute_major": 8,
        "compute_minor": 0,
        "sm": "sm_80",
    }
    fields.update(changes)
    return CudaDeviceRecord(**fields)


def _report(**changes: Any) -> CudaProbeReport:
    fields: dict[str, Any] = {
        "target": ProbeTarget(os="linux", arch="x86_64", environment="gnu"),
        "platform_supported": True,
        "status": PROVIDER_SPEC.probe_report.statuses.complete,
        "reason_code": None,
        "driver_loaded": True,
        "driver_version": 12080,
        "device_count": 1,
        "cuda_result": 0,
        "devices": (_device(),),
    }
    fields.update(changes)
    return CudaProbeReport(**fields)


def test_keyword_construction_equals_parsing() -> None:
    # The shape the companion plugins' candidate builders construct.
    constructed = _report(devices=(_device(name="Fixture GPU 0"),))
    assert constructed == parse_probe_report(json.dumps(report()).encode())
    spec = PROVIDER_SPEC.probe_report
    assert (constructed.schema_version, constructed.probe) == (spec.schema_version, spec.probe)
    assert constructed.support_claim is False


@pytest.mark.parametrize("constant", ["schema_version", "probe", "support_claim"])
def test_wire_constants_are_not_constructor_fields(constant: str) -> None:
    spec = PROVIDER_SPEC.probe_report
    value = {"schema_version": spec.schema_version, "probe": spec.probe, "support_claim": False}
    with pytest.raises(TypeError):
        _report(**{constant: value[constant]})


INVALID_CONSTRUCTIONS: list[tuple[str, Any]] = [
    ("target-not-record", lambda: _report(target=("linux", "x86_64", "gnu"))),
    ("target-field", lambda: ProbeTarget(os="linux", arch="x86 64", environment="gnu")),
    ("platform-int", lambda: _report(platform_supported=1)),
    ("status", lambda: _report(status="done")),
    (
        "reason-lower",
        lambda: _report(status="error", reason_code="bad", devices=(), device_count=0),
    ),
    ("driver-bool", lambda: _report(driver_version=True)),
    ("driver-low", lambda: _report(driver_version=999)),
    ("count-high", lambda: _report(device_count=1025, devices=())),
    ("cuda-result-int64", lambda: _report(cuda_result=2**31)),
    ("devices-list", lambda: _report(devices=[_device()])),
    ("devices-not-records", lambda: _report(devices=({"ordinal": 0},))),
    ("complete-with-reason", lambda: _report(reason_code="X")),
    ("complete-count", lambda: _report(device_count=2)),
    ("incomplete-no-reason", lambda: _report(status="error", devices=(), device_count=0)),
    ("incomplete-rows", lambda: _report(status="error", reason_code="CU_INIT_FAILED")),
    ("row-ordinal", lambda: _report(devices=(_device(ordinal=1),))),
    ("row-name-path", lambda: _device(name="/dev/nvidia0")),
    ("row-name-surrogate", lambda: _device(name="GPU \ud800")),
    ("row-name-long", lambda: _device(name="G" * 161)),
    ("row-sm", lambda: _device(sm="sm_86")),
    ("row-major-bool", lambda: _device(compute_major=True, sm="sm_True0")),
]


@pytest.mark.parametrize(
    "make", [make for _, make in INVALID_CONSTRUCTIONS], ids=[n for n, _ in INVALID_CONSTRUCTIONS]
)
def test_direct_construction_validates_like_the_parser(make: Any) -> None:
    with pytest.raises(CudaProbeError) as caught:
        make()
    assert str(caught.value) == "PROBE_SCHEMA_INVALID"


def test_a_lone_surrogate_in_a_parsed_name_is_schema_invalid() -> None:
    # The JSON escape decodes to a lone surrogate: valid JSON, not valid Unicode.
    text = json.dumps(report()).replace("Fixture GPU 0", "Fixture GPU \\ud800")
    with pytest.raises(CudaProbeError) as caught:
        parse_probe_report(payload=text.encode())
    assert caught.value.reason_code == "PROBE_SCHEMA_INVALID"
    # A surrogate pair is one valid character (U+1F600).
    paired = json.dumps(report()).replace("Fixture GPU 0", "GPU \\ud83d\\ude00")
    assert parse_probe_report(payload=paired).devices[0].name == "GPU \U0001f600"


def test_parse_probe_report_takes_payload_by_keyword() -> None:
    data = json.dumps(report())
    assert parse_probe_report(payload=data) == parse_probe_report(payload=data.encode())
    assert list(inspect.signature(parse_probe_report).parameters) == ["payload"]


# -- the toolkit report ----------------------------------------------------------------

TOOLKIT_CASES: list[tuple[str, tuple[Any, Any, Any], str]] = [
    # TOOLKIT_VERSION_INVALID first: either version.
    ("version-short", ("12", "12", ("cuda-header",)), "TOOLKIT_VERSION_INVALID"),
    ("version-number", (12.4, "12.4", ("cuda-header",)), "TOOLKIT_VERSION_INVALID"),
    ("runtime-bad", ("12.4", "12.x", ("cuda-header",)), "TOOLKIT_VERSION_INVALID"),
    ("patch-long", ("12.4.1234", "12.4.1234", ()), "TOOLKIT_VERSION_INVALID"),
    ("invalid-before-old", ("9", "11.0", ()), "TOOLKIT_VERSION_INVALID"),
    # Then the mismatch, before the floor and the components.
    ("mismatch", ("12.4", "12.3", ("cuda-header",)), "TOOLKIT_RUNTIME_VERSION_MISMATCH"),
    ("mismatch-patch", ("12.4.1", "12.4.2", ()), "TOOLKIT_RUNTIME_VERSION_MISMATCH"),
    ("mismatch-before-old", ("11.8", "12.0", ("cuda-header",)), "TOOLKIT_RUNTIME_VERSION_MISMATCH"),
    # Then the 12.0 floor, before the components.
    ("too-old", ("11.8", "11.8", ("cuda-header",)), "TOOLKIT_VERSION_TOO_OLD"),
    ("too-old-before-components", ("11.8", "11.8", ()), "TOOLKIT_VERSION_TOO_OLD"),
    # Then the components.
    ("components-empty", ("12.4", "12.4", ()), "TOOLKIT_COMPONENT_INVALID"),
    ("components-list", ("12.4", "12.4", ["cuda-header"]), "TOOLKIT_COMPONENT_INVALID"),
    ("components-unsorted", ("12.4", "12.4", ("b", "a")), "TOOLKIT_COMPONENT_INVALID"),
    ("components-duplicate", ("12.4", "12.4", ("a", "a")), "TOOLKIT_COMPONENT_INVALID"),
    ("component-empty", ("12.4", "12.4", ("",)), "TOOLKIT_COMPONENT_INVALID"),
    ("component-long", ("12.4", "12.4", ("a" * 65,)), "TOOLKIT_COMPONENT_INVALID"),
    ("component-non-ascii", ("12.4", "12.4", ("cud\u00e4",)), "TOOLKIT_COMPONENT_INVALID"),
    ("component-space", ("12.4", "12.4", ("cuda header",)), "TOOLKIT_COMPONENT_INVALID"),
    ("component-number", ("12.4", "12.4", (1,)), "TOOLKIT_COMPONENT_INVALID"),
]


@pytest.mark.parametrize(
    ("fields", "code"),
    [(fields, code) for _, fields, code in TOOLKIT_CASES],
    ids=[name for name, _, _ in TOOLKIT_CASES],
)
def test_toolkit_report_validates_in_contract_order(
    fields: tuple[Any, Any, Any], code: str
) -> None:
    version, runtime_version, components = fields
    with pytest.raises(CudaProbeError) as caught:
        CudaToolkitReport(version=version, runtime_version=runtime_version, components=components)
    assert str(caught.value) == code


def test_toolkit_report_properties() -> None:
    toolkit = CudaToolkitReport(
        version="12.4", runtime_version="12.4.0", components=("a" * 64, "cuda-header", "x.y_z-1")
    )
    assert toolkit.version_tuple == (12, 4, 0)
    assert toolkit.runtime_version_tuple == (12, 4, 0)
    patched = CudaToolkitReport(version="12.8.1", runtime_version="12.8.1", components=("c",))
    assert (patched.version_tuple, patched.runtime_version_tuple) == ((12, 8, 1), (12, 8, 1))


# -- the error type -----------------------------------------------------------------------


def test_probe_error_is_a_runtime_error_whose_text_is_the_code() -> None:
    assert issubclass(CudaProbeError, RuntimeError)
    error = CudaProbeError("NO_CUDA_DEVICES")
    assert str(error) == "NO_CUDA_DEVICES"
    assert error.args == ("NO_CUDA_DEVICES",)
    assert error.reason_code == "NO_CUDA_DEVICES"
    # The explanation is an extra attribute, never part of str(error).
    assert error.explanation is not None
    assert error.explanation not in str(error)
    assert str(CudaProbeError("X")) == "X"
    assert CudaProbeError("SOME_NEWER_CODE").explanation is None
    with pytest.raises(RuntimeError) as caught:
        parse_probe_report(b"")
    assert str(caught.value) == "PROBE_OUTPUT_INVALID"


@pytest.mark.parametrize("code", ["", "lower", "A" * 65, "1ABC", "A-B", "ABC\n", "\u00c4"])
def test_probe_error_rejects_malformed_codes(code: str) -> None:
    with pytest.raises(ValueError, match="reason_code"):
        CudaProbeError(code)


# -- signatures and protocols -----------------------------------------------------------------


def _parameters(callable_object: Any) -> list[tuple[str, Any, Any]]:
    return [
        (parameter.name, parameter.kind, parameter.default)
        for parameter in inspect.signature(callable_object).parameters.values()
    ]


def test_constructor_signatures() -> None:
    probe = importlib.import_module("rextio_device_cuda.probe")
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    keyword = inspect.Parameter.KEYWORD_ONLY
    empty = inspect.Parameter.empty
    assert _parameters(CudaDeviceProvider) == [
        ("config", positional, None),
        ("probe_runner", keyword, None),
        ("toolkit_inspector", keyword, None),
    ]
    assert _parameters(probe.SubprocessProbeRunner)[:3] == [
        ("executable", positional, empty),
        ("arguments", keyword, ()),
        ("timeout_seconds", keyword, 10.0),
    ]
    assert _parameters(probe.FilesystemToolkitInspector) == [("root", positional, empty)]
    assert _parameters(probe.expected_probe_target) == [("target_triple", positional, empty)]
    assert _parameters(probe.CudaProbeError)[0] == ("reason_code", positional, empty)


@pytest.mark.parametrize(
    ("triple", "target"),
    [
        ("x86_64-unknown-linux-gnu", ("linux", "x86_64", "gnu")),
        ("aarch64-unknown-linux-gnu", ("linux", "aarch64", "gnu")),
        ("x86_64-pc-windows-msvc", ("windows", "x86_64", "msvc")),
    ],
)
def test_expected_probe_target(triple: str, target: tuple[str, str, str]) -> None:
    probe = importlib.import_module("rextio_device_cuda.probe")
    assert probe.expected_probe_target(triple) == ProbeTarget(*target)


@dataclass
class _FixedRunner:
    """A 0.1.0-style runner: a plain dataclass with run(), as the plugins write it."""

    report: object
    calls: int = 0

    def run(self) -> object:
        self.calls += 1
        return self.report


class _Inspector010:
    """A 0.1.0-style inspector, built by keyword."""

    def inspect(self, target_triple: str) -> CudaToolkitReport:
        return CudaToolkitReport(
            version="12.4", runtime_version="12.4", components=("cuda-header", "cuda-runtime")
        )


def test_protocols_are_runtime_checkable() -> None:
    probe = importlib.import_module("rextio_device_cuda.probe")
    assert isinstance(_FixedRunner(_report()), probe.ProbeRunner)
    assert isinstance(_Inspector010(), probe.ToolkitInspector)
    assert not isinstance(object(), probe.ProbeRunner)
    assert not isinstance(object(), probe.ToolkitInspector)


def test_code_written_for_0_1_0_runs_a_preflight_unchanged() -> None:
    runner = _FixedRunner(_report())
    provider = CudaDeviceProvider(
        CudaProviderConfig(),
        # The plugins type run() as returning object; it is accepted at runtime.
        probe_runner=runner,  # type: ignore[arg-type]
        toolkit_inspector=_Inspector010(),
    )
    request = request_for(RAW, {"device_ordinal": "0", "sm": "sm_80"})
    with pytest.raises(RuntimeError, match="requires successful preflight"):
        provider.build_contribution(request)
    result = provider.preflight(request)
    assert result.status is DevicePreflightStatus.READY, result.reason_codes
    assert dict(result.observations)["toolkit.version"] == "12.4"
    assert runner.calls == 1
    provider.build_contribution(request)


def test_a_probe_path_in_the_config_still_runs_the_probe(probes: ProbeFactory) -> None:
    executable = probes.printing(report())
    provider = CudaDeviceProvider(CudaProviderConfig(probe_path=executable))
    options = ready_options(executable)
    del options["probe_executable"]
    result = provider.preflight(request_for(RAW, options))
    assert result.status is DevicePreflightStatus.READY, result.reason_codes
