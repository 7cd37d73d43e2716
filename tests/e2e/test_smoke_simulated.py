"""The real lifetime smoke (runtime crate + reviewed loader) against the simulated driver."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sim_namespace import (
    DriverLayout,
    SimulatedHost,
    assert_no_device_smoke,
    fnv1a64,
    rename_export,
)

from rextio_device_cuda._provider_spec import PROVIDER_SPEC

ONE_DEVICE = ("driver_version=12040", "device=NVIDIA Simulated H100|9|0")
RESOURCE_ORDER = [
    "cuCtxCreate_v2",
    "cuStreamCreate",
    "cuMemAlloc_v2",
    "cuStreamSynchronize",
    # The round trip: each step enqueued on the stream, then synchronized.
    "cuMemsetD8Async",
    "cuStreamSynchronize",
    "cuMemcpyHtoDAsync_v2",
    "cuStreamSynchronize",
    "cuMemcpyDtoHAsync_v2",
    "cuStreamSynchronize",
    "cuMemFree_v2",
    "cuStreamDestroy_v2",
    "cuCtxDestroy_v2",
]
RELEASES = ("cuMemFree_v2", "cuStreamDestroy_v2", "cuCtxDestroy_v2")
ROUND_TRIP_BYTES = 4096


def _pattern() -> bytes:
    """The smoke's round-trip pattern (probe/src/smoke.rs ``pattern_byte``)."""
    return bytes(index % 251 + 1 for index in range(ROUND_TRIP_BYTES))


def _fields(line: str) -> tuple[str, dict[str, str], int, dict[str, str]]:
    """``symbol k=v ... -> result k=v ...`` as (symbol, arguments, result, outputs)."""
    call, _, outcome = line.partition(" -> ")
    symbol, *arguments = call.split(" ")
    result, *outputs = outcome.split(" ")

    def pairs(items: list[str]) -> dict[str, str]:
        return dict(item.split("=", 1) for item in items)

    return symbol, pairs(arguments), int(result), pairs(outputs)


def _smoke(
    sim_host: SimulatedHost, layout: DriverLayout, *arguments: str
) -> tuple[int, dict[str, Any], tuple[str, ...]]:
    run = sim_host.run(layout, [sim_host.native.smoke, *arguments])
    record = run.record()
    assert list(record) == [
        "schema_version",
        "probe",
        "support_claim",
        "target",
        "status",
        "reason_code",
        "cuda_result",
        "device_ordinal",
        "allocation_bytes",
        "kernel_executed",
        "certification_ready",
        "round_trip",
    ]
    # The generated record's keys are the spec's.
    assert list(record) == [field.key for field in PROVIDER_SPEC.smoke.fields]
    assert record["support_claim"] is False
    assert record["kernel_executed"] is False
    assert record["certification_ready"] is False
    assert record["allocation_bytes"] == 4096
    return run.returncode, record, run.calls


def _assert_balanced_and_released_once(calls: tuple[str, ...]) -> dict[str, list[str]]:
    """Every handle released exactly once, children before their context, the
    context stack balanced; returns the symbols in call order per handle."""
    created: dict[str, str] = {}
    released: dict[str, int] = {}
    depth = 0
    order: dict[str, list[str]] = {}
    context = None
    for line in calls:
        symbol, arguments, result, outputs = _fields(line)
        assert result == 0, line
        if symbol == "cuCtxCreate_v2":
            context = outputs["context"]
            created[context] = symbol
            depth += 1
        elif symbol == "cuCtxPushCurrent_v2":
            assert arguments["context"] == context
            depth += 1
        elif symbol == "cuCtxPopCurrent_v2":
            assert outputs["popped"] == context
            depth -= 1
        elif symbol in ("cuStreamCreate", "cuMemAlloc_v2"):
            handle = outputs.get("stream") or outputs["pointer"]
            created[handle] = symbol
        elif symbol in ("cuStreamDestroy_v2", "cuMemFree_v2", "cuCtxDestroy_v2"):
            handle = arguments.get("stream") or arguments.get("pointer") or arguments["context"]
            released[handle] = released.get(handle, 0) + 1
        if symbol.startswith(("cuStream", "cuMem")):
            # Every child operation runs with the smoke's context pushed.
            assert arguments["current"] == context, line
        if symbol == "cuCtxDestroy_v2":
            assert outputs == {"leaked_streams": "0", "leaked_allocations": "0"}
        assert depth in (0, 1), line
        order.setdefault(symbol, []).append(line)
    assert depth == 0, "the caller's context stack must end as it began (empty)"
    assert sorted(released) == sorted(created), "every created handle is released"
    assert set(released.values()) == {1}, "and released exactly once"
    return order


def _resource_calls(calls: tuple[str, ...]) -> list[str]:
    return [line.split(" ", 1)[0] for line in calls if line.split(" ", 1)[0] in RESOURCE_ORDER]


