"""The reviewed loader (docs/interfaces.md, The loader seam) against the attacks an
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
    preflight_argv,
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


# -- the loader's rules, each refusal naming its rule ---------------------------

NIXBLD_GID = 30000
COMPAT = "/usr/local/cuda-12.8/compat"


def _refused_by(run: NamespaceRun, rule: str) -> None:
    _refused(run)
    # stderr names the rule that refused the image, for a person; the
    # record names it too (a rule, never a path) for the provider's line.
    assert f"rule `{rule}`" in run.stderr, run.stderr
    assert run.record()["refusing_rule"] == rule, run.stdout


def _complete(run: NamespaceRun) -> None:
    assert run.returncode == 0, run.stderr
    parse_probe_report(run.stdout)
    assert run.record()["status"] == "probe-complete", (run.stdout, run.stderr)
    assert run.calls, "the driver's calls are logged"


@pytest.mark.parametrize(
    "steps",
    [
        # The Nix store's mode: root:nixbld 1775.
        (f"chgrp {NIXBLD_GID} /usr/local/nvidia", "chmod 1775 /usr/local/nvidia"),
        ("chmod 1777 /usr/local/nvidia",),
        ("chmod 1777 /usr/local/nvidia/lib64",),
        ("chmod 1777 /usr/local",),
    ],
    ids=["nix-store-1775", "sticky-1777", "image-directory-1777", "usr-local-1777"],
)
def test_a_sticky_root_owned_writable_directory_above_root_entries_passes(
    sim_host: SimulatedHost, steps: tuple[str, ...]
) -> None:
    _complete(
        sim_host.run(DriverLayout(config=TWO_DEVICES, extra_steps=steps), [sim_host.native.probe])
    )


@pytest.mark.parametrize(
    ("steps", "rule"),
    [
        (("chmod 0777 /usr/local/nvidia",), "writable-directory"),
        (
            (f"chgrp {NIXBLD_GID} /usr/local/nvidia", "chmod 0775 /usr/local/nvidia"),
            "writable-directory",
        ),
        (("chmod 0757 /usr/local/nvidia/lib64",), "writable-directory"),
        # Sticky but not root's.
        ((f"chown {USER_UID} /usr/local/nvidia", "chmod 1777 /usr/local/nvidia"), "owner"),
        # Sticky and root's, but the entry below is not root's: a directory,
        # the image itself, or the installers' link.
        (("chmod 1777 /usr/local/nvidia", f"chown {USER_UID} {SIM_LIB_DIR}"), "writable-directory"),
        ((f"chmod 1777 {SIM_LIB_DIR}", f"chown {USER_UID} {REVIEWED_IMAGE}"), "writable-directory"),
        (
            (
                f"mv {REVIEWED_IMAGE} {SIM_LIB_DIR}/libcuda.so.550.54.14",
                f"ln -s libcuda.so.550.54.14 {REVIEWED_IMAGE}",
                f"chmod 1777 {SIM_LIB_DIR}",
                f"chown -h {USER_UID} {REVIEWED_IMAGE}",
            ),
            "writable-directory",
        ),
    ],
    ids=[
        "world-writable",
        "group-writable-nixbld",
        "image-directory-0757",
        "sticky-not-roots",
        "sticky-above-a-users-directory",
        "sticky-above-a-users-image",
        "sticky-above-a-users-link",
    ],
)
def test_a_writable_directory_is_refused_unless_sticky_roots_and_above_root_entries(
    sim_host: SimulatedHost, steps: tuple[str, ...], rule: str
) -> None:
    layout = DriverLayout(config=TWO_DEVICES, extra_steps=steps)
    _refused_by(sim_host.run(layout, [sim_host.native.probe]), rule)


def _read_only(directory: str) -> tuple[str, str]:
    return (f"mount --bind {directory} {directory}", f"mount -o remount,bind,ro {directory}")


def test_a_second_hard_link_passes_on_a_read_only_mount(sim_host: SimulatedHost) -> None:
    # OSTree's /usr, an optimised read-only Nix store: nobody can add a link.
    # The second name lies outside the read-only bind, on the same filesystem.
    steps = (f"ln {REVIEWED_IMAGE} /usr/local/nvidia/second", *_read_only(SIM_LIB_DIR))
    _complete(
        sim_host.run(DriverLayout(config=TWO_DEVICES, extra_steps=steps), [sim_host.native.probe])
    )


@pytest.mark.parametrize(
    "steps",
    [
        # A read-only mount elsewhere does not count: the image's own mount decides.
        (
            f"ln {REVIEWED_IMAGE} {SIM_LIB_DIR}/second",
            "install -d -m 0755 /usr/local/nvidia/lib",
            *_read_only("/usr/local/nvidia/lib"),
        ),
        # A read-only directory whose link leads to the image on a writable mount.
        (
            "install -d -m 0755 /usr/local/nvidia/lib",
            f"mv {REVIEWED_IMAGE} /usr/local/nvidia/lib/libcuda.so.1",
            "ln /usr/local/nvidia/lib/libcuda.so.1 /usr/local/nvidia/lib/second",
            f"ln -s /usr/local/nvidia/lib/libcuda.so.1 {REVIEWED_IMAGE}",
            *_read_only(SIM_LIB_DIR),
        ),
    ],
    ids=["read-only-elsewhere", "read-only-link-to-a-writable-mount"],
)
def test_a_second_hard_link_on_a_writable_mount_is_refused(
    sim_host: SimulatedHost, steps: tuple[str, ...]
) -> None:
    layout = DriverLayout(config=TWO_DEVICES, extra_steps=steps)
    _refused_by(sim_host.run(layout, [sim_host.native.probe]), "links")


def _compat(*more: str) -> DriverLayout:
    """The image only in NVIDIA's compat directory, reached as /usr/local/cuda/compat."""
    return DriverLayout(
        config=TWO_DEVICES,
        install="absent",
        extra_steps=(
            f"install -d -m 0755 /usr/local/cuda-12.8 {COMPAT}",
            f"install -m 0644 {{image}} {COMPAT}/libcuda.so.570.124.06",
            f"ln -s libcuda.so.570.124.06 {COMPAT}/libcuda.so.1",
            "ln -s /usr/local/cuda-12.8 /usr/local/cuda",
            *more,
        ),
    )


