"""Fixtures for the real-driver checks: NVIDIA's libcuda1 images that
`cargo xtask test` fetched (see xtask/src/real_driver.rs), run in the same
private namespaces as the simulated driver (tests/e2e/sim_namespace.py).

Without the images the tests fail, saying so; they never skip. The
``real_drivers`` fixture checks that every observed series was fetched, each
image of its own series.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from real_libcuda import OBSERVED_CUDA_VERSION, RealDriver
from sim_namespace import SimulatedHost, built_binaries, built_path, namespace_tools_or_fail


@pytest.fixture(scope="session")
def real_drivers() -> dict[str, RealDriver]:
    """The fetched images by series, from the manifest `cargo xtask setup` wrote."""
    manifest = built_path("real_libcuda")
    entries = json.loads(manifest.read_text(encoding="utf-8"))
    drivers = {
        entry["series"]: RealDriver(
            series=entry["series"],
            package_version=entry["package_version"],
            image_version=entry["image_version"],
            image=Path(entry["image"]),
            deb=Path(entry["deb"]),
            alternative_deb=Path(entry["alternative_deb"]),
        )
        for entry in entries
    }
    wanted = sorted(OBSERVED_CUDA_VERSION)
    if sorted(drivers) != wanted:
        pytest.fail(f"{manifest} names the series {sorted(drivers)}, not {wanted}")
    for series, driver in drivers.items():
        if not driver.image_version.startswith(f"{series}."):
            pytest.fail(f"the {series} series' image is version {driver.image_version}")
        for path in (driver.image, driver.deb, driver.alternative_deb):
            if not path.is_file():
                pytest.fail(f"the {driver.series} driver's {path} is missing")
    return drivers


@pytest.fixture
def host(tmp_path: Path) -> SimulatedHost:
    """Fresh private namespaces for one test (the real image replaces the simulated one)."""
    return SimulatedHost(built_binaries(), namespace_tools_or_fail(), tmp_path)