def test_smoke_completes_and_releases_everything_once_in_order(sim_host: SimulatedHost) -> None:
    status, record, calls = _smoke(sim_host, DriverLayout(config=ONE_DEVICE), "--device", "0")
    assert status == 0
    assert record["status"] == "smoke-complete"
    assert record["reason_code"] is None
    assert record["cuda_result"] == 0
    assert record["device_ordinal"] == 0
    assert record["round_trip"] is True
    assert _resource_calls(calls) == RESOURCE_ORDER
    order = _assert_balanced_and_released_once(calls)
    # The bytes: the whole allocation zeroed, the pattern written, the same
    # pattern read back, and it is what device memory held when freed.
    pattern = fnv1a64(_pattern())
    (fill,) = order["cuMemsetD8Async"]
    (written,) = order["cuMemcpyHtoDAsync_v2"]
    (read,) = order["cuMemcpyDtoHAsync_v2"]
    (freed,) = order["cuMemFree_v2"]
    (allocated,) = order["cuMemAlloc_v2"]
    pointer = _fields(allocated)[3]["pointer"]
    stream = _fields(order["cuStreamCreate"][0])[3]["stream"]
    filled = _fields(fill)[1]
    assert (filled["pointer"], filled["value"], filled["bytes"]) == (pointer, "0", "4096")
    assert {_fields(line)[1]["stream"] for line in (fill, written, read)} == {stream}
    for line in (written, read):
        assert (_fields(line)[1]["pointer"], _fields(line)[1]["bytes"]) == (pointer, "4096")
        assert _fields(line)[3] == {"fnv1a64": pattern}, line
    assert _fields(freed)[3] == {"fnv1a64": pattern}
    # The driver environment is set before cuInit, in the smoke as in the probe.
    assert calls[0] == (
        "cuInit flags=0 CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_DISABLE_JIT=1 "
        "CUDA_FORCE_PRELOAD_LIBRARIES=0 -> 0"
    )
    assert (
        "cuMemAlloc_v2 bytes=4096" in calls[[_fields(c)[0] for c in calls].index("cuMemAlloc_v2")]
    )


def test_smoke_allocation_failure_still_releases_stream_and_context(
    sim_host: SimulatedHost,
) -> None:
    layout = DriverLayout(config=(*ONE_DEVICE, "fail=cuMemAlloc_v2:2"))
    status, record, calls = _smoke(sim_host, layout, "--device", "0")
    assert status == 1
    assert record["status"] == "unavailable"
    assert record["reason_code"] == "DEVICE_ALLOCATION_FAILED"
    assert record["cuda_result"] == 2
    assert _resource_calls(calls) == [
        "cuCtxCreate_v2",
        "cuStreamCreate",
        "cuMemAlloc_v2",
        "cuStreamDestroy_v2",
        "cuCtxDestroy_v2",
    ]
    succeeded = tuple(line for line in calls if not line.startswith("cuMemAlloc_v2"))
    _assert_balanced_and_released_once(succeeded)


@pytest.mark.parametrize(
    ("failing", "reason", "still_released"),
    [
        ("cuInit", "CU_INIT_FAILED", []),
        ("cuDeviceGet", "CU_DEVICE_GET_FAILED", []),
        ("cuCtxCreate_v2", "CONTEXT_CREATE_OR_DETACH_FAILED", []),
        ("cuStreamCreate", "STREAM_CREATE_FAILED", ["cuCtxDestroy_v2"]),
        # The context is created but cannot be detached: it is destroyed.
        ("cuCtxPopCurrent_v2", "CONTEXT_CREATE_OR_DETACH_FAILED", ["cuCtxDestroy_v2"]),
        ("cuCtxPushCurrent_v2", "STREAM_CREATE_FAILED", ["cuCtxDestroy_v2"]),
        (
            "cuStreamSynchronize",
            "STREAM_SYNCHRONIZE_FAILED",
            ["cuMemFree_v2", "cuStreamDestroy_v2", "cuCtxDestroy_v2"],
        ),
        # A failed step of the round trip: everything is still released.
        ("cuMemsetD8Async", "DEVICE_COPY_FAILED", [*RELEASES]),
        ("cuMemcpyHtoDAsync_v2", "DEVICE_COPY_FAILED", [*RELEASES]),
        ("cuMemcpyDtoHAsync_v2", "DEVICE_COPY_FAILED", [*RELEASES]),
        # A failed release is never retried; the later releases still run.
        ("cuMemFree_v2", "DEVICE_FREE_FAILED", [*RELEASES]),
        ("cuStreamDestroy_v2", "STREAM_DESTROY_FAILED", [*RELEASES]),
        ("cuCtxDestroy_v2", "CONTEXT_DESTROY_FAILED", [*RELEASES]),
    ],
)
def test_smoke_names_the_failing_step(
    sim_host: SimulatedHost, failing: str, reason: str, still_released: list[str]
) -> None:
    layout = DriverLayout(config=(*ONE_DEVICE, f"fail={failing}:999"))
    status, record, calls = _smoke(sim_host, layout, "--device", "0")
    assert (status, record["reason_code"], record["cuda_result"]) == (1, reason, 999)
    assert record["status"] == "unavailable"
    assert record["device_ordinal"] == 0
    # Only a failed release comes after the bytes came back.
    assert record["round_trip"] is (failing in RELEASES)
    releases = [symbol for symbol in _resource_calls(calls) if symbol in RELEASES]
    assert releases == still_released
    # Nothing is created after the failing step.
    created = [symbol for symbol in _resource_calls(calls) if symbol not in RELEASES]
    failed_at = [line.split(" ", 1)[0] for line in calls].index(failing)
    assert all(
        [line.split(" ", 1)[0] for line in calls].index(symbol) <= failed_at for symbol in created
    )


