"""The trusted loader (contract §6, beyond 0.1.0) against the attacks an
adversarial review found: foreign ownership at each level, extra hard links,
non-regular files, a rename race, and a driver that prints to stdout.

Every refused image is a working copy of the simulated driver, so a refusal
is the loader's decision, never a load failure; a refused copy that did get
loaded would say so (its renamed export makes the report
REQUIRED_SYMBOL_MISSING, or its calls appear in the log).
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from sim_namespace import (
    REVIEWED_IMAGE,
    SIM_LIB_DIR,
    DriverLayout,
    NamespaceRun,
    SimulatedHost,
    rename_export,
)

from rextio_device_cuda.probe import parse_probe_report

TWO_DEVICES = (
    "driver_version=12040",
    "device=NVIDIA Simulated A100|8|0",
    "device=NVIDIA Simulated L4|8|9",
)
USER_UID = 1000
RACE_RUNS = 500
SWAPPED = f"{SIM_LIB_DIR}/swapped"
RACE_SCRIPT = Path(__file__).resolve().parent / "rename_race.py"


def _refused(run: NamespaceRun) -> None:
    assert run.returncode == 0, run.stderr
    parse_probe_report(run.stdout)
    record = run.record()
    assert (record["status"], record["reason_code"], record["driver_loaded"]) == (
        "unavailable",
        "LIBCUDA_SO_LOAD_FAILED",
        False,
    ), record
    # None of the refused image's code ran.
    assert run.calls == ()


@pytest.mark.parametrize(
    "owned_by_user",
    ["/usr/local", "/usr/local/nvidia", SIM_LIB_DIR, REVIEWED_IMAGE],
)
def test_refuses_a_foreign_owner_at_every_level_in_reach(
    sim_host: SimulatedHost, owned_by_user: str
) -> None:
    # Modes stay owner-only (0755/0644): ownership alone decides.
    layout = DriverLayout(
        config=TWO_DEVICES, extra_steps=(f"chown {USER_UID} {shlex.quote(owned_by_user)}",)
    )
    _refused(sim_host.run(layout, [sim_host.native.probe]))


def test_refuses_a_link_owned_by_another_user(sim_host: SimulatedHost) -> None:
    layout = DriverLayout(
        config=TWO_DEVICES,
        install="link-inside",
        extra_steps=(f"chown -h {USER_UID} {REVIEWED_IMAGE}",),
    )
    _refused(sim_host.run(layout, [sim_host.native.probe]))


def test_follows_the_installers_link_inside_the_roots(sim_host: SimulatedHost) -> None:
    layout = DriverLayout(config=TWO_DEVICES, image_version="550.54.14")
    run = sim_host.run(layout, [sim_host.native.probe])
    assert run.record()["status"] == "probe-complete"


@pytest.mark.parametrize(
    "second_link",
    [
        # A root-owned image with a second name.
        f"ln {REVIEWED_IMAGE} {SIM_LIB_DIR}/second",
        # The reviewed name is a hard link to a user's file.
        f"mv {REVIEWED_IMAGE} {SIM_LIB_DIR}/users && chown {USER_UID} {SIM_LIB_DIR}/users "
        f"&& ln {SIM_LIB_DIR}/users {REVIEWED_IMAGE}",
    ],
    ids=["second-root-link", "link-to-a-users-file"],
)
def test_refuses_an_image_with_more_than_one_hard_link(
    sim_host: SimulatedHost, second_link: str
) -> None:
    layout = DriverLayout(config=TWO_DEVICES, extra_steps=(second_link,))
    _refused(sim_host.run(layout, [sim_host.native.probe]))


@pytest.mark.parametrize(
    "make",
    [
        f"mkfifo -m 0644 {REVIEWED_IMAGE}",
        f"mkfifo -m 0644 {SIM_LIB_DIR}/libcuda.so.550 && ln -s libcuda.so.550 {REVIEWED_IMAGE}",
        f"mknod -m 0644 {REVIEWED_IMAGE} c 1 3",
        f"mkdir -m 0755 {REVIEWED_IMAGE}",
    ],
    ids=["fifo", "link-to-fifo", "character-device", "directory"],
)
def test_refuses_non_regular_files_without_hanging(sim_host: SimulatedHost, make: str) -> None:
    # A FIFO with no writer blocks whoever opens it for reading: the probe
    # must never get that far (the run's timeout would fail this test).
    layout = DriverLayout(config=TWO_DEVICES, install="absent", extra_steps=(make,))
    _refused(sim_host.run(layout, [sim_host.native.probe]))


@pytest.mark.parametrize("binary", ["probe", "smoke"])
def test_a_printing_driver_leaves_the_json_intact(sim_host: SimulatedHost, binary: str) -> None:
    noise = '{"status": "probe-complete", "printed": "by the driver constructor"}'
    layout = DriverLayout(config=(*TWO_DEVICES, f"print_at_load={noise}"))
    program = sim_host.native.probe if binary == "probe" else sim_host.native.smoke
    arguments = [] if binary == "probe" else ["--device", "0"]
    run = sim_host.run(layout, [program, *arguments])
    record = run.record()
    if binary == "probe":
        parse_probe_report(run.stdout)
        assert record["status"] == "probe-complete"
    else:
        assert (run.returncode, record["status"]) == (0, "smoke-complete")
    # The driver did print, and it went to stderr.
    assert noise in run.stderr.splitlines()
    assert noise not in run.stdout


def _race(sim_host: SimulatedHost, layout: DriverLayout) -> dict[str, Any]:
    run = sim_host.run(
        layout,
        [sys.executable, RACE_SCRIPT, sim_host.native.probe.resolve(), SWAPPED, str(RACE_RUNS)],
    )
    assert run.returncode == 0, run.stderr
    result: dict[str, Any] = json.loads(run.stdout)
    return result


@pytest.mark.parametrize(
    "swapped_in",
    ["world-writable-copy", "user-owned-copy", "link-out-of-the-roots", "fifo"],
)
def test_a_rename_race_never_loads_a_refused_file_and_never_hangs(
    sim_host: SimulatedHost, tmp_path: Path, swapped_in: str
) -> None:
    # The refused file is the simulated driver with one export renamed: if
    # it were ever loaded, that run would report REQUIRED_SYMBOL_MISSING.
    impostor = rename_export(
        sim_host.native.sim_driver, "cuDeviceGetName", tmp_path / "impostor.so"
    )
    quoted = shlex.quote(str(impostor))
    steps = {
        "world-writable-copy": f"install -m 0666 {quoted} {SWAPPED}",
        "user-owned-copy": f"install -m 0644 -o {USER_UID} {quoted} {SWAPPED}",
        "link-out-of-the-roots": f"ln -s {quoted} {SWAPPED}",
        "fifo": f"mkfifo -m 0644 {SWAPPED}",
    }
    result = _race(sim_host, DriverLayout(config=TWO_DEVICES, extra_steps=(steps[swapped_in],)))
    assert result["hangs"] == 0, result
    assert result["unparsable"] == 0, result
    outcomes = result["outcomes"]
    assert sum(outcomes.values()) == RACE_RUNS, result
    # Only the reviewed driver loads (a complete report) or the swapped-in
    # file is refused; never anything else.
    assert set(outcomes) <= {"None", "LIBCUDA_SO_LOAD_FAILED"}, result
    assert result["swapper"].get("swaps", 0) > 0, result


def test_a_printing_driver_with_stderr_closed_still_leaves_the_json_intact(
    sim_host: SimulatedHost,
) -> None:
    # Rust's runtime puts /dev/null on a closed stderr before main, so the
    # driver's output still has somewhere to go other than the report.
    noise = "printed by the driver constructor"
    layout = DriverLayout(config=(*TWO_DEVICES, f"print_at_load={noise}"))
    shell = shutil.which("sh")
    assert shell is not None
    run = sim_host.run(layout, [shell, "-c", '"$0" 2>&-', sim_host.native.probe])
    assert run.record()["status"] == "probe-complete"
    assert noise not in run.stdout
