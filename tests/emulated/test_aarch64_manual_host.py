"""The manual host of docs/manual-host.md, built from the installed wheel alone
(tests/e2e/manual_host.py) and cross-built for aarch64 with cargo-zigbuild
as the shipped probe is, run under qemu in the arm64 chroot beside NVIDIA's
arm64 libcuda 535 and 550: the reviewed loader loads the image, at the
multiarch home and through Jetson Thor's driver root, and the lifetime
sequence stops at ``cuInit``, which answers 100 without a GPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from emulation import ARM64_SERIES, EM_AARCH64, Arm64Chroot, ChrootRun, Emulated, elf_machine
from manual_host import assert_failed_at, build_aarch64, install_project, not_loaded
from platform_layouts import JETSON_THOR_DRIVER_ROOT, jetson_thor, ubuntu_arm64
from sim_namespace import NO_DEVICE_RESULT, built_path


@pytest.fixture(scope="session")
def aarch64_manual_host(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The program of docs/manual-host.md, cross-built; it must be an aarch64 ELF file."""
    project = install_project(tmp_path_factory.mktemp("manual-host") / "project")
    program = build_aarch64(project, built_path("recipe_tools"))
    if elf_machine(program) != EM_AARCH64:
        pytest.fail(f"the cross build made {program}, which is not an aarch64 ELF file")
    return program


def _assert_loaded_and_stopped_at_cu_init(outcome: ChrootRun) -> None:
    assert outcome.run.returncode == 1, outcome.run.stdout + outcome.run.stderr
    assert_failed_at(outcome.run.stdout, "cuInit", NO_DEVICE_RESULT)
    # The real driver ran cuInit as root, in the chroot's own /dev.
    assert "nvidiactl" in outcome.dev, sorted(outcome.dev)


@pytest.mark.parametrize("series", ARM64_SERIES)
def test_the_aarch64_manual_host_loads_the_real_arm64_driver(
    chroot: Arm64Chroot, emulated: Emulated, aarch64_manual_host: Path, series: str
) -> None:
    layout = ubuntu_arm64(emulated.drivers[series])
    _assert_loaded_and_stopped_at_cu_init(chroot.run(layout, aarch64_manual_host, []))


@pytest.mark.parametrize("series", ARM64_SERIES)
def test_the_aarch64_manual_host_loads_jetson_thor_through_its_driver_root(
    chroot: Arm64Chroot, emulated: Emulated, aarch64_manual_host: Path, series: str
) -> None:
    layout = jetson_thor(emulated.drivers[series])
    arguments = ["--driver-root", JETSON_THOR_DRIVER_ROOT]
    _assert_loaded_and_stopped_at_cu_init(chroot.run(layout, aarch64_manual_host, arguments))
    search = chroot.run(layout, aarch64_manual_host, [])
    expected = f"{not_loaded('LIBCUDA_SO_NOT_FOUND')}\n"
    assert (search.run.returncode, search.run.stdout) == (1, expected), search.run.stderr