@pytest.mark.parametrize("lost", [0, 1234, ROUND_TRIP_BYTES - 1])
def test_smoke_detects_a_driver_that_loses_a_byte(sim_host: SimulatedHost, lost: int) -> None:
    layout = DriverLayout(config=(*ONE_DEVICE, f"corrupt_read={lost}"))
    status, record, calls = _smoke(sim_host, layout, "--device", "0")
    assert (status, record["status"]) == (1, "unavailable")
    assert (record["reason_code"], record["cuda_result"]) == ("DEVICE_ROUND_TRIP_MISMATCH", None)
    assert record["round_trip"] is False
    order = _assert_balanced_and_released_once(calls)
    # The driver delivered the pattern with that one byte inverted.
    delivered = bytearray(_pattern())
    delivered[lost] ^= 0xFF
    (read,) = order["cuMemcpyDtoHAsync_v2"]
    assert _fields(read)[3] == {"fnv1a64": fnv1a64(bytes(delivered))}
    assert [symbol for symbol in _resource_calls(calls) if symbol in RELEASES] == [*RELEASES]


def test_smoke_fails_cleanly_without_devices_as_with_the_real_driver(
    sim_host: SimulatedHost,
) -> None:
    run = sim_host.run(
        DriverLayout(config=("driver_version=12040",)), [sim_host.native.smoke, "--device", "0"]
    )
    assert_no_device_smoke(run)
    # It stopped at cuInit: no device handle, no context.
    assert [line.split(" ", 1)[0] for line in run.calls] == ["cuInit"]


def test_smoke_reports_an_absent_device(sim_host: SimulatedHost) -> None:
    status, record, calls = _smoke(sim_host, DriverLayout(config=ONE_DEVICE), "--device", "3")
    assert (status, record["reason_code"], record["device_ordinal"]) == (
        1,
        "CU_DEVICE_GET_FAILED",
        3,
    )
    assert record["cuda_result"] == 101
    assert _resource_calls(calls) == []


def test_smoke_reports_a_missing_runtime_symbol(sim_host: SimulatedHost, tmp_path: Path) -> None:
    image = rename_export(sim_host.native.sim_driver, "cuMemAlloc_v2", tmp_path / "no-alloc.so")
    layout = DriverLayout(config=ONE_DEVICE, image=image)
    status, record, calls = _smoke(sim_host, layout, "--device", "0")
    assert (status, record["reason_code"], record["cuda_result"]) == (
        1,
        "REQUIRED_SYMBOL_MISSING",
        None,
    )
    assert calls == ()
    # stderr names the export the driver lacks (the record carries only the code).
    stderr = sim_host.run(layout, [sim_host.native.smoke, "--device", "0"]).stderr
    assert "REQUIRED_SYMBOL_MISSING" in stderr, stderr
    assert "`cuMemAlloc_v2`" in stderr, stderr
    # The probe needs only the inventory exports, so the same image inventories.
    probe = sim_host.run(layout, [sim_host.native.probe]).record()
    assert probe["status"] == "probe-complete"


def test_smoke_refuses_an_unsafe_image(sim_host: SimulatedHost) -> None:
    layout = DriverLayout(config=ONE_DEVICE, image_mode=0o666)
    status, record, calls = _smoke(sim_host, layout, "--device", "0")
    assert (status, record["reason_code"]) == (1, "LIBCUDA_SO_LOAD_FAILED")
    assert calls == ()


@pytest.mark.parametrize(
    "arguments",
    [
        [],
        ["--device"],
        ["--device", "1024"],
        ["--device", "-1"],
        ["--device", "x"],
        ["--device", " 0"],
        ["--device=0"],
        ["--device", "0", "--extra"],
        ["-d", "0"],
    ],
)
def test_smoke_refuses_bad_arguments_with_exit_2(
    sim_host: SimulatedHost, arguments: list[str]
) -> None:
    status, record, calls = _smoke(sim_host, DriverLayout(config=ONE_DEVICE), *arguments)
    assert status == 2
    assert record["status"] == "unavailable"
    assert record["reason_code"] == "INVALID_ARGUMENTS"
    assert record["device_ordinal"] == -1
    assert record["cuda_result"] is None
    assert calls == ()
