"""Fixtures for the emulated checks: every binary of another architecture or
system executed (see xtask/src/emulated.rs, which fetches and builds what
they use and names it in the environment).

Without what they need the tests fail, saying so; they never skip.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "real_driver"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from emulation import (
    AARCH64_PROBE_ENV,
    AARCH64_SMOKE_ENV,
    WINDOWS_PROBE_ENV,
    WINDOWS_SIM_DRIVER_ENV,
    WINDOWS_SMOKE_ENV,
    WINE_ENV,
    WINE_PREFIX_ENV,
    Arm64Chroot,
    Emulated,
    WinePrefix,
    binary_from_env,
    emulated_from_env,
    provide_process_prng,
)
from sim_namespace import namespace_tools_or_fail


@pytest.fixture(scope="session")
def emulated() -> Emulated:
    """The arm64 userland, drivers and emulator `cargo xtask test` fetched."""
    namespace_tools_or_fail()
    return emulated_from_env()


@pytest.fixture(scope="session")
def aarch64_probe() -> Path:
    return binary_from_env(AARCH64_PROBE_ENV)


@pytest.fixture(scope="session")
def aarch64_smoke() -> Path:
    return binary_from_env(AARCH64_SMOKE_ENV)


@pytest.fixture
def chroot(emulated: Emulated, tmp_path: Path) -> Arm64Chroot:
    return Arm64Chroot(emulated, tmp_path)


@pytest.fixture(scope="session")
def windows_probe() -> Path:
    return binary_from_env(WINDOWS_PROBE_ENV)


@pytest.fixture(scope="session")
def windows_smoke() -> Path:
    return binary_from_env(WINDOWS_SMOKE_ENV)


@pytest.fixture(scope="session")
def windows_sim_driver() -> Path:
    return binary_from_env(WINDOWS_SIM_DRIVER_ENV)


@pytest.fixture(scope="session")
def wine_prefix(tmp_path_factory: pytest.TempPathFactory) -> WinePrefix:
    """The cached prefix, made ready to run Rust programs."""
    namespace_tools_or_fail()
    wine = binary_from_env(WINE_ENV)
    prefix_env = os.environ.get(WINE_PREFIX_ENV)
    if not prefix_env:
        pytest.fail(f"{WINE_PREFIX_ENV} is not set: run these checks through `cargo xtask test`")
    prefix = WinePrefix(wine, Path(prefix_env))
    prefix.ensure()
    provide_process_prng(prefix, tmp_path_factory.mktemp("prng-shim"))
    return prefix
