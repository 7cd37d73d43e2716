"""`python -m rextio_device_cuda validate` end to end: ready beside the
simulated driver, LIBCUDA_SO_NOT_FOUND explained on this GPU-less host.

The probe and smoke are shipped the way a platform wheel ships them, inside
the package at ``rextio_device_cuda/_bin/`` beside ``SHA256SUMS``: the
installed package is copied, with the built binaries in its ``_bin/``, into a directory put first on
PYTHONPATH (the distribution's metadata and entry point stay the installed
ones, so Core loads the provider exactly as after a pip install).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from sim_namespace import DriverLayout, NamespaceTools, NativeBinaries, SimulatedHost

import rextio_device_cuda
from rextio_device_cuda._explain import OPTION_FLAGS, for_command
from rextio_device_cuda._provider_spec import PROVIDER_SPEC

ONE_DEVICE = ("driver_version=12040", "device=NVIDIA Simulated A100|8|0")
VALIDATE = [sys.executable, "-m", "rextio_device_cuda", "validate"]


def _package_copy(site: Path) -> Path:
    package = site / "rextio_device_cuda"
    installed = Path(rextio_device_cuda.__file__).resolve().parent
    shutil.copytree(installed, package, ignore=shutil.ignore_patterns("__pycache__", "_bin"))
    return package


@pytest.fixture
def shipped(native: NativeBinaries, tmp_path: Path) -> dict[str, str]:
    """PYTHONPATH naming the package with the built probe and smoke in ``_bin/``."""
    site = tmp_path / "site"
    binaries = _package_copy(site) / "_bin"
    binaries.mkdir()
    sums = ""
    for binary in (native.probe, native.smoke):
        shutil.copy2(binary, binaries / binary.name)
        sums += f"{hashlib.sha256(binary.read_bytes()).hexdigest()}  {binary.name}\n"
    # The platform wheel's record of its binaries (python/hatch_build.py writes it).
    (binaries / "SHA256SUMS").write_text(sums, encoding="ascii")
    return {"PYTHONPATH": str(site)}


def _run(
    arguments: list[str | os.PathLike[str]], env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*VALIDATE, *arguments],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **env},
    )


def _unwrapped(text: str) -> str:
    """Printed text with each wrapped line joined to the one before (the package
    continues a line with two spaces), after checking every line fits 100 columns."""
    assert all(len(line) <= 100 for line in text.splitlines()), text
    return text.replace("\n  ", " ")


def _explained(code: str) -> str:
    explanation, remedy = PROVIDER_SPEC.reason_codes[code]
    # The remedy as validate prints it: naming its own options (--driver-root).
    return f"{code}: {explanation}\nremedy: {for_command(remedy, OPTION_FLAGS)}"


def _evidence(path: Path, stdout: str, local: Path) -> dict[str, Any]:
    evidence: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    assert json.loads(stdout) == evidence
    # Every key the spec lists (tests/python/test_wire_facts.py: the wire's), no other.
    assert sorted(evidence) == sorted(PROVIDER_SPEC.validation_evidence.keys)
    assert evidence["support_claim"] is False
    assert evidence["kernel_executed"] is False
    assert evidence["certification_ready"] is False
    assert evidence["provider_version"] == rextio_device_cuda.__version__

    def strings(value: object) -> list[str]:
        if isinstance(value, str):
            return [value]
        if isinstance(value, dict):
            return [s for key, item in value.items() for s in [key, *strings(item)]]
        if isinstance(value, list):
            return [s for item in value for s in strings(item)]
        return []

    assert not [s for s in strings(evidence) if PurePosixPath(s).is_absolute() or "\\" in s]
    assert str(local) not in path.read_text(encoding="utf-8")
    return evidence


def test_validate_succeeds_beside_the_simulated_driver(
    sim_host: SimulatedHost, shipped: dict[str, str], tmp_path: Path
) -> None:
    output = tmp_path / "evidence.json"
    argv: list[str | os.PathLike[str]] = [*VALIDATE, "--sm", "sm_80", "--device", "0"]
    argv += ["--output", output]
    run = sim_host.run(DriverLayout(config=ONE_DEVICE), argv, extra_env=shipped)
    assert run.returncode == 0, run.stderr
    assert "validated: preflight ready and lifetime smoke complete on device 0" in run.stderr
    evidence = _evidence(output, run.stdout, tmp_path)
    assert evidence["validated"] is True
    assert evidence["reason_code"] is None
    assert evidence["capability"] == "cuda-linux-x86_64"
    assert evidence["probe_report"]["status"] == "probe-complete"
    assert evidence["preflight"]["status"] == "ready"
    assert evidence["preflight"]["observations"]["selected.sm"] == "sm_80"
    # The shipped probe is pinned: its digest is recorded and observed.
    digest = hashlib.sha256(sim_host.native.probe.read_bytes()).hexdigest()
    assert evidence["probe_sha256"] == digest
    assert evidence["preflight"]["observations"]["probe.sha256"] == digest
    smoke_digest = hashlib.sha256(sim_host.native.smoke.read_bytes()).hexdigest()
    assert evidence["smoke_sha256"] == smoke_digest
    assert evidence["smoke"]["status"] == "smoke-complete"
    assert evidence["round_trip"] is True
    assert [line.split(" ", 1)[0] for line in run.calls].count("cuCtxDestroy_v2") == 1


def test_validate_fails_over_a_driver_that_loses_a_byte(
    sim_host: SimulatedHost, shipped: dict[str, str], tmp_path: Path
) -> None:
    output = tmp_path / "evidence.json"
    argv: list[str | os.PathLike[str]] = [*VALIDATE, "--sm", "sm_80", "--output", output]
    run = sim_host.run(
        DriverLayout(config=(*ONE_DEVICE, "corrupt_read=2048")), argv, extra_env=shipped
    )
    assert run.returncode == 1, run.stderr
    assert "this host is not validated.\n" + _explained("DEVICE_ROUND_TRIP_MISMATCH") in _unwrapped(
        run.stderr
    )
    evidence = _evidence(output, run.stdout, tmp_path)
    assert (evidence["validated"], evidence["round_trip"]) == (False, False)
    assert evidence["reason_code"] == "DEVICE_ROUND_TRIP_MISMATCH"
    assert evidence["preflight"]["status"] == "ready"
    assert evidence["smoke"]["round_trip"] is False


def test_a_validated_toolkit_root_is_recorded_but_never_named(
    sim_host: SimulatedHost, shipped: dict[str, str], tmp_path: Path
) -> None:
    toolkit = tmp_path / "toolkit-root-marker"
    (toolkit / "include").mkdir(parents=True)
    (toolkit / "version.json").write_text(json.dumps({"cuda": {"version": "12.4.1"}}))
    (toolkit / "include" / "cuda.h").write_text("/* header */\n")
    (toolkit / "lib64").mkdir()
    (toolkit / "lib64" / "libcudart.so").write_bytes(b"\x7fELF")
    output = tmp_path / "evidence.json"
    argv: list[str | os.PathLike[str]] = [*VALIDATE, "--sm", "sm_80", "--toolkit-root", toolkit]
    argv += ["--output", output]
    run = sim_host.run(DriverLayout(config=ONE_DEVICE), argv, extra_env=shipped)
    assert run.returncode == 0, run.stderr
    evidence = _evidence(output, run.stdout, tmp_path)
    assert (evidence["validated"], evidence["toolkit_root_configured"]) == (True, True)
    assert evidence["preflight"]["observations"]["toolkit.version"] == "12.4.1"
    assert "toolkit-root-marker" not in output.read_text(encoding="utf-8")


def test_validate_explains_a_missing_driver_on_this_host(
    namespace_tools: NamespaceTools, shipped: dict[str, str], tmp_path: Path
) -> None:
    # namespace_tools fails the test where this host has a driver of its own.
    output = tmp_path / "evidence.json"
    run = _run(["--sm", "sm_80", "--output", output], shipped)
    assert run.returncode == 1, run.stderr
    # The same lines preflight prints, with what its probe observed (this
    # architecture's directories, one per line), not the whole explanation.
    command = [*VALIDATE[:3], "preflight", "--capability", "cuda-linux-x86_64"]
    preflight = subprocess.run(
        [*command, "--device", "0", "--sm", "sm_80"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **shipped},
    )
    assert preflight.returncode == 1, preflight.stderr
    refusal = preflight.stderr.split("\n", 1)[1]
    assert refusal.startswith("LIBCUDA_SO_NOT_FOUND: ")
    assert "\nobserved: the probe searched its x86_64 directories\n" in refusal
    assert run.stderr.endswith("this host is not validated.\n" + refusal), run.stderr
    assert all(len(line) <= 100 for line in run.stderr.splitlines())
    evidence = _evidence(output, run.stdout, tmp_path)
    assert evidence["validated"] is False
    assert evidence["round_trip"] is False
    assert evidence["reason_code"] == "LIBCUDA_SO_NOT_FOUND"
    assert evidence["probe_report"]["reason_code"] == "LIBCUDA_SO_NOT_FOUND"
    assert evidence["smoke"]["reason_code"] == "LIBCUDA_SO_NOT_FOUND"


def test_output_replaces_a_link_another_user_planted_never_writing_through_it(
    namespace_tools: NamespaceTools, shipped: dict[str, str], tmp_path: Path
) -> None:
    # Root writes its evidence into a shared sticky directory (as /tmp) where
    # another user planted a link at the output's name, pointing at a 0600
    # file of root's; this host does not protect links itself.
    assert Path("/proc/sys/fs/protected_symlinks").read_text(encoding="ascii").strip() == "0"
    victim = tmp_path / "victim"
    victim.write_text("root's own\n")
    victim.chmod(0o600)
    shared = Path(tempfile.mkdtemp(prefix="rextio-shared-", dir="/tmp"))
    try:
        shared.chmod(0o1777)
        output = shared / "evidence.json"
        ln = shutil.which("ln")
        assert ln is not None
        subprocess.run(
            [ln, "-s", "--", victim, output],
            user=65534,
            group=65534,
            extra_groups=[],
            check=True,
            timeout=60,
        )
        assert output.lstat().st_uid == 65534
        run = _run(["--sm", "sm_80", "--output", output], shipped)
        assert run.returncode == 1, run.stderr
        assert victim.read_text() == "root's own\n"
        assert not output.is_symlink()
        assert output.stat().st_uid == 0
        assert _evidence(output, run.stdout, tmp_path)["reason_code"] == "LIBCUDA_SO_NOT_FOUND"
        assert sorted(path.name for path in shared.iterdir()) == ["evidence.json"]
    finally:
        shutil.rmtree(shared)


def test_without_shipped_binaries_the_message_names_two_commands_that_complete(
    sim_host: SimulatedHost, tmp_path: Path
) -> None:
    # The pure wheel: no _bin/. The message names build-probe into its default
    # directory and the validate command that uses what it builds.
    site = tmp_path / "site"
    _package_copy(site)
    output = tmp_path / "evidence.json"
    env = {"PYTHONPATH": str(site), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    run = _run(["--sm", "sm_80", "--output", output], env)
    assert run.returncode == 1, run.stderr
    assert run.stdout == ""
    assert not output.exists()
    # The prose fits 100 columns; the two commands are whole lines to paste.
    said = run.stderr.replace("\n  ", " ").splitlines()
    assert said[0].startswith("error: no probe ships for this platform: ")
    lines = [line for line in run.stderr.splitlines() if line.startswith("  python -m ")]
    version = rextio_device_cuda.__version__
    directory = tmp_path / "cache" / "rextio-device-cuda" / f"probe-{version}"
    probe = directory / PROVIDER_SPEC.probe_report.probe
    smoke = directory / PROVIDER_SPEC.smoke.probe
    build = ["python", "-m", "rextio_device_cuda", "build-probe", "--into", str(directory)]
    validate = ["python", "-m", "rextio_device_cuda", "validate", "--sm", "sm_80"]
    validate += ["--device", "0", "--output", str(output)]
    validate += ["--probe", str(probe), "--probe-sha256", "PROBE_SHA256"]
    validate += ["--smoke", str(smoke), "--smoke-sha256", "SMOKE_SHA256"]
    assert shlex.split(lines[0]) == build
    # The validate command over several lines (one option a line), both
    # binaries pinned by the digests build-probe prints (it prints this command
    # with them filled in).
    every = run.stderr.splitlines()
    start = every.index(lines[1])
    end = next(index for index in range(start, len(every)) if not every[index].endswith("\\"))
    continued = " ".join(line.removesuffix("\\") for line in every[start : end + 1])
    assert shlex.split(continued) == validate
    assert every[end + 1] == (
        "(PROBE_SHA256, SMOKE_SHA256: the digests build-probe prints, with this command)"
    )
    # What build-probe writes there (its own tests build it with cargo).
    directory.mkdir(parents=True)
    shutil.copy2(sim_host.native.probe, probe)
    shutil.copy2(sim_host.native.smoke, smoke)
    digests = {
        "PROBE_SHA256": hashlib.sha256(probe.read_bytes()).hexdigest(),
        "SMOKE_SHA256": hashlib.sha256(smoke.read_bytes()).hexdigest(),
    }
    followed = sim_host.run(
        DriverLayout(config=ONE_DEVICE),
        [sys.executable, *(digests.get(word, word) for word in validate[1:])],
        extra_env=env,
    )
    assert followed.returncode == 0, followed.stderr
    evidence = _evidence(output, followed.stdout, tmp_path)
    assert evidence["validated"] is True
    assert evidence["probe_sha256"] == hashlib.sha256(probe.read_bytes()).hexdigest()
    assert evidence["smoke_sha256"] == hashlib.sha256(smoke.read_bytes()).hexdigest()


# The driver only in NVIDIA's forward-compatibility directory, no reviewed root.
COMPAT = "/usr/local/cuda-12.8/compat"
IN_COMPAT_ONLY = DriverLayout(
    config=ONE_DEVICE,
    install="absent",
    extra_steps=(
        f"install -d -m 0755 {COMPAT}",
        f"install -m 0644 {{image}} {COMPAT}/libcuda.so.570.124.06",
        f"ln -s libcuda.so.570.124.06 {COMPAT}/libcuda.so.1",
    ),
)


def test_validate_with_a_driver_root_loads_only_there_probe_preflight_and_smoke(
    sim_host: SimulatedHost, shipped: dict[str, str], tmp_path: Path
) -> None:
    output = tmp_path / "evidence.json"
    argv: list[str | os.PathLike[str]] = [*VALIDATE, "--sm", "sm_80", "--output", output]
    plain = sim_host.run(IN_COMPAT_ONLY, argv, extra_env=shipped)
    assert plain.returncode == 1, plain.stderr
    # Not found where it looks by itself; the remedy names this command's option.
    assert json.loads(plain.stdout)["reason_code"] == "LIBCUDA_SO_NOT_FOUND"
    remedy = PROVIDER_SPEC.reason_codes["LIBCUDA_SO_NOT_FOUND"][1]
    assert "driver_root" in remedy
    assert f"remedy: {remedy.replace('driver_root', '--driver-root')}\n" in _unwrapped(
        plain.stderr
    )
    run = sim_host.run(IN_COMPAT_ONLY, [*argv, "--driver-root", COMPAT], extra_env=shipped)
    assert run.returncode == 0, run.stderr
    evidence = _evidence(output, run.stdout, tmp_path)
    assert evidence["validated"] is True
    assert (evidence["probe_report"]["status"], evidence["smoke"]["status"]) == (
        "probe-complete",
        "smoke-complete",
    )
    assert "cuda-12.8" not in run.stdout


def test_the_smoke_takes_the_probes_driver_root_after_the_device(
    sim_host: SimulatedHost,
) -> None:
    smoke = sim_host.native.smoke
    found = sim_host.run(IN_COMPAT_ONLY, [smoke, "--device", "0", "--driver-root", COMPAT])
    assert found.returncode == 0, found.stderr
    assert (found.record()["status"], found.record()["reason_code"]) == ("smoke-complete", None)
    # Only there: the image at the reviewed path is not tried.
    elsewhere = sim_host.run(
        DriverLayout(config=ONE_DEVICE, extra_steps=("install -d -m 0755 /usr/local/empty",)),
        [smoke, "--device", "0", "--driver-root", "/usr/local/empty"],
    )
    assert elsewhere.returncode == 1, elsewhere.stderr
    assert elsewhere.record()["reason_code"] == "LIBCUDA_SO_NOT_FOUND"
    assert elsewhere.calls == ()
    relative = sim_host.run(IN_COMPAT_ONLY, [smoke, "--device", "0", "--driver-root", "compat"])
    assert relative.record()["reason_code"] == "DRIVER_ROOT_NOT_ABSOLUTE"
    assert relative.calls == ()
    # The device comes first; anything else is refused whole (exit 2).
    swapped = sim_host.run(IN_COMPAT_ONLY, [smoke, "--driver-root", COMPAT, "--device", "0"])
    assert (swapped.returncode, swapped.record()["reason_code"]) == (2, "INVALID_ARGUMENTS")
    assert swapped.calls == ()


def test_validate_runs_the_binaries_it_is_given_pinned_to_the_digest_given(
    sim_host: SimulatedHost, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    _package_copy(site)
    env = {"PYTHONPATH": str(site)}
    probe, smoke = sim_host.native.probe, sim_host.native.smoke
    digest = hashlib.sha256(probe.read_bytes()).hexdigest()
    smoke_digest = hashlib.sha256(smoke.read_bytes()).hexdigest()
    output = tmp_path / "evidence.json"
    argv: list[str | os.PathLike[str]] = [*VALIDATE, "--sm", "sm_80", "--output", output]
    argv += ["--probe", probe, "--smoke", smoke, "--smoke-sha256", smoke_digest]
    argv += ["--probe-sha256", digest]
    run = sim_host.run(DriverLayout(config=ONE_DEVICE), argv, extra_env=env)
    assert run.returncode == 0, run.stderr
    evidence = _evidence(output, run.stdout, tmp_path)
    assert (evidence["validated"], evidence["probe_sha256"]) == (True, digest)
    assert evidence["preflight"]["observations"]["probe.sha256"] == digest
    # Another digest: the probe is not run, and nothing is validated.
    other = [*argv[:-1], "0" * 64]
    refused = sim_host.run(DriverLayout(config=ONE_DEVICE), other, extra_env=env)
    assert refused.returncode == 1, refused.stderr
    record = json.loads(refused.stdout)
    assert (record["validated"], record["reason_code"]) == (False, "PROBE_DIGEST_MISMATCH")
    assert record["probe_report"]["reason_code"] == "PROBE_DIGEST_MISMATCH"


def test_a_binary_that_is_not_the_recorded_one_is_refused(
    shipped: dict[str, str], tmp_path: Path
) -> None:
    probe = tmp_path / "site" / "rextio_device_cuda" / "_bin" / PROVIDER_SPEC.probe_report.probe
    probe.write_bytes(probe.read_bytes() + b"\0")
    output = tmp_path / "evidence.json"
    run = _run(["--sm", "sm_80", "--output", output], shipped)
    assert run.returncode == 1, run.stderr
    assert "not the" in _unwrapped(run.stderr)
    assert "the wheel recorded; reinstall the wheel" in _unwrapped(run.stderr)
    assert "Traceback" not in run.stderr
    assert run.stdout == ""
    assert not output.exists()


@pytest.mark.parametrize("name", ["missing-directory/evidence.json", "."])
def test_an_output_it_cannot_write_is_refused_before_running(
    name: str, shipped: dict[str, str], tmp_path: Path
) -> None:
    output = tmp_path / name
    run = _run(["--sm", "sm_80", "--output", output], shipped)
    assert run.returncode == 2, run.stderr
    said = _unwrapped(run.stderr).splitlines()
    assert said[-1].startswith("error: argument --output: ")
    assert [line for line in said if "error" in line] == [said[-1]]
    assert "Traceback" not in run.stderr
    assert ".tmp" not in run.stderr
    assert run.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]


@pytest.mark.parametrize(
    "arguments",
    [
        [],
        ["--sm", "80"],
        ["--sm", "sm_80", "--device", "1024"],
        ["--sm", "sm_80", "--device", "-1"],
        ["--sm", "sm_80", "--device", "x"],
        ["--sm", "sm_80", "--device"],
        ["--sm", "sm_80", "--frobnicate"],
        ["--sm", "sm_80", "--toolkit-root", "cuda"],
        ["--sm", "sm_80", "--driver-root", "/nonexistent"],
        ["--sm", "sm_80", "--probe", "probe", "--smoke", "/bin/sh"],
        ["--sm", "sm_80", "--probe", "/bin/sh"],
        ["--sm", "sm_80", "--probe-sha256", "abc"],
        ["--sm", "sm_80", "--probe", "/bin/sh", "--smoke", "/bin/sh", "--probe-sha256", "0" * 64],
        ["--sm", "sm_80", "--probe", "/bin/sh", "--smoke", "/bin/sh", "--smoke-sha256", "0" * 64],
        ["--sm", "sm_80", "--probe-sha256", "0" * 64, "--smoke-sha256", "0" * 64],
    ],
    ids=[
        "no-sm",
        "bad-sm",
        "device-out-of-range",
        "negative",
        "not-a-number",
        "no-value",
        "unknown",
        "relative-toolkit-root",
        "missing-driver-root",
        "relative-probe",
        "probe-without-smoke",
        "bad-digest",
        "probe-digest-alone",
        "smoke-digest-alone",
        "digests-without-binaries",
    ],
)
def test_validate_usage_errors_exit_2_before_running_anything(
    arguments: list[str], shipped: dict[str, str], tmp_path: Path
) -> None:
    output = tmp_path / "evidence.json"
    run = _run([*arguments, "--output", output], shipped)
    assert run.returncode == 2, run.stderr
    said = _unwrapped(run.stderr).splitlines()
    assert [line for line in said if line.startswith("error: ")] == [said[-1]]
    assert "Traceback" not in run.stderr
    assert run.stdout == ""
    assert not output.exists()


# -- each binary read once, both pinned (found by an adversarial review) --------------

HER_UID = 1234
# Root's validate while she (a forked child that became her, as no
# interpreter of root's need be one she may run) swaps each binary with her
# own variant, atomically (RENAME_EXCHANGE), over and over until killed; its
# exit status, stdout and stderr as JSON.
DURING_SWAPS = f"""
import ctypes, json, os, signal, subprocess, sys
folder, *arguments = sys.argv[1:]
libc = ctypes.CDLL(None, use_errno=True)
def swap(name):
    if libc.renameat2(-100, name.encode(), -100, (name + ".other").encode(), 2) != 0:
        raise OSError(ctypes.get_errno(), name)
