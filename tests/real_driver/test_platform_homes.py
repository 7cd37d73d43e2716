"""Every driver home, with NVIDIA's real libcuda 535, 550
and 555 laid out as each platform lays it out (platform_layouts.py), in a
private root: the real probe loads it and reports the real version and
``NO_CUDA_DEVICES`` (cuInit answers 100 without a GPU), and a real
preflight through the provider and Rextio Core refuses with
``NO_CUDA_DEVICES``. The host's ``/dev`` and mounts do not change.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from pathlib import Path

import pytest
from platform_layouts import (
    PLATFORMS,
    Platform,
    PrivateRoot,
    RootRun,
    expected_facts,
    host_state,
)
from real_libcuda import OBSERVED_CUDA_VERSION, RealDriver
from sim_namespace import (
    NamespaceRun,
    assert_no_device_preflight,
    assert_no_device_probe,
    built_path,
)

SERIES = sorted(OBSERVED_CUDA_VERSION)
REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.fixture
def private_root(tmp_path: Path) -> PrivateRoot:
    probe = built_path("probe").resolve()
    python = Path(sys.executable)
    for path in (probe, python):
        if not path.is_file() or not path.is_relative_to(REPOSITORY):
            pytest.fail(
                f"{path} must be a file inside {REPOSITORY} (it is bound into the private "
                "root): run `cargo xtask setup` (or `cargo xtask test`) in this checkout"
            )
    unshare, shell = shutil.which("unshare"), shutil.which("sh")
    if unshare is None or shell is None:
        pytest.fail("`unshare` (util-linux) and `sh` are needed to build the private roots")
    return PrivateRoot(
        probe=probe,
        python=python,
        repository=REPOSITORY,
        python_home=Path(sys.base_prefix).resolve(),
        unshare=unshare,
        shell=shell,
        workdir=tmp_path,
    )


def _probe_run(run: RootRun) -> NamespaceRun:
    return NamespaceRun(run.probe_returncode, run.probe_stdout, run.probe_stderr, ())


def _preflight_run(run: RootRun) -> NamespaceRun:
    return NamespaceRun(run.preflight_returncode, run.preflight_stdout, run.preflight_stderr, ())


@pytest.mark.parametrize("series", SERIES)
@pytest.mark.parametrize("platform", PLATFORMS, ids=[platform.name for platform in PLATFORMS])
def test_the_real_driver_loads_in_every_platform_home(
    private_root: PrivateRoot,
    real_drivers: dict[str, RealDriver],
    platform: Platform[RealDriver],
    series: str,
) -> None:
    layout = platform.layout(real_drivers[series])
    before = host_state()
    run = private_root.run(layout)
    assert host_state() == before, "building the private root changed the host"

    assert run.facts.splitlines() == expected_facts(platform.name), run.facts
    # The real probe loaded this home's image: the series' version, and
    # cuInit's 100 without a GPU.
    assert_no_device_probe(_probe_run(run), driver_version=OBSERVED_CUDA_VERSION[series])
    assert "refused" not in run.probe_stderr, run.probe_stderr
    # Run as root, the real driver made its control node in the private /dev.
    assert "nvidiactl" in run.dev, sorted(run.dev)
    # The provider, through Rextio Core, runs the probe the same way.
    assert_no_device_preflight(_preflight_run(run))
    if layout.driver_root is None:
        # The search alone finds it.
        assert json.loads(run.default_probe_stdout)["reason_code"] == "NO_CUDA_DEVICES"
    else:
        # Only driver_root finds it: it is no reviewed home.
        assert json.loads(run.default_probe_stdout)["reason_code"] == "LIBCUDA_SO_NOT_FOUND"


@pytest.mark.parametrize("series", SERIES)
@pytest.mark.parametrize("platform", ["nixos", "ostree"])
def test_the_same_second_link_on_a_writable_mount_is_refused(
    private_root: PrivateRoot,
    real_drivers: dict[str, RealDriver],
    platform: str,
    series: str,
) -> None:
    # The layouts above, left writable: their image's second hard link is
    # what the links rule refuses (only a read-only mount lets
    # it pass), and stderr names that rule.
    chosen = next(item for item in PLATFORMS if item.name == platform)
    layout = dataclasses.replace(chosen.layout(real_drivers[series]), last=(), facts=())
    run = private_root.run(layout)
    record = json.loads(run.probe_stdout)
    assert (record["reason_code"], record["driver_loaded"]) == ("LIBCUDA_SO_LOAD_FAILED", False)
    assert "rule `links`" in run.probe_stderr, run.probe_stderr
    assert record["refusing_rule"] == "links"
    refusal = json.loads(run.preflight_stdout)
    assert refusal["reason_code"] == "LIBCUDA_SO_LOAD_FAILED"
    assert refusal["observed"] == (
        "the loader's rule `links` refused the libcuda.so.1 the probe found"
    )
    # Nothing of the driver ran.
    assert "nvidiactl" not in run.dev
