"""The manual host of docs/manual-host.md, built from the installed wheel
alone (manual_host.py), run beside the simulated driver in private mount
namespaces: the runtime's lifetime sequence with its round trip,
every driver call in order and the bytes through device memory; a refused
past-the-end read that makes no driver call; a driver that loses a byte; a
refused group-writable image; an explicit driver root.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from manual_host import (
    COMPLETE,
    LOADED,
    assert_failed_at,
    build_native,
    install_project,
    not_loaded,
)
from sim_namespace import SIM_TMPFS, DriverLayout, NamespaceRun, SimulatedHost, fnv1a64

ONE_DEVICE = ("driver_version=12040", "device=NVIDIA Simulated H100|9|0")
# Printed by the simulated driver's constructor: it shows the image was loaded.
LOAD_MARK = "rextio-sim-image-loaded"
# On device 0: context (created, then popped), its dedicated
# stream, a 4096-byte allocation, synchronize; the round trip (fill, write,
# read back, each synchronized before it returns; the read past the end
# makes no call at all); then allocation, stream and context released in
# that order; every child call between a push and a pop.
LIFETIME_CALLS = [
    "cuInit",
    "cuDeviceGet",
    "cuCtxCreate_v2",
    "cuCtxPopCurrent_v2",
    *("cuCtxPushCurrent_v2", "cuStreamCreate", "cuCtxPopCurrent_v2"),
    *("cuCtxPushCurrent_v2", "cuMemAlloc_v2", "cuCtxPopCurrent_v2"),
    *("cuCtxPushCurrent_v2", "cuStreamSynchronize", "cuCtxPopCurrent_v2"),
    *("cuCtxPushCurrent_v2", "cuMemsetD8Async", "cuStreamSynchronize", "cuCtxPopCurrent_v2"),
    *("cuCtxPushCurrent_v2", "cuMemcpyHtoDAsync_v2", "cuStreamSynchronize", "cuCtxPopCurrent_v2"),
    *("cuCtxPushCurrent_v2", "cuMemcpyDtoHAsync_v2", "cuStreamSynchronize", "cuCtxPopCurrent_v2"),
    *("cuCtxPushCurrent_v2", "cuMemFree_v2", "cuCtxPopCurrent_v2"),
    *("cuCtxPushCurrent_v2", "cuStreamDestroy_v2", "cuCtxPopCurrent_v2"),
    "cuCtxDestroy_v2",
]
# A directory outside every reviewed root, as NVIDIA's forward-compatibility
# package installs it, below the namespace's own /usr/local.
COMPAT_ROOT = f"{SIM_TMPFS}/cuda-12.4/compat"
# The README program's 4096 bytes.
WRITTEN = bytes(index % 251 + 1 for index in range(4096))


@pytest.fixture(scope="session")
def manual_host(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_native(install_project(tmp_path_factory.mktemp("manual-host") / "project"))


def _symbols(run: NamespaceRun) -> list[str]:
    return [line.split(" ", 1)[0] for line in run.calls]


def _call(run: NamespaceRun, symbol: str) -> str:
    (line,) = [line for line in run.calls if line.split(" ", 1)[0] == symbol]
    return line


def _assert_lifetime_sequence(run: NamespaceRun) -> None:
    assert (run.returncode, run.stdout) == (0, f"{LOADED}\n{COMPLETE}\n"), run.stderr
    assert _symbols(run) == LIFETIME_CALLS, run.calls
    # Every call succeeded; the allocation was 4096 bytes; nothing leaked.
    assert all(line.split(" -> ", 1)[1].split(" ", 1)[0] == "0" for line in run.calls), run.calls
    assert "bytes=4096" in _call(run, "cuMemAlloc_v2").split(" ")
    assert run.calls[-1].endswith(" -> 0 leaked_streams=0 leaked_allocations=0"), run.calls
    # The bytes: the whole allocation zeroed, the 4096 bytes written, held in
    # device memory until the free, and the same bytes read back.
    pointer = _call(run, "cuMemAlloc_v2").rsplit(" pointer=", 1)[1]
    assert f"pointer={pointer} value=0 bytes=4096 " in _call(run, "cuMemsetD8Async")
    digest = f" -> 0 fnv1a64={fnv1a64(WRITTEN)}"
    for symbol in ("cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2"):
        assert _call(run, symbol).startswith(f"{symbol} pointer={pointer} bytes=4096 "), run.calls
        assert _call(run, symbol).endswith(digest), run.calls
    assert _call(run, "cuMemFree_v2").endswith(digest), run.calls


def test_the_manual_host_runs_the_lifetime_sequence_in_order(
    sim_host: SimulatedHost, manual_host: Path
) -> None:
    run = sim_host.run(DriverLayout(config=ONE_DEVICE), [manual_host])
    _assert_lifetime_sequence(run)


def test_the_manual_host_fails_over_a_driver_that_loses_a_byte(
    sim_host: SimulatedHost, manual_host: Path
) -> None:
    run = sim_host.run(DriverLayout(config=(*ONE_DEVICE, "corrupt_read=4000")), [manual_host])
    mismatch = "failed: the bytes read back differ from those written"
    assert (run.returncode, run.stdout) == (1, f"{LOADED}\n{mismatch}\n"), run.stderr
    # The same calls, all released; device memory kept what was written.
    assert _symbols(run) == LIFETIME_CALLS, run.calls
    delivered = bytearray(WRITTEN)
    delivered[4000] ^= 0xFF
    assert _call(run, "cuMemcpyDtoHAsync_v2").endswith(f" fnv1a64={fnv1a64(bytes(delivered))}")
    assert _call(run, "cuMemFree_v2").endswith(f" fnv1a64={fnv1a64(WRITTEN)}")


def test_the_manual_host_reports_cu_init_without_a_device(
    sim_host: SimulatedHost, manual_host: Path
) -> None:
    run = sim_host.run(DriverLayout(config=("driver_version=12040",)), [manual_host])
    assert run.returncode == 1, run.stdout + run.stderr
    assert_failed_at(run.stdout, "cuInit", 100)
    assert _symbols(run) == ["cuInit"]


def test_the_manual_host_refuses_a_group_writable_image(
    sim_host: SimulatedHost, manual_host: Path
) -> None:
    layout = DriverLayout(config=(*ONE_DEVICE, f"print_at_load={LOAD_MARK}"), image_mode=0o664)
    run = sim_host.run(layout, [manual_host])
    assert (run.returncode, run.stdout) == (1, f"{not_loaded('LIBCUDA_SO_LOAD_FAILED')}\n")
    # The loader's error names the rule that refused the image.
    assert "rule `mode`" in run.stderr, run.stderr
    # Nothing was loaded: no constructor ran, no driver call was made.
    assert LOAD_MARK not in run.stdout + run.stderr
    assert run.calls == ()


def _in_compat_root() -> DriverLayout:
    return DriverLayout(
        config=ONE_DEVICE,
        install="absent",
        extra_steps=(
            f"install -d -m 0755 {COMPAT_ROOT}",
            f"install -m 0644 {{image}} {COMPAT_ROOT}/libcuda.so.1",
        ),
    )


def test_the_manual_host_loads_from_an_explicit_driver_root(
    sim_host: SimulatedHost, manual_host: Path
) -> None:
    run = sim_host.run(_in_compat_root(), [manual_host, "--driver-root", COMPAT_ROOT])
    _assert_lifetime_sequence(run)


def test_without_the_driver_root_the_search_alone_finds_nothing(
    sim_host: SimulatedHost, manual_host: Path
) -> None:
    run = sim_host.run(_in_compat_root(), [manual_host])
    assert (run.returncode, run.stdout) == (1, f"{not_loaded('LIBCUDA_SO_NOT_FOUND')}\n")
    assert run.calls == ()


def test_a_relative_driver_root_is_refused_before_any_load(
    sim_host: SimulatedHost, manual_host: Path
) -> None:
    run = sim_host.run(_in_compat_root(), [manual_host, "--driver-root", "cuda-12.4/compat"])
    assert (run.returncode, run.stdout) == (1, f"{not_loaded('DRIVER_ROOT_NOT_ABSOLUTE')}\n")
    assert run.calls == ()
