"""The manual host of docs/manual-host.md, built from the installed wheel alone
(tests/e2e/manual_host.py), beside NVIDIA's real libcuda 535, 550 and 555
on a host without a GPU: the reviewed loader loads each image and the
lifetime sequence stops at ``cuInit``, which answers 100; a group-writable
image is refused before anything of it runs; an explicit driver root loads
the image from a directory the search never looks in.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from manual_host import assert_failed_at, build_native, install_project, not_loaded
from real_libcuda import OBSERVED_CUDA_VERSION, RealDriver
from real_namespace import RealRun, installed, run_beside
from sim_namespace import NO_DEVICE_RESULT, SIM_TMPFS, DriverLayout, SimulatedHost

SERIES = sorted(OBSERVED_CUDA_VERSION)
# NVIDIA's forward-compatibility package's directory, outside every reviewed
# root, below the namespace's own /usr/local.
COMPAT_ROOT = f"{SIM_TMPFS}/cuda-12.4/compat"


@pytest.fixture(scope="session")
def manual_host(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_native(install_project(tmp_path_factory.mktemp("manual-host") / "project"))


def _assert_loaded_and_stopped_at_cu_init(outcome: RealRun) -> None:
    assert outcome.run.returncode == 1, outcome.run.stdout + outcome.run.stderr
    assert_failed_at(outcome.run.stdout, "cuInit", NO_DEVICE_RESULT)
    # The real driver ran cuInit as root: its control node is in the
    # namespace's private /dev.
    assert "nvidiactl" in outcome.dev, sorted(outcome.dev)


@pytest.mark.parametrize("series", SERIES)
def test_the_manual_host_loads_the_real_driver(
    host: SimulatedHost, real_drivers: dict[str, RealDriver], manual_host: Path, series: str
) -> None:
    outcome = run_beside(host, installed(real_drivers[series]), [str(manual_host)])
    _assert_loaded_and_stopped_at_cu_init(outcome)


@pytest.mark.parametrize("series", SERIES)
def test_the_manual_host_refuses_a_group_writable_real_driver(
    host: SimulatedHost, real_drivers: dict[str, RealDriver], manual_host: Path, series: str
) -> None:
    layout = installed(real_drivers[series], image_mode=0o664)
    outcome = run_beside(host, layout, [str(manual_host)])
    expected = f"{not_loaded('LIBCUDA_SO_LOAD_FAILED')}\n"
    assert (outcome.run.returncode, outcome.run.stdout) == (1, expected), outcome.run.stderr
    assert "rule `mode`" in outcome.run.stderr, outcome.run.stderr
    # Nothing of the driver ran: it made no control node.
    assert "nvidiactl" not in outcome.dev, sorted(outcome.dev)


@pytest.mark.parametrize("series", SERIES)
def test_the_manual_host_loads_the_real_driver_from_its_driver_root(
    host: SimulatedHost, real_drivers: dict[str, RealDriver], manual_host: Path, series: str
) -> None:
    driver = real_drivers[series]
    versioned = f"libcuda.so.{driver.image_version}"
    layout = DriverLayout(
        image=driver.image,
        install="absent",
        private_dev=True,
        extra_steps=(
            f"install -d -m 0755 {COMPAT_ROOT}",
            f"install -m 0644 {{image}} {COMPAT_ROOT}/{versioned}",
            f"ln -s {versioned} {COMPAT_ROOT}/libcuda.so.1",
        ),
    )
    with_root = run_beside(host, layout, [str(manual_host), "--driver-root", COMPAT_ROOT])
    _assert_loaded_and_stopped_at_cu_init(with_root)
    # The search alone never looks there.
    search = run_beside(host, layout, [str(manual_host)])
    expected = f"{not_loaded('LIBCUDA_SO_NOT_FOUND')}\n"
    assert (search.run.returncode, search.run.stdout) == (1, expected), search.run.stderr
    assert "nvidiactl" not in search.dev
