"""End-to-end fixtures: the real probe, smoke and provider against the simulated driver.

Helpers live in sim_namespace (this directory is put on sys.path, as
tests/python does for its own helpers). Where private mount namespaces are
not permitted the tests fail, saying so; they never skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sim_namespace import (
    HOST_CANDIDATES,
    UNSHARE_FLAGS,
    NamespaceTools,
    NativeBinaries,
    SimulatedHost,
)


def _binary_from_env(name: str) -> Path:
    value = os.environ.get(name)
    if not value:
        pytest.fail(
            f"{name} is not set: run the end-to-end tests through `cargo xtask test`, "
            "which builds the probe, the smoke and the simulated driver"
        )
    path = Path(value)
    if not path.is_file():
        pytest.fail(f"{name} names {path}, which is not a built file")
    return path


@pytest.fixture(scope="session")
def native() -> NativeBinaries:
    """The built binaries named by the test runner's environment."""
    return NativeBinaries(
        probe=_binary_from_env("REXTIO_CUDA_PROBE"),
        smoke=_binary_from_env("REXTIO_CUDA_SMOKE"),
        sim_driver=_binary_from_env("REXTIO_SIM_DRIVER"),
    )


@pytest.fixture(scope="session")
def namespace_tools() -> NamespaceTools:
    """Fails (never skips) when private mount namespaces are unavailable."""
    unshare, shell = shutil.which("unshare"), shutil.which("sh")
    if unshare is None or shell is None:
        pytest.fail("`unshare` (util-linux) and `sh` are needed by the simulated-driver tests")
    probe = subprocess.run(
        [unshare, *UNSHARE_FLAGS, shell, "-c", "exit 0"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if probe.returncode != 0:
        pytest.fail(
            "private mount and PID namespaces are not permitted here "
            "(`unshare -m -p` as root failed: "
            f"{probe.stderr.strip()}); the simulated-driver tests need them and never skip"
        )
    present = [path for path in HOST_CANDIDATES if os.path.lexists(path)]
    if present:
        pytest.fail(
            f"this host has a driver image at {present}; the namespace covers only "
            "/usr/local, so the probe would load the host's driver first"
        )
    return NamespaceTools(unshare=unshare, shell=shell)


@pytest.fixture
def sim_host(
    native: NativeBinaries, namespace_tools: NamespaceTools, tmp_path: Path
) -> SimulatedHost:
    """A factory of fresh simulated-driver namespaces for one test."""
    return SimulatedHost(native, namespace_tools, tmp_path)
