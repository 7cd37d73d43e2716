"""Configuration bounds, the report schema and the toolkit inspector."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from cuda_support import SPEC, report

from rextio_device_cuda import CudaProviderConfig
from rextio_device_cuda.config import (
    CUDA_DRIVER_VERSION_FLOOR,
    CUDA_TOOLKIT_RUNTIME_VERSION_FLOOR,
)
from rextio_device_cuda.probe import (
    CudaDeviceRecord,
    CudaProbeError,
    FilesystemToolkitInspector,
    ProbeTarget,
    expected_probe_target,
    parse_probe_report,
)


def test_floors() -> None:
    assert CUDA_DRIVER_VERSION_FLOOR == 12000
    assert CUDA_TOOLKIT_RUNTIME_VERSION_FLOOR == (12, 0)
    config = CudaProviderConfig(minimum_driver_version=12800, minimum_toolkit_version=(12, 8))
    assert config.minimum_driver_version == 12800


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"probe_path": "/opt/probe"}, TypeError, "probe_path"),
        ({"toolkit_root": "/opt/cuda"}, TypeError, "toolkit_root"),
        ({"device_ordinal": 1024}, ValueError, "device_ordinal"),
        ({"device_ordinal": -1}, ValueError, "device_ordinal"),
        ({"device_ordinal": True}, ValueError, "device_ordinal"),
        ({"sm": "sm_8"}, ValueError, "sm_NN"),
        ({"sm": "SM_80"}, ValueError, "sm_NN"),
        ({"minimum_driver_version": 11999}, ValueError, "at or above 12000"),
        ({"minimum_driver_version": 100000}, ValueError, "at most 99999"),
        ({"minimum_driver_version": 12000.0}, ValueError, "integer"),
        ({"minimum_toolkit_version": (11, 8)}, ValueError, "at or above 12.0"),
        ({"minimum_toolkit_version": (12, 100)}, ValueError, "from 0 to 99"),
        ({"minimum_toolkit_version": (12,)}, ValueError, "tuple"),
        ({"minimum_toolkit_version": [12, 0]}, ValueError, "tuple"),
        ({"minimum_toolkit_version": (11, 99)}, ValueError, "at or above 12.0"),
        ({"minimum_toolkit_version": (12, True)}, ValueError, "tuple"),
        ({"minimum_driver_version": 0}, ValueError, "at or above 12000"),
        ({"minimum_driver_version": True}, ValueError, "integer"),
        ({"device_ordinal": "0"}, ValueError, "device_ordinal"),
        ({"sm": 80}, ValueError, "sm_NN"),
        ({"sm": "sm_80\n"}, ValueError, "sm_NN"),
        ({"probe_path": PurePosixPath("/opt/probe")}, TypeError, "probe_path"),
    ],
)
def test_config_rejects(kwargs: dict[str, Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        CudaProviderConfig(**kwargs)


def test_config_accepts_sm_nnn_and_bounds() -> None:
    assert CudaProviderConfig(sm="sm_100", device_ordinal=1023).sm == "sm_100"


def _invalid(value: Any) -> str:
    data = value if isinstance(value, bytes) else json.dumps(value).encode()
    with pytest.raises(CudaProbeError) as caught:
        parse_probe_report(data)
    return caught.value.reason_code


def test_valid_report_parses() -> None:
    parsed = parse_probe_report(json.dumps(report(sms=("sm_80", "sm_90"))).encode())
    assert [row.sm for row in parsed.devices] == ["sm_80", "sm_90"]
    assert parsed.support_claim is False


@pytest.mark.parametrize(
    "data",
    [b"", b"\xff\xfe", b"{", b"x" * 65537, b'{"a": NaN}', b"[Infinity]"],
    ids=["empty", "utf8", "json", "size", "nan", "infinity"],
)
def test_output_invalid(data: bytes) -> None:
    assert _invalid(data) == "PROBE_OUTPUT_INVALID"


def _device(**changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict(report()["devices"][0])
    row.update(changes)
    return row


SCHEMA_CASES: list[tuple[str, Callable[[], Any]]] = [
    ("array", lambda: []),
    ("extra-key", lambda: dict(report(), extra=1)),
    ("missing-key", lambda: {k: v for k, v in report().items() if k != "cuda_result"}),
    ("schema-2", lambda: report(schema_version="2")),
    ("schema-int", lambda: report(schema_version=1)),
    ("probe-name", lambda: report(probe="other")),
    ("support-claim", lambda: report(support_claim=True)),
    ("bool-as-int", lambda: report(driver_version=True)),
    ("driver-low", lambda: report(driver_version=999)),
    ("driver-high", lambda: report(driver_version=100000)),
    ("count-bool", lambda: report(device_count=True)),
    ("cuda-result-bool", lambda: report(cuda_result=False)),
    ("cuda-result-int64", lambda: report(cuda_result=2**31)),
    ("status", lambda: report(status="done")),
    ("reason-lower", lambda: report(status="error", reason_code="bad", devices=[], device_count=0)),
    ("complete-with-reason", lambda: report(reason_code="X")),
    ("complete-result", lambda: report(cuda_result=1)),
    ("complete-count", lambda: report(device_count=2)),
    ("complete-no-devices", lambda: report(sms=())),
    ("incomplete-rows", lambda: report(status="error", reason_code="CU_INIT_FAILED")),
    ("incomplete-no-reason", lambda: report(status="error", devices=[], device_count=0)),
    ("target-field", lambda: report(target=("linux", "x86 64", "gnu"))),
    (
        "target-extra",
        lambda: dict(
            report(), target={"os": "linux", "arch": "x86_64", "environment": "gnu", "x": "y"}
        ),
    ),
    ("ordinal", lambda: report() | {"devices": [_device(ordinal=1)]}),
    ("name-path", lambda: report() | {"devices": [_device(name="/dev/nvidia0")]}),
    ("name-windows-path", lambda: report() | {"devices": [_device(name="C:\\gpu")]}),
    ("name-control", lambda: report() | {"devices": [_device(name="GPU\n")]}),
    ("name-long", lambda: report() | {"devices": [_device(name="G" * 161)]}),
    ("sm-mismatch", lambda: report() | {"devices": [_device(sm="sm_86")]}),
    ("major", lambda: report() | {"devices": [_device(compute_major=0, sm="sm_00")]}),
    # Valid JSON, out of range: a 5000-digit integer is a schema fault, not bad JSON.
    ("huge-integer", lambda: report(cuda_result=10**5000)),
    ("huge-negative", lambda: report(cuda_result=-(10**5000))),
    ("device-extra", lambda: report() | {"devices": [_device(extra=1)]}),
    ("device-missing", lambda: report() | {"devices": [{"ordinal": 0}]}),
    ("target-missing", lambda: dict(report(), target={"os": "linux", "arch": "x86_64"})),
    ("devices-not-list", lambda: report() | {"devices": {}}),
    ("name-unc", lambda: report() | {"devices": [_device(name="\\\\host\\share")]}),
    ("name-empty", lambda: report() | {"devices": [_device(name="")]}),
]


@pytest.mark.parametrize(
    "make", [case for _, case in SCHEMA_CASES], ids=[n for n, _ in SCHEMA_CASES]
)
def test_schema_invalid(make: Callable[[], Any]) -> None:
    value = make()
    # json.dumps refuses integers beyond Python's digit limit; write them by hand.
    data = json.dumps(value).encode() if not _has_huge(value) else _huge(value)
    assert _invalid(data) == "PROBE_SCHEMA_INVALID"


def _has_huge(value: dict[str, Any] | list[Any]) -> bool:
    return isinstance(value, dict) and abs(value.get("cuda_result") or 0) > 2**64


def _huge(value: dict[str, Any]) -> bytes:
    sign = "-" if value["cuda_result"] < 0 else ""
    text = json.dumps(dict(value, cuda_result=0)).replace(
        '"cuda_result": 0', f'"cuda_result": {sign}{"9" * 5000}'
    )
    return text.encode()


def test_missing_root_keys_are_schema_invalid() -> None:
    for key in report():
        assert _invalid({k: v for k, v in report().items() if k != key}) == (
            "PROBE_SCHEMA_INVALID"
        ), key


def test_duplicate_keys_are_schema_invalid() -> None:
    text = json.dumps(report())
    assert (
        _invalid(text.replace('"probe":', '"probe": "x", "probe":', 1).encode())
        == "PROBE_SCHEMA_INVALID"
    )


def test_directly_constructed_records_validate() -> None:
    with pytest.raises(CudaProbeError) as caught:
        CudaDeviceRecord(ordinal=0, name="GPU", compute_major=8, compute_minor=0, sm="sm_86")
    assert caught.value.reason_code == "PROBE_SCHEMA_INVALID"
    with pytest.raises(CudaProbeError):
        ProbeTarget(os="linux", arch="", environment="gnu")
    with pytest.raises(CudaProbeError):
        CudaDeviceRecord(ordinal=True, name="GPU", compute_major=8, compute_minor=0, sm="sm_80")


@pytest.mark.parametrize("name", ["GPU\u00a0X", "GPU\u200bX", "Ger\u00e4t \u2603"])
def test_device_names_may_hold_any_non_control_character(name: str) -> None:
    # The probe removes exactly the control characters (category Cc); nothing else.
    record = CudaDeviceRecord(ordinal=0, name=name, compute_major=8, compute_minor=0, sm="sm_80")
    assert record.name == name


@pytest.mark.parametrize("name", ["GPU\x85", "GPU\x7f", "\x00GPU"])
def test_device_names_with_control_characters_are_refused(name: str) -> None:
    with pytest.raises(CudaProbeError) as caught:
        CudaDeviceRecord(ordinal=0, name=name, compute_major=8, compute_minor=0, sm="sm_80")
    assert caught.value.reason_code == "PROBE_SCHEMA_INVALID"


def test_probe_error_rejects_malformed_codes() -> None:
    with pytest.raises(ValueError, match="reason_code"):
        CudaProbeError("lowercase")
    assert CudaProbeError("PROBE_TIMEOUT").reason_code == "PROBE_TIMEOUT"


def test_expected_probe_target() -> None:
    assert expected_probe_target("x86_64-pc-windows-msvc") == ProbeTarget(
        "windows", "x86_64", "msvc"
    )
    with pytest.raises(CudaProbeError) as caught:
        expected_probe_target("riscv64gc-unknown-linux-gnu")
    assert caught.value.reason_code == "UNSUPPORTED_TARGET"


def _inspect(root: Path, triple: str = "x86_64-unknown-linux-gnu") -> str:
    with pytest.raises(CudaProbeError) as caught:
        FilesystemToolkitInspector(root).inspect(triple)
    return caught.value.reason_code


def test_toolkit_inspector_accepts_targets_layout(
    tmp_path: Path, make_toolkit: Callable[..., Path]
) -> None:
    root = make_toolkit("12.6", components=False)
    (root / "include" / "cuda.h").write_text("")
    library = root / "targets" / "aarch64-linux" / "lib"
    library.mkdir(parents=True)
    (library / "libcudart.so").write_bytes(b"")
    inspected = FilesystemToolkitInspector(root).inspect("aarch64-unknown-linux-gnu")
    assert inspected.components == ("cuda-header", "cuda-runtime")
    assert _inspect(root) == "TOOLKIT_COMPONENT_MISSING"  # x86_64 has no runtime here


def test_toolkit_inspector_windows_components(make_toolkit: Callable[..., Path]) -> None:
    root = make_toolkit("12.8", components=False)
    (root / "include" / "cuda.h").write_text("")
    assert _inspect(root, "x86_64-pc-windows-msvc") == "TOOLKIT_COMPONENT_MISSING"
    (root / "bin").mkdir()
    (root / "bin" / "cudart64_12.dll").write_bytes(b"MZ")
    (root / "lib" / "x64").mkdir(parents=True)
    (root / "lib" / "x64" / "cudart.lib").write_bytes(b"")
    inspected = FilesystemToolkitInspector(root).inspect("x86_64-pc-windows-msvc")
    assert inspected.components == ("cuda-header", "cuda-import-library", "cuda-runtime")


def test_toolkit_inspector_refusals(tmp_path: Path, make_toolkit: Callable[..., Path]) -> None:
    assert _inspect(Path("relative")) == "TOOLKIT_PATH_NOT_ABSOLUTE"
    # Strict resolution of a path with a NUL fails: not found, not a ValueError.
    assert _inspect(tmp_path / "cuda\0root") == "TOOLKIT_NOT_FOUND"
    assert _inspect(tmp_path / "missing") == "TOOLKIT_NOT_FOUND"
    a_file = tmp_path / "file"
    a_file.write_text("")
    assert _inspect(a_file) == "TOOLKIT_NOT_FOUND"
    root = make_toolkit("12.4", name="big")
    (root / "version.json").write_text(" " * 65537)
    assert _inspect(root) == "TOOLKIT_VERSION_INVALID"
    (root / "version.json").write_text(json.dumps({"cuda": {"version": "12.4.1234"}}))
    assert _inspect(root) == "TOOLKIT_VERSION_INVALID"
    (root / "version.json").write_text(json.dumps({"cuda": {}}))
    assert _inspect(root) == "TOOLKIT_VERSION_UNAVAILABLE"
    (root / "version.json").write_text("not json")
    assert _inspect(root) == "TOOLKIT_VERSION_UNAVAILABLE"
    (root / "version.json").write_text(json.dumps({"cuda": {"version": "12.4"}}))
    assert _inspect(root, "riscv64gc-unknown-linux-gnu") == "UNSUPPORTED_TARGET"
    (root / "include" / "cuda.h").unlink()
    (root / "include" / "cuda.h").mkdir()
    assert _inspect(root) == "TOOLKIT_COMPONENT_MISSING"


def test_every_probe_reason_code_is_explained() -> None:
    # The codes this package's probe emits; preflight passes any schema-valid one.
    probe_codes = SPEC["probe_report"]["reason_codes"]
    assert probe_codes == sorted(set(probe_codes))
    assert set(probe_codes) <= set(SPEC["reason_codes"])

