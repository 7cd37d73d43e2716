"""Fixtures for the emulated checks: every binary of another architecture or
system executed. `cargo xtask emulated` (part of `cargo xtask test`) fetches
and builds what they use and names it in target/test-paths.json; after it,
plain `pytest tests/emulated` runs them.

Without what they need the tests fail, saying so; they never skip.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "real_driver"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from emulation import (
    STAGED_BY,
    Arm64Chroot,
    Emulated,
    WinePrefix,
    provide_process_prng,
    staged_binary,
    staged_emulated,
)
from sim_namespace import built_path, namespace_tools_or_fail


@pytest.fixture(scope="session")
def emulated() -> Emulated:
    """The arm64 userland, drivers and emulator `cargo xtask emulated` fetched."""
    namespace_tools_or_fail()
    return staged_emulated()


@pytest.fixture(scope="session")
def aarch64_probe() -> Path:
    return staged_binary("aarch64_probe")


@pytest.fixture(scope="session")
def aarch64_smoke() -> Path:
    return staged_binary("aarch64_smoke")


@pytest.fixture
def chroot(emulated: Emulated, tmp_path: Path) -> Arm64Chroot:
    return Arm64Chroot(emulated, tmp_path)


@pytest.fixture(scope="session")
def windows_probe() -> Path:
    return staged_binary("windows_probe")


@pytest.fixture(scope="session")
def windows_smoke() -> Path:
    return staged_binary("windows_smoke")


@pytest.fixture(scope="session")
def windows_sim_driver() -> Path:
    return staged_binary("windows_sim_driver")


@pytest.fixture(scope="session")
def wine_prefix(tmp_path_factory: pytest.TempPathFactory) -> WinePrefix:
    """The cached prefix, made ready to run Rust programs."""
    namespace_tools_or_fail()
    prefix = WinePrefix(staged_binary("wine"), built_path("wine_prefix", STAGED_BY))
    prefix.ensure()
    provide_process_prng(prefix, tmp_path_factory.mktemp("prng-shim"))
    return prefix