@pytest.mark.parametrize("driver_root", ["/usr/local/cuda/compat", COMPAT, f"{COMPAT}/"])
def test_a_driver_root_outside_the_reviewed_roots_loads_only_when_given(
    sim_host: SimulatedHost, driver_root: str
) -> None:
    _complete(sim_host.run(_compat(), [sim_host.native.probe, "--driver-root", driver_root]))
    # Without it the search finds nothing: the compat directory is no reviewed root.
    plain = sim_host.run(_compat(), [sim_host.native.probe])
    assert plain.record()["reason_code"] == "LIBCUDA_SO_NOT_FOUND"
    assert plain.calls == ()


@pytest.mark.parametrize("driver_root", ["/usr/local/empty", "/usr/local/missing", REVIEWED_IMAGE])
def test_a_driver_root_is_the_only_place_tried(sim_host: SimulatedHost, driver_root: str) -> None:
    # A loadable driver sits at the reviewed path, and is never tried.
    layout = DriverLayout(config=TWO_DEVICES, extra_steps=("install -d -m 0755 /usr/local/empty",))
    run = sim_host.run(layout, [sim_host.native.probe, "--driver-root", driver_root])
    assert run.returncode == 0, run.stderr
    record = run.record()
    assert (record["status"], record["reason_code"], record["driver_loaded"]) == (
        "unavailable",
        "LIBCUDA_SO_NOT_FOUND",
        False,
    ), record
    assert run.calls == ()


