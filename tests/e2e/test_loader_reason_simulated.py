"""An image that passed review but that the dynamic loader refused: the probe's
record carries the loader's own reason (``loader_reason``, paths removed), and
``preflight`` states it in its observed line, with the shipped probe at a
driver root in the simulated namespace.

Each image is installed root-owned at the reviewed path, so every rule of the
review passes and only ``dlopen`` decides.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from sim_namespace import SIM_LIB_DIR, DriverLayout, SimulatedHost

from rextio_device_cuda.probe import parse_probe_report

BUILD_SECONDS = 120


def _text_file(directory: Path) -> Path:
    text = directory / "text.so"
    text.write_text("this is not a shared library, only words about one\n" * 4, encoding="ascii")
    return text


def _elf32(directory: Path) -> Path:
    """A minimal 32-bit ELF header (ELFCLASS32, x86) padded past a 64-bit header's size."""
    ident = b"\x7fELF" + bytes([1, 1, 1]) + bytes(9)
    header = ident + struct.pack("<HHIIIIIHHHHHH", 3, 3, 1, 0, 52, 0, 0, 52, 32, 0, 40, 0, 0)
    image = directory / "elf32.so"
    image.write_bytes(header + bytes(128))
    return image


def _missing_dependency(directory: Path) -> Path:
    """A real shared library whose DT_NEEDED names libfoo.so.1, which does not exist."""
    compiler = shutil.which("cc")
    assert compiler is not None, "a C compiler (cc) builds the test library; install one"
    source = directory / "f.c"
    source.write_text("int rextio_test_function(void) { return 1; }\n", encoding="ascii")
    dependency = directory / "libfoo.so.1"
    library = directory / "needs-libfoo.so"
    commands: list[list[str | Path]] = [
        [compiler, "-shared", "-fPIC", "-Wl,-soname,libfoo.so.1", "-o", dependency, source],
        [compiler, "-shared", "-fPIC", "-o", library, source, "-Wl,--no-as-needed", dependency],
    ]
    for command in commands:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=BUILD_SECONDS, check=False
        )
        assert done.returncode == 0, done.stderr
    dependency.unlink()
    return library


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (_text_file, "invalid ELF header"),
        (_elf32, "wrong ELF class: ELFCLASS32"),
        (
            _missing_dependency,
            "libfoo.so.1: cannot open shared object file: No such file or directory",
        ),
    ],
    ids=["text-file", "elf32", "missing-dependency"],
)
def test_the_dynamic_loader_s_reason_reaches_the_observed_line(
    sim_host: SimulatedHost, tmp_path: Path, make: Callable[[Path], Path], reason: str
) -> None:
    image = make(tmp_path)
    layout = DriverLayout(image=image)
    # The probe's own record, at the driver root.
    probed = sim_host.run(layout, [sim_host.native.probe, "--driver-root", SIM_LIB_DIR])
    assert probed.returncode == 0, probed.stderr
    parse_probe_report(probed.stdout)
    record = probed.record()
    assert (record["reason_code"], record["loader_reason"]) == (
        "LIBCUDA_SO_LOAD_FAILED",
        reason,
    ), record
    assert "refusing_rule" not in record
    # The command a person runs: the installed (shipped) probe, no --probe.
    command = [sys.executable, "-m", "rextio_device_cuda", "preflight"]
    command += ["--capability", "cuda-linux-x86_64", "--device", "0", "--sm", "sm_80"]
    command += ["--driver-root", SIM_LIB_DIR]
    run = sim_host.run(layout, command)
    assert run.returncode == 1, (run.stdout, run.stderr)
    lines = run.stderr.splitlines()
    assert all(len(line) <= 100 for line in lines), lines
    said = run.stderr.replace("\n  ", " ")
    observed = f"observed: the dynamic loader could not load the reviewed libcuda.so.1: {reason}"
    assert f"\n{observed}\n" in said, run.stderr
    assert "remedy: The image passed the loader's review, but the dynamic loader" in said
    assert str(tmp_path) not in run.stderr
    assert "/proc/self/fd" not in run.stderr
    assert run.calls == ()


def test_other_reports_keep_0_1_0_s_keys(sim_host: SimulatedHost) -> None:
    # A working driver: the complete report holds neither key added in 0.2.0.
    layout = DriverLayout(config=("driver_version=12040", "device=NVIDIA Simulated A100|8|0"))
    run = sim_host.run(layout, [sim_host.native.probe, "--driver-root", SIM_LIB_DIR])
    record = run.record()
    assert record["status"] == "probe-complete", record
    assert "loader_reason" not in record
    assert "refusing_rule" not in record
    # No image at all: LIBCUDA_SO_NOT_FOUND, again without either key.
    absent = sim_host.run(DriverLayout(install="absent"), [sim_host.native.probe])
    assert absent.record()["reason_code"] == "LIBCUDA_SO_NOT_FOUND"
    assert "loader_reason" not in absent.record()
