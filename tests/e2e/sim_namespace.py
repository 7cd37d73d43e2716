"""Helpers for the end-to-end tests: the simulated-driver namespace and its layouts.

Every scenario runs inside a private mount namespace (``unshare -m``, as root):
``/`` is made recursively private, ``/proc`` is the namespace's own, a
tmpfs covers ``/usr/local`` (and, when asked, ``/dev``), and the
simulated driver is installed at the reviewed path
``/usr/local/nvidia/lib64/libcuda.so.1`` with its config beside it. Nothing on
the host changes.

A missing export is simulated by :func:`rename_export`: a copy of the driver
whose ``.dynstr`` entry for that name is changed in place (same length), so
the dynamic linker genuinely cannot find it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rextio_device_cuda._cuda_results import CUDA_RESULTS
from rextio_device_cuda._provider_spec import PROVIDER_SPEC


def python_shebang() -> str:
    """The first line(s) of a script that this interpreter runs. A ``#!`` line
    ends the interpreter's path at the first blank, so where the path holds one
    (a clone under "/tmp/a b") sh starts it: a line sh runs and Python reads as
    one string expression."""
    if not any(blank in sys.executable for blank in " \t"):
        return f"#!{sys.executable}\n"
    return f"#!/bin/sh\n'exec' {shlex.quote(sys.executable)} \"$0\" \"$@\"\n"


# The tmpfs that covers the host's directory inside the namespace: every
# file the tests create or change lies below it.
SIM_TMPFS = "/usr/local"
SIM_ROOT = f"{SIM_TMPFS}/nvidia"
SIM_LIB_DIR = f"{SIM_ROOT}/lib64"
SIM_STATE_DIR = f"{SIM_ROOT}/sim"
SIM_CONFIG = f"{SIM_STATE_DIR}/config"
SIM_CALL_LOG = f"{SIM_STATE_DIR}/calls.log"
REVIEWED_IMAGE = f"{SIM_LIB_DIR}/libcuda.so.1"
# Candidates (of every architecture) outside /usr/local that the namespace
# does not cover: if one existed on this host, the probe would find a real
# driver first.
HOST_CANDIDATES = tuple(
    sorted(
        {
            f"{directory}/{PROVIDER_SPEC.loader.linux_driver_file_name}"
            for candidates in PROVIDER_SPEC.loader.linux_candidate_dirs
            for directory in candidates.dirs
            if not directory.startswith(f"{SIM_TMPFS}/")
        }
    )
)
# A private mount namespace (nothing mounted inside reaches the host) and a
# PID namespace whose init is the script: if the test times out, killing
# unshare kills that init (--kill-child) and the kernel then kills every
# process left in the namespace, so nothing outlives the test.
UNSHARE_FLAGS = ("--mount", "--propagation", "private", "--pid", "--fork", "--kill-child")
SETUP_FAILED = 97
RUN_TIMEOUT_SECONDS = 120


@dataclass(frozen=True)
class NativeBinaries:
    """The binaries `cargo xtask setup` built."""

    probe: Path
    smoke: Path
    sim_driver: Path


@dataclass
class DriverLayout:
    """What the namespace holds under /usr/local before the command runs.

    ``install`` is one of: ``file`` (the image at the reviewed path),
    ``link-inside`` (a versioned image plus a relative libcuda.so.1 link, as
    real drivers ship), ``link-to-tmp`` (a link from the reviewed path to an
    image under the test's temporary directory), ``link-outside-roots`` (a
    link to an owner-only image under /usr/local/outside, below /usr but
    outside every reviewed root), ``link-sibling-prefix`` (a link to an
    owner-only image under /usr/local/nvidia/lib64x, whose name merely starts
    with the reviewed root's) and ``absent`` (no image at all).
    """

    config: Sequence[str] = ()
    install: str = "file"
    image_mode: int = 0o644
    # Applied last, in order: path -> mode.
    modes: dict[str, int] = field(default_factory=dict)
    # A replacement image (e.g. one with a renamed export).
    image: Path | None = None
    # Installed as ``libcuda.so.<image_version>`` plus the relative
    # ``libcuda.so.1`` link (as NVIDIA's installers lay it out), when set.
    image_version: str | None = None
    # A private tmpfs over /dev holding only ``null``: a driver that creates
    # device nodes (NVIDIA's does, as root) creates them there.
    private_dev: bool = False
    # Shell steps run last, after every other step (``{image}`` is the
    # image's path); each must succeed or the setup fails.
    extra_steps: Sequence[str] = ()


# Two simulated devices (the demo, the bench, xtask's symbol-proof).
TWO_DEVICES = DriverLayout(
    config=(
        "driver_version=12040",
        "device=NVIDIA Simulated A100|8|0",
        "device=NVIDIA Simulated L4|8|9",
    )
)


@dataclass(frozen=True)
class NamespaceRun:
    """What a command printed inside the namespace, and the driver's call log."""

    returncode: int
    stdout: str
    stderr: str
    calls: tuple[str, ...]

    def record(self) -> dict[str, Any]:
        """The one JSON object the binary printed."""
        lines = self.stdout.splitlines()
        assert len(lines) == 1, f"expected one JSON line, got: {self.stdout!r} {self.stderr!r}"
        value = json.loads(lines[0])
        assert isinstance(value, dict)
        return value


@dataclass(frozen=True)
class NamespaceTools:
    """Absolute paths of the programs that build a namespace."""

    unshare: str
    shell: str


class SimulatedHost:
    """Runs commands in a fresh private mount namespace holding the simulated driver."""

    def __init__(self, native: NativeBinaries, tools: NamespaceTools, workdir: Path) -> None:
        self.native = native
        self._tools = tools
        self._workdir = workdir
        self._runs = 0

    def run(
        self,
        layout: DriverLayout,
        argv: Sequence[str | os.PathLike[str]],
        extra_env: Mapping[str, str] | None = None,
    ) -> NamespaceRun:
        """Runs ``argv`` in a fresh namespace, with ``extra_env`` added to the
        environment of ``argv`` only (not of the namespace setup)."""
        self._runs += 1
        scratch = self._workdir / f"ns-{self._runs}"
        scratch.mkdir()
        config = scratch / "config"
        config.write_text("".join(f"{line}\n" for line in layout.config), encoding="utf-8")
        script = scratch / "run.sh"
        script.write_text(self._script(layout, scratch, config, extra_env or {}), encoding="utf-8")
        completed = subprocess.run(
            [
                self._tools.unshare,
                *UNSHARE_FLAGS,
                self._tools.shell,
                str(script),
                *map(str, argv),
            ],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_SECONDS,
            check=False,
        )
        if completed.returncode == SETUP_FAILED:
            pytest.fail(f"simulated-driver namespace setup failed: {completed.stderr}")
        log = scratch / "calls.log"
        calls = tuple(log.read_text(encoding="utf-8").splitlines()) if log.exists() else ()
        return NamespaceRun(completed.returncode, completed.stdout, completed.stderr, calls)

    def _script(
        self, layout: DriverLayout, scratch: Path, config: Path, extra_env: Mapping[str, str]
    ) -> str:
        image = shlex.quote(str(layout.image or self.native.sim_driver))
        mode = f"{layout.image_mode:04o}"
        steps = [
            "mount --make-rprivate /",
            # The namespace's own PID view: NVIDIA's 550 and 555 drivers
            # answer cuInit with 304 (an OS error) when /proc belongs to
            # another PID namespace.
            "mount -t proc rextio-proc /proc",
            f"mount -t tmpfs -o mode=0755,size=64m rextio-sim {SIM_TMPFS}",
            f"install -d -m 0755 {SIM_ROOT} {SIM_LIB_DIR} {SIM_STATE_DIR}",
            f"install -m 0644 {shlex.quote(str(config))} {SIM_CONFIG}",
        ]
        if layout.private_dev:
            steps.append("mount -t tmpfs -o mode=0755,size=1m rextio-dev /dev")
            steps.append("mknod -m 0666 /dev/null c 1 3")
        if layout.image_version is not None:
            versioned = f"libcuda.so.{layout.image_version}"
            steps.append(f"install -m {mode} {image} {SIM_LIB_DIR}/{shlex.quote(versioned)}")
            steps.append(f"ln -s {shlex.quote(versioned)} {REVIEWED_IMAGE}")
        elif layout.install == "file":
            steps.append(f"install -m {mode} {image} {REVIEWED_IMAGE}")
        elif layout.install == "link-inside":
            steps.append(f"install -m {mode} {image} {SIM_LIB_DIR}/libcuda.so.550.54.14")
            steps.append(f"ln -s libcuda.so.550.54.14 {REVIEWED_IMAGE}")
        elif layout.install == "link-to-tmp":
            escaped = shlex.quote(str(scratch / "libcuda.so.1"))
            steps.append(f"install -m {mode} {image} {escaped}")
            steps.append(f"ln -s {escaped} {REVIEWED_IMAGE}")
        elif layout.install == "link-outside-roots":
            steps.append("install -d -m 0755 /usr/local/outside")
            steps.append(f"install -m {mode} {image} /usr/local/outside/libcuda.so.1")
            steps.append(f"ln -s /usr/local/outside/libcuda.so.1 {REVIEWED_IMAGE}")
        elif layout.install == "link-sibling-prefix":
            steps.append(f"install -d -m 0755 {SIM_LIB_DIR}x")
            steps.append(f"install -m {mode} {image} {SIM_LIB_DIR}x/libcuda.so.1")
            steps.append(f"ln -s {SIM_LIB_DIR}x/libcuda.so.1 {REVIEWED_IMAGE}")
        elif layout.install != "absent":
            raise ValueError(f"unknown install kind {layout.install!r}")
        for path in layout.modes:
            # Only the namespace's own tmpfs may change: a chmod anywhere else
            # would reach the host's files through the shared filesystem.
            if not Path(path).is_relative_to(SIM_TMPFS):
                raise ValueError(f"{path} is outside the namespace's {SIM_TMPFS} tmpfs")
        steps.extend(f"chmod {mode:04o} {shlex.quote(path)}" for path, mode in layout.modes.items())
        steps.extend(step.replace("{image}", image) for step in layout.extra_steps)
        fail = f'{{ echo "rextio-e2e: namespace setup failed" >&2; exit {SETUP_FAILED}; }}'
        setup = "\n".join(f"{step} || {fail}" for step in steps)
        saved_log = shlex.quote(str(scratch / "calls.log"))
        assignments = [shlex.quote(f"{name}={value}") for name, value in extra_env.items()]
        command_env = f"env {' '.join(assignments)} " if assignments else ""
        return (
            f"{setup}\n"
            f'{command_env}"$@"\n'
            "status=$?\n"
            f"if [ -e {SIM_CALL_LOG} ]; then cp {SIM_CALL_LOG} {saved_log}; fi\n"
            'exit "$status"\n'
        )


def fnv1a64(data: bytes) -> str:
    """The FNV-1a 64 digest the simulated driver logs (``fnv1a64=``) for the
    bytes a copy moved and an allocation held when freed."""
    digest = 0xCBF29CE484222325
    for byte in data:
        digest = ((digest ^ byte) * 0x100000001B3) % 2**64
    return f"{digest:016x}"


def rename_export(library: Path, export: str, destination: Path) -> Path:
    """Copy of ``library`` whose dynamic string table no longer names ``export``.

    The last character of the name in ``.dynstr`` is replaced (same length),
    so the dynamic linker genuinely cannot find the export; nothing else in
    the file moves.
    """
    data = bytearray(library.read_bytes())
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        pytest.fail(f"{library} is not a little-endian ELF64 image")
    (section_offset,) = struct.unpack_from("<Q", data, 0x28)
    entry_size, entry_count, names_index = struct.unpack_from("<HHH", data, 0x3A)

    def section(index: int) -> tuple[int, int, int]:
        base = section_offset + index * entry_size
        name, _type, _flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", data, base)
        return name, offset, size

    _, names_offset, _ = section(names_index)
    for index in range(entry_count):
        name, offset, size = section(index)
        end = data.index(b"\0", names_offset + name)
        if bytes(data[names_offset + name : end]) != b".dynstr":
            continue
        table = bytes(data[offset : offset + size])
        needle = b"\0" + export.encode("ascii") + b"\0"
        if table.count(needle) != 1:
            pytest.fail(f"{export} is not exactly once in {library}'s .dynstr")
        last = offset + table.index(needle) + len(needle) - 2
        data[last] = ord("X") if data[last] != ord("X") else ord("Y")
        destination.write_bytes(bytes(data))
        destination.chmod(0o644)
        return destination
    pytest.fail(f"{library} has no .dynstr section")


# What NVIDIA's driver does on a host without a GPU, and the simulated driver
# without a configured device: the same expectations run against both.
NO_DEVICE_RESULT = CUDA_RESULTS["CUDA_ERROR_NO_DEVICE"]
PREFLIGHT_NOT_READY_EXIT = 1


def assert_no_device_probe(run: NamespaceRun, driver_version: int) -> None:
    """The probe loaded the driver, read its version, and cuInit said 100."""
    assert run.returncode == 0, run.stderr
    record = run.record()
    expected = {
        "platform_supported": True,
        "status": PROVIDER_SPEC.probe_report.statuses.unavailable,
        "reason_code": "NO_CUDA_DEVICES",
        "driver_loaded": True,
        "driver_version": driver_version,
        "device_count": 0,
        "cuda_result": NO_DEVICE_RESULT,
        "devices": [],
    }
    assert {key: record[key] for key in expected} == expected, record


def assert_no_device_smoke(run: NamespaceRun) -> None:
    """The smoke stopped at cuInit with a record and exit 1: no context was made."""
    record = run.record()
    assert run.returncode == 1, (run.stdout, run.stderr)
    assert (record["status"], record["reason_code"], record["cuda_result"]) == (
        PROVIDER_SPEC.smoke.failure_status,
        "CU_INIT_FAILED",
        NO_DEVICE_RESULT,
    ), record
    assert (record["device_ordinal"], record["kernel_executed"]) == (0, False)


def preflight_argv(python: str, probe: Path) -> list[str]:
    """``python -m rextio_device_cuda preflight`` for device 0 / sm_80, JSON out."""
    return [
        python,
        "-m",
        "rextio_device_cuda",
        "preflight",
        "--capability",
        "cuda-linux-x86_64",
        "--probe",
        str(probe.resolve()),
        "--device",
        "0",
        "--sm",
        "sm_80",
        "--json",
    ]


def assert_no_device_preflight(run: NamespaceRun) -> None:
    """Preflight through Core refuses with NO_CUDA_DEVICES and its explanation."""
    assert run.returncode == PREFLIGHT_NOT_READY_EXIT, (run.stdout, run.stderr)
    refusal = json.loads(run.stdout)
    assert refusal["reason_code"] == "NO_CUDA_DEVICES", refusal
    assert refusal["support_claim"] is False
    assert refusal["explanation"], refusal


def built_path(key: str, staged_by: str = "cargo xtask setup") -> Path:
    """What ``staged_by`` (`cargo xtask setup` unless named) prepared, by key,
    from ``target/test-paths.json``."""
    target = os.environ.get("CARGO_TARGET_DIR") or Path(__file__).resolve().parents[2] / "target"
    paths = Path(target) / "test-paths.json"
    if not paths.is_file():
        pytest.fail(
            f"{paths} is missing: run `{staged_by}` once; it builds and fetches what the tests "
            "use (`cargo xtask setup`: the probe, the smoke, the simulated driver and the wheel)"
        )
    value = json.loads(paths.read_text(encoding="utf-8")).get(key)
    if not isinstance(value, str) or not Path(value).exists():
        pytest.fail(f"{paths} names no existing {key} ({value!r}): rerun `{staged_by}`")
    return Path(value)


def built_binaries() -> NativeBinaries:
    """The binaries `cargo xtask setup` built."""
    return NativeBinaries(
        probe=built_path("probe"),
        smoke=built_path("smoke"),
        sim_driver=built_path("sim_driver"),
    )


def namespace_tools_or_fail() -> NamespaceTools:
    """The namespace tools; fails (never skips) when private mount namespaces
    are unavailable or the host has a driver the namespace would not cover."""
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


def main(arguments: list[str]) -> int:
    """``python sim_namespace.py SIM_DRIVER PROGRAM [ARG...]``: PROGRAM run beside
    the simulated driver with two devices; its output and exit status relayed."""
    sim_driver, *argv = arguments
    binaries = NativeBinaries(probe=Path(argv[0]), smoke=Path(argv[0]), sim_driver=Path(sim_driver))
    with tempfile.TemporaryDirectory(prefix="rextio-sim-") as scratch:
        host = SimulatedHost(binaries, namespace_tools_or_fail(), Path(scratch))
        run = host.run(TWO_DEVICES, argv)
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    return run.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