@pytest.mark.parametrize(
    ("more", "rule"),
    [
        ((f"chown {USER_UID} {COMPAT}",), "owner"),
        ((f"chown {USER_UID} /usr/local/cuda-12.8",), "owner"),
        ((f"chown {USER_UID} {COMPAT}/libcuda.so.570.124.06",), "owner"),
        ((f"chown -h {USER_UID} {COMPAT}/libcuda.so.1",), "owner"),
        ((f"chmod 0777 {COMPAT}",), "writable-directory"),
        ((f"chmod 0666 {COMPAT}/libcuda.so.570.124.06",), "mode"),
        ((f"ln {COMPAT}/libcuda.so.570.124.06 /usr/local/second",), "links"),
        (
            (
                "install -d -m 0755 /usr/local/outside",
                f"mv {COMPAT}/libcuda.so.570.124.06 /usr/local/outside/",
                f"ln -sf /usr/local/outside/libcuda.so.570.124.06 {COMPAT}/libcuda.so.1",
            ),
            "location",
        ),
        ((f"rm {COMPAT}/libcuda.so.1", f"mkfifo -m 0644 {COMPAT}/libcuda.so.1"), "regular-file"),
    ],
    ids=[
        "directory-not-roots",
        "parent-not-roots",
        "image-not-roots",
        "link-not-roots",
        "world-writable-directory",
        "world-writable-image",
        "second-link",
        "link-out-of-the-driver-root",
        "fifo",
    ],
)
def test_a_driver_root_gets_every_other_check(
    sim_host: SimulatedHost, more: tuple[str, ...], rule: str
) -> None:
    run = sim_host.run(
        _compat(*more), [sim_host.native.probe, "--driver-root", "/usr/local/cuda/compat"]
    )
    _refused_by(run, rule)


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        (["--driver-root", "usr/local/cuda/compat"], "DRIVER_ROOT_NOT_ABSOLUTE"),
        (["--driver-root", "compat"], "DRIVER_ROOT_NOT_ABSOLUTE"),
        (["--driver-root", ""], "DRIVER_ROOT_NOT_ABSOLUTE"),
        (["--driver-root"], "INVALID_ARGUMENTS"),
        ([f"--driver-root={COMPAT}"], "INVALID_ARGUMENTS"),
        (["--driver-root", COMPAT, COMPAT], "INVALID_ARGUMENTS"),
        (["--device", "0"], "INVALID_ARGUMENTS"),
        (["--help"], "INVALID_ARGUMENTS"),
        ([COMPAT], "INVALID_ARGUMENTS"),
    ],
)
def test_any_other_argument_is_one_error_record_and_loads_nothing(
    sim_host: SimulatedHost, arguments: list[str], reason: str
) -> None:
    # A loadable driver at the reviewed path and in the compat directory.
    run = sim_host.run(
        _compat(f"install -m 0644 {{image}} {REVIEWED_IMAGE}"), [sim_host.native.probe, *arguments]
    )
    assert run.returncode == 0, run.stderr
    parse_probe_report(run.stdout)
    record = run.record()
    assert {key: record[key] for key in ("status", "reason_code", "driver_loaded")} == {
        "status": "error",
        "reason_code": reason,
        "driver_loaded": False,
    }, record
    assert (record["driver_version"], record["device_count"], record["devices"]) == (None, None, [])
    assert run.calls == ()


def test_preflight_passes_driver_root_to_the_probe_and_records_only_its_digest(
    sim_host: SimulatedHost,
) -> None:
    argv = [
        *preflight_argv(sys.executable, sim_host.native.probe),
        "--driver-root",
        "/usr/local/cuda/compat",
    ]
    run = sim_host.run(_compat(), argv)
    assert run.returncode == 0, (run.stdout, run.stderr)
    plan = json.loads(run.stdout)
    assert plan["preflight"]["status"] == "ready", plan
    # The option's name reaches the records, its value only as a digest.
    assert "driver_root" in run.stdout
    assert "/usr/local/cuda" not in run.stdout
    # The probe that ran was told where to look: the compat image loaded.
    assert any(call.startswith("cuDeviceGetCount") for call in run.calls), run.calls


@pytest.mark.parametrize("driver_root", ["usr/local/cuda/compat", "compat", "./x", "~/compat"])
def test_preflight_refuses_a_relative_driver_root_before_running_anything(
    sim_host: SimulatedHost, driver_root: str
) -> None:
    # The command checks its argument itself (exit 2); through rextio.toml the
    # provider refuses the same value with DRIVER_ROOT_NOT_ABSOLUTE.
    argv = [*preflight_argv(sys.executable, sim_host.native.probe), "--driver-root", driver_root]
    run = sim_host.run(_compat(), argv)
    assert (run.returncode, run.stdout) == (2, ""), run.stderr
    assert run.stderr.splitlines()[-1] == (
        f"error: argument --driver-root: must be an absolute path, not {driver_root!r}"
    )
    assert run.calls == ()
