"""Fixtures for the emulated checks: every binary of another architecture or
system executed. `cargo xtask emulated` (part of `cargo xtask test`) fetches
and builds what they use and names it in target/test-paths.json; after it,
plain `pytest tests/emulated` runs them.

Without what they need the tests fail, saying so; they never skip. What
setup must have produced (every arm64 series, an emulator that knows the child
subreaper, aarch64 binaries) is checked by the fixtures that hand it out.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "real_driver"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from emulation import (
    ARM64_SERIES,
    EM_AARCH64,
    FIRST_QEMU_WITH_SUBREAPER,
    STAGED_BY,
    Arm64Chroot,
    Emulated,
    WinePrefix,
    elf_machine,
    provide_process_prng,
    qemu_major_version,
    staged_binary,
    staged_emulated,
)
from sim_namespace import built_path, namespace_tools_or_fail


@pytest.fixture(scope="session")
def emulated() -> Emulated:
    """The arm64 userland, drivers and emulator `cargo xtask emulated` fetched:
    every series of ``ARM64_SERIES`` (an arm64 image of that series each) and
    an emulator of at least ``FIRST_QEMU_WITH_SUBREAPER``."""
    namespace_tools_or_fail()
    emulated = staged_emulated()
    if sorted(emulated.drivers) != ARM64_SERIES:
        pytest.fail(
            f"`{STAGED_BY}` fetched the arm64 series {sorted(emulated.drivers)}, not {ARM64_SERIES}"
        )
    for series, driver in emulated.drivers.items():
        if not driver.image_version.startswith(f"{series}."):
            pytest.fail(f"the {series} series' image is version {driver.image_version}")
        if elf_machine(driver.image) != EM_AARCH64:
            pytest.fail(f"the {series} series' image {driver.image} is not aarch64")
    major = qemu_major_version(emulated.qemu)
    if major < FIRST_QEMU_WITH_SUBREAPER:
        pytest.fail(
            f"{emulated.qemu} is qemu {major}; the probe and smoke need "
            f"{FIRST_QEMU_WITH_SUBREAPER} or newer (older ones refuse PR_SET_CHILD_SUBREAPER)"
        )
    return emulated


def _aarch64_binary(key: str) -> Path:
    """A staged binary that must be an aarch64 ELF file."""
    binary = staged_binary(key)
    if elf_machine(binary) != EM_AARCH64:
        pytest.fail(f"{binary} ({key}) is not an aarch64 ELF file")
    return binary


@pytest.fixture(scope="session")
def aarch64_probe() -> Path:
    return _aarch64_binary("aarch64_probe")


@pytest.fixture(scope="session")
def aarch64_smoke() -> Path:
    return _aarch64_binary("aarch64_smoke")


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