ready, ready_to_write = os.pipe()
her = os.fork()
if her == 0:
    try:
        os.close(ready)
        os.setgroups([])
        os.setgid({HER_UID})
        os.setuid({HER_UID})
        os.chdir(folder)
        swap("probe")
        swap("smoke")
        os.write(ready_to_write, b"r")
        while True:
            swap("probe")
            swap("smoke")
    finally:
        os._exit(0)
os.close(ready_to_write)
try:
    assert os.read(ready, 1) == b"r", "her first swap failed"
    done = subprocess.run(
        [sys.executable, "-m", "rextio_device_cuda", "validate", *arguments],
        capture_output=True, text=True, check=False,
    )
finally:
    os.kill(her, signal.SIGKILL)
    os.waitpid(her, 0)
print(json.dumps([done.returncode, done.stdout, done.stderr]))
"""


@pytest.fixture
def her_folder(native: NativeBinaries) -> Iterator[Path]:
    """A folder another user owns in /tmp, holding the probe and the smoke and
    her variant of each (``probe.other``: the same program, other bytes)."""
    shared = Path(tempfile.mkdtemp(prefix="rextio-hers-", dir="/tmp"))
    try:
        shared.chmod(0o755)
        folder = shared / "hers"
        folder.mkdir(mode=0o755)
        for name, binary in (("probe", native.probe), ("smoke", native.smoke)):
            data = binary.read_bytes()
            for file, content in ((name, data), (f"{name}.other", data + b"hers\0")):
                (folder / file).write_bytes(content)
                (folder / file).chmod(0o755)
                os.chown(folder / file, HER_UID, HER_UID)
        os.chown(folder, HER_UID, HER_UID)
        yield folder
    finally:
        shutil.rmtree(shared)


def _digests(folder: Path, name: str) -> set[str]:
    return {
        hashlib.sha256((folder / file).read_bytes()).hexdigest() for file in (name, f"{name}.other")
    }


@pytest.mark.process_stress
@pytest.mark.parametrize("pinned", [False, True], ids=["unpinned", "pinned"])
def test_a_swap_by_another_user_during_validate_never_mixes_binaries(
    pinned: bool, sim_host: SimulatedHost, her_folder: Path
) -> None:
    probe, smoke = her_folder / "probe", her_folder / "smoke"
    mine = {name: hashlib.sha256((her_folder / name).read_bytes()).hexdigest() for name in
            ("probe", "smoke")}
    arguments = ["--sm", "sm_80", "--probe", str(probe), "--smoke", str(smoke)]
    if pinned:
        arguments += ["--probe-sha256", mine["probe"], "--smoke-sha256", mine["smoke"]]
    argv = [sys.executable, "-I", "-c", DURING_SWAPS, str(her_folder), *arguments]
    run = sim_host.run(DriverLayout(config=ONE_DEVICE), argv)
    lines = run.stdout.strip().splitlines()
    assert lines, (run.returncode, run.stderr)
    status, stdout, stderr = json.loads(lines[-1])
    assert "Traceback" not in stderr
    evidence = json.loads(stdout)
    records = {
        "probe_report": evidence["probe_report"],
        "preflight": evidence["preflight"],
        "smoke": evidence["smoke"],
    }
    refusals = {name: record.get("reason_code") for name, record in records.items()}
    assert evidence["probe_sha256"] in _digests(her_folder, "probe")
    assert evidence["smoke_sha256"] in _digests(her_folder, "smoke")
    if not pinned:
        # Whatever was read, once, ran for every record: no record saw other bytes.
        assert "PROBE_DIGEST_MISMATCH" not in refusals.values(), refusals
        assert (status, evidence["validated"]) == (0, True), (refusals, stderr)
        return
    # Pinned: her bytes are refused, and a record of the probe's refuses
    # only beside the other (the same read); validated only with every record
    # ready or complete, from the pinned bytes.
    probe_refused = refusals["probe_report"] == "PROBE_DIGEST_MISMATCH"
    assert probe_refused == (refusals["preflight"] == "PROBE_DIGEST_MISMATCH"), refusals
    if evidence["validated"] is True:
        assert status == 0
        assert [record["status"] for record in records.values()] == [
            "probe-complete",
            "ready",
            "smoke-complete",
        ]
    else:
        assert status == 1
        assert "PROBE_DIGEST_MISMATCH" in refusals.values(), refusals


_MARKING_SMOKE = r"""
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
int main(void) {
    int fd = open(MARKER, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) { (void)write(fd, "ran\n", 4); close(fd); }
    puts("{\"status\": \"smoke-complete\", \"round_trip\": true}");
    return 0;
}
"""


def test_her_elf_renamed_over_a_pinned_smoke_is_refused_by_digest(
    sim_host: SimulatedHost, her_folder: Path
) -> None:
    mine = {name: hashlib.sha256((her_folder / name).read_bytes()).hexdigest() for name in
            ("probe", "smoke")}
    # Her own smoke, which says it completed and leaves a mark when it runs.
    marker = her_folder / "ran"
    source = her_folder / "smoke.c"
    source.write_text(_MARKING_SMOKE, encoding="ascii")
    compiler = shutil.which("cc")
    assert compiler is not None, "a C compiler (cc) is needed"
    built = her_folder / "built"
    subprocess.run([compiler, f'-DMARKER="{marker}"', "-o", built, source], check=True)
    built.chmod(0o755)
    os.chown(built, HER_UID, HER_UID)
    os.chown(her_folder, HER_UID, HER_UID)
    mv = shutil.which("mv")
    assert mv is not None
    subprocess.run(
        [mv, "-f", str(built), str(her_folder / "smoke")],
        user=HER_UID,
        group=HER_UID,
        extra_groups=[],
        check=True,
        timeout=60,
    )
    arguments: list[str | os.PathLike[str]] = ["--sm", "sm_80", "--probe", her_folder / "probe"]
    arguments += ["--smoke", her_folder / "smoke"]
    arguments += ["--probe-sha256", mine["probe"], "--smoke-sha256", mine["smoke"]]
    run = sim_host.run(DriverLayout(config=ONE_DEVICE), [*VALIDATE, *arguments])
    assert run.returncode == 1, run.stderr
    evidence = json.loads(run.stdout)
    assert evidence["validated"] is False
    assert evidence["smoke"]["reason_code"] == "PROBE_DIGEST_MISMATCH"
    assert evidence["reason_code"] == "PROBE_DIGEST_MISMATCH"
    assert evidence["preflight"]["status"] == "ready"
    assert not marker.exists()


# -- --output through a device or FIFO, never renamed over ------------------------------

# In a private mount namespace with a private /dev (a tmpfs holding its own
# null device and stdout link), run validate with --output TARGET, then say
# what TARGET is. The host's /dev is never touched.
PRIVATE_DEV = """
set -e
mount --make-rprivate /
mount -t tmpfs -o mode=0755,size=1m rextio-dev /dev
mknod -m 0666 /dev/null c 1 3
ln -s /proc/self/fd/1 /dev/stdout
target=$1; shift
set +e
"$@" --output "$target" 2>/dev/null; status=$?
set -e
echo "status=$status"
stat -c 'after=%F %a %U' "$target"
"""


def _in_private_dev(
    namespace_tools: NamespaceTools, target: str, arguments: list[str], env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            namespace_tools.unshare,
            "--mount",
            "--propagation",
            "private",
            namespace_tools.shell,
            "-c",
            PRIVATE_DEV,
            "private-dev",
            target,
            *VALIDATE,
            *arguments,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **env},
    )


def test_output_to_dev_null_leaves_the_device_a_device(
    namespace_tools: NamespaceTools, shipped: dict[str, str]
) -> None:
    run = _in_private_dev(namespace_tools, "/dev/null", ["--sm", "sm_80"], shipped)
    lines = run.stdout.splitlines()
    assert lines[-2:] == ["status=1", "after=character special file 666 root"], run.stderr
    assert json.loads("\n".join(lines[:-2]))["reason_code"] == "LIBCUDA_SO_NOT_FOUND"


def test_output_to_dev_stdout_writes_the_evidence_there(
    namespace_tools: NamespaceTools, shipped: dict[str, str]
) -> None:
    run = _in_private_dev(namespace_tools, "/dev/stdout", ["--sm", "sm_80"], shipped)
    lines = run.stdout.splitlines()
    # The link is still the link (root's, to this process's stdout).
    assert lines[-2:] == ["status=1", "after=symbolic link 777 root"], run.stderr
    # Printed, then written to the same stdout: the evidence twice, whole.
    text = "\n".join(lines[:-2]) + "\n"
    half = len(text) // 2
    assert text[:half] == text[half:]
    assert json.loads(text[:half])["reason_code"] == "LIBCUDA_SO_NOT_FOUND"


def test_output_to_a_fifo_writes_the_evidence_into_it(
    shipped: dict[str, str], tmp_path: Path
) -> None:
    fifo = tmp_path / "evidence.fifo"
    os.mkfifo(fifo)
    # The reader is open before validate writes (a FIFO no one reads is an error).
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        run = _run(["--sm", "sm_80", "--output", fifo], shipped)
        assert run.returncode == 1, run.stderr
        assert stat.S_ISFIFO(fifo.lstat().st_mode)
        received = b""
        while chunk := os.read(reader, 65536):
            received += chunk
    except BlockingIOError:
        pass
    finally:
        os.close(reader)
    assert received.decode("utf-8") == run.stdout
    assert json.loads(received)["reason_code"] == "LIBCUDA_SO_NOT_FOUND"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["evidence.fifo", "site"]


def test_output_to_a_fifo_no_one_reads_is_refused_without_waiting(
    shipped: dict[str, str], tmp_path: Path
) -> None:
    fifo = tmp_path / "evidence.fifo"
    os.mkfifo(fifo)
    run = _run(["--sm", "sm_80", "--output", fifo], shipped)
    assert run.returncode == 1, run.stderr
    assert f"error: the evidence was not written to {fifo}: no process reads the FIFO" in (
        _unwrapped(run.stderr).splitlines()
    )
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
