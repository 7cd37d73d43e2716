"""The optional probe pin (probe_sha256): check and run the same bytes."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import threading
from pathlib import Path

import pytest
import test_rextio_generate as generate_fixture
from cuda_support import (
    CAPABILITIES,
    LANES,
    SPEC,
    ProbeFactory,
    ready_options,
    report,
    request_for,
    run_cli,
)
from rextio.devices import DevicePreflightStatus

from rextio_device_cuda import CudaDeviceProvider
from rextio_device_cuda import _sealed as sealed_module
from rextio_device_cuda.config import CudaProviderConfig
from rextio_device_cuda.probe import CudaProbeError, SubprocessProbeRunner

TARGETS = {
    "x86_64-unknown-linux-gnu": ("linux", "x86_64", "gnu"),
    "aarch64-unknown-linux-gnu": ("linux", "aarch64", "gnu"),
    "x86_64-pc-windows-msvc": ("windows", "x86_64", "msvc"),
}
MALFORMED = ["", "0" * 63, "0" * 65, "A" * 64, "g" * 64, " " + "0" * 63, "0" * 63 + "\n"]
# Core's options accept only non-empty printable values; these reach the provider.
MALFORMED_OPTIONS = [value for value in MALFORMED if value and value.isprintable()]
RACE_RUNS = 300
# The session fixture that installs the test-only domain plugin for `rextio`.
plugin_site = generate_fixture.plugin_site


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _provider_result(options: dict[str, str], capability: str = "cuda-linux-x86_64") -> object:
    return CudaDeviceProvider().preflight(request_for(capability, options))


# -- configuration -----------------------------------------------------------------


def test_config_pin_is_optional_last_and_validated() -> None:
    fields = dataclasses.fields(CudaProviderConfig)
    assert fields[-1].name == "probe_sha256"
    assert fields[-1].default is None
    assert CudaProviderConfig().probe_sha256 is None
    assert CudaProviderConfig(probe_sha256="a" * 64).probe_sha256 == "a" * 64
    for bad in [*MALFORMED, 42, b"0" * 64]:
        with pytest.raises(ValueError, match="probe_sha256"):
            CudaProviderConfig(probe_sha256=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", MALFORMED)
def test_runner_rejects_a_malformed_pin(bad: str, probes: ProbeFactory) -> None:
    with pytest.raises(ValueError, match="probe_sha256"):
        SubprocessProbeRunner(probes.directory / "probe", probe_sha256=bad)


# -- preflight through the provider --------------------------------------------------


@pytest.mark.parametrize("capability", sorted(CAPABILITIES))
def test_every_lane_accepts_the_pin_and_observes_it(capability: str, probes: ProbeFactory) -> None:
    triple = CAPABILITIES[capability]["target_triple"]
    probe = probes.binary(report(target=TARGETS[triple]))
    pin = _digest(probe)
    unpinned = _provider_result(ready_options(probe), capability)
    pinned = _provider_result(ready_options(probe, probe_sha256=pin), capability)
    assert unpinned.status is DevicePreflightStatus.READY, unpinned.reason_codes  # type: ignore[attr-defined]
    assert pinned.status is DevicePreflightStatus.READY, pinned.reason_codes  # type: ignore[attr-defined]
    observed = dict(pinned.observations)  # type: ignore[attr-defined]
    assert observed.pop("probe.sha256") == pin
    # Pinning adds exactly one observation; without a pin nothing changes.
    assert observed == dict(unpinned.observations)  # type: ignore[attr-defined]
    assert "probe.sha256" not in dict(unpinned.observations)  # type: ignore[attr-defined]


def test_a_wrong_pin_never_runs_the_probe(probes: ProbeFactory) -> None:
    probe = probes.binary(report())
    wrong = hashlib.sha256(b"another probe").hexdigest()
    result = _provider_result(ready_options(probe, probe_sha256=wrong))
    assert result.status is DevicePreflightStatus.UNAVAILABLE  # type: ignore[attr-defined]
    assert result.reason_codes == ("PROBE_DIGEST_MISMATCH",)  # type: ignore[attr-defined]
    assert result.observations == ()  # type: ignore[attr-defined]
    assert not probes.marker().exists()


@pytest.mark.parametrize("bad", MALFORMED_OPTIONS)
def test_a_malformed_pin_option_is_refused_before_anything_runs(
    bad: str, probes: ProbeFactory
) -> None:
    probe = probes.printing(report())
    result = _provider_result(ready_options(probe, probe_sha256=bad))
    assert result.reason_codes == ("PROBE_SHA256_INVALID",)  # type: ignore[attr-defined]
    assert not probes.marker().exists()


def test_a_malformed_pin_comes_with_the_option_checks(probes: ProbeFactory) -> None:
    # Step 5: before the requirement checks (a bad SM would be step 7 or later).
    probe = probes.printing(report())
    options = ready_options(probe, probe_sha256="bad", sm="sm_8")
    assert _provider_result(options).reason_codes == ("PROBE_SHA256_INVALID",)  # type: ignore[attr-defined]


def test_pin_in_option_and_constructor(probes: ProbeFactory) -> None:
    probe = probes.binary(report())
    pin = _digest(probe)
    request = request_for("cuda-linux-x86_64", ready_options(probe, probe_sha256=pin))
    same = CudaDeviceProvider(CudaProviderConfig(probe_sha256=pin)).preflight(request)
    assert same.status is DevicePreflightStatus.READY
    other = CudaDeviceProvider(CudaProviderConfig(probe_sha256="0" * 64)).preflight(request)
    assert other.reason_codes == ("PROBE_CONFIGURATION_CONFLICT",)
    # The constructor alone pins too.
    alone = CudaDeviceProvider(CudaProviderConfig(probe_sha256="0" * 64)).preflight(
        request_for("cuda-linux-x86_64", ready_options(probe))
    )
    assert alone.reason_codes == ("PROBE_DIGEST_MISMATCH",)
    assert probes.marker().read_text() == "ran\n"  # only the matching run ran it


def test_a_pin_cannot_bind_an_injected_runner(probes: ProbeFactory) -> None:
    probe = probes.printing(report())
    provider = CudaDeviceProvider(probe_runner=SubprocessProbeRunner(probe))
    options = {"device_ordinal": "0", "sm": "sm_80", "probe_sha256": _digest(probe)}
    result = provider.preflight(request_for("cuda-linux-x86_64", options))
    assert result.reason_codes == ("PROBE_CONFIGURATION_CONFLICT",)
    assert not probes.marker().exists()


# -- the runner: open once, hash the descriptor, exec the descriptor --------------


def test_runner_pinned_and_unpinned_read_the_same(probes: ProbeFactory) -> None:
    probe = probes.binary(report())
    pinned = SubprocessProbeRunner(probe, probe_sha256=_digest(probe))
    assert pinned.probe_sha256 == _digest(probe)
    assert pinned.read_output() == SubprocessProbeRunner(probe).read_output()


def test_a_symlinked_probe_is_pinned_by_its_target(probes: ProbeFactory) -> None:
    probe = probes.binary(report())
    link = probes.directory / "link"
    link.symlink_to(probe)
    assert SubprocessProbeRunner(link, probe_sha256=_digest(probe)).run().status == (
        "probe-complete"
    )


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda d: d / "missing", "PROBE_NOT_FOUND"),
        (lambda d: d, "PROBE_NOT_EXECUTABLE"),
        (lambda d: d / "fifo", "PROBE_NOT_EXECUTABLE"),
    ],
    ids=["missing", "directory", "fifo"],
)
def test_pinned_path_checks_keep_their_codes(make: object, code: str, probes: ProbeFactory) -> None:
    os.mkfifo(probes.directory / "fifo", 0o755)
    path = make(probes.directory)  # type: ignore[operator]
    with pytest.raises(CudaProbeError) as caught:
        SubprocessProbeRunner(path, probe_sha256="0" * 64).run()
    assert caught.value.reason_code == code


def test_a_swap_after_the_check_does_not_change_what_runs(
    probes: ProbeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Deterministic worst case: the file at the path is replaced right after
    # the descriptor was hashed and before the spawn. The checked bytes run.
    good = probes.binary(report(), name="good")
    bad = probes.binary(report(), name="bad")
    target = probes.directory / "probe"
    os.link(good, target)
    real_hash = sealed_module.sha256_of_descriptor

    def hash_then_swap(descriptor: int, deadline: float) -> str:
        digest = real_hash(descriptor, deadline)
        os.replace(bad, target)
        return digest

    monkeypatch.setattr(sealed_module, "sha256_of_descriptor", hash_then_swap)
    parsed = SubprocessProbeRunner(target, probe_sha256=_digest(good)).run()
    assert parsed.status == "probe-complete"
    assert probes.marker("good").read_text() == "ran\n"
    assert not probes.marker("bad").exists()
    assert _digest(target) != _digest(good)  # the swap really happened


def test_rename_race_never_runs_an_unpinned_binary(probes: ProbeFactory) -> None:
    good = probes.binary(report(), name="good")
    bad = probes.binary(report(), name="bad")
    target = probes.directory / "probe"
    staging = probes.directory / "staging"
    os.link(good, target)
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            for source in (bad, good):
                os.link(source, staging)
                os.replace(staging, target)

    swapper = threading.Thread(target=swap)
    swapper.start()
    outcomes: dict[str, int] = {}
    try:
        runner = SubprocessProbeRunner(target, probe_sha256=_digest(good))
        for _ in range(RACE_RUNS):
            try:
                outcome = runner.run().status
            except CudaProbeError as error:
                outcome = error.reason_code
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    finally:
        stop.set()
        swapper.join()
    assert set(outcomes) <= {"probe-complete", "PROBE_DIGEST_MISMATCH"}, outcomes
    assert sum(outcomes.values()) == RACE_RUNS
    assert not probes.marker("bad").exists()
    # Every ready run ran the pinned probe (all 300 may also have seen a mismatch).
    good_marker = probes.marker("good")
    good_runs = good_marker.read_text().count("ran") if good_marker.exists() else 0
    assert good_runs == outcomes.get("probe-complete", 0)


def test_spec_names_the_new_codes_and_keys() -> None:
    for code in (
        "PROBE_SHA256_INVALID",
        "PROBE_DIGEST_MISMATCH",
        "PROBE_TOO_LARGE",
        "PROBE_PIN_SCRIPT_UNSUPPORTED",
    ):
        explanation, remedy = SPEC["reason_codes"][code]
        assert explanation
        assert remedy
    assert SPEC["observation_keys"]["probe_sha256"] == "probe.sha256"
    for lane in LANES.values():
        if "probe_executable" in lane["option_allowlist"]:
            assert "probe_sha256" in lane["option_allowlist"]
    assert json.dumps(SPEC["manifest"]).count("probe_sha256") == 0


# -- the command line ------------------------------------------------------------------


def test_pin_probe_prints_the_digest_and_the_lines_to_paste(
    probes: ProbeFactory, tmp_path: Path
) -> None:
    probe = probes.binary(report())
    done = run_cli("pin-probe", str(probe), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == _digest(probe)
    assert f'probe_executable = "{probe}"' in lines
    assert f'probe_sha256 = "{_digest(probe)}"' in lines
    assert not probes.marker().exists()  # pinning reads the probe, never runs it


def test_pin_probe_of_a_relative_path(probes: ProbeFactory) -> None:
    probe = probes.binary(report())
    done = run_cli("pin-probe", probe.name, cwd=probes.directory)
    assert done.returncode == 0, done.stderr
    assert f'probe_executable = "{probe}"' in done.stdout.splitlines()


@pytest.mark.parametrize(
    ("name", "said"),
    [("missing", "'missing' does not exist"), (".", "'.' is a directory, not a file")],
)
def test_pin_probe_of_an_unusable_path_is_a_usage_error(
    name: str, said: str, probes: ProbeFactory
) -> None:
    done = run_cli("pin-probe", name, cwd=probes.directory)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.endswith(f"\nerror: argument PATH: {said}\n"), done.stderr


def test_pin_probe_of_a_file_that_cannot_run_is_refused_with_a_code(
    probes: ProbeFactory,
) -> None:
    probes.write_bytes("not-executable", b"\x7fELF")
    (probes.directory / "not-executable").chmod(0o644)
    done = run_cli("pin-probe", "not-executable", cwd=probes.directory)
    assert done.returncode == 1
    assert "PROBE_NOT_EXECUTABLE" in done.stderr
    assert "Traceback" not in done.stderr


def test_pin_probe_refuses_an_elf_whose_loader_is_not_roots(probes: ProbeFactory) -> None:
    # ELF magic and nothing more: what it would load cannot be known.
    probes.write_bytes("malformed", b"\x7fELF")
    done = run_cli("pin-probe", "malformed", cwd=probes.directory)
    assert done.returncode == 1
    assert "PROBE_PIN_LOADER_UNTRUSTED" in done.stderr
    assert "Traceback" not in done.stderr


def _preflight(probe: Path, pin: str, cwd: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "preflight",
        "--capability",
        "cuda-linux-x86_64",
        "--probe",
        str(probe),
        "--device",
        "0",
        "--sm",
        "sm_80",
        "--probe-sha256",
        pin,
        *extra,
        cwd=cwd,
    )


def test_preflight_with_the_right_pin_observes_it(probes: ProbeFactory, tmp_path: Path) -> None:
    probe = probes.binary(report())
    done = _preflight(probe, _digest(probe), tmp_path, "--json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    observations = {item["key"]: item["value"] for item in plan["preflight"]["observations"]}
    assert observations["probe.sha256"] == _digest(probe)
    assert str(probe) not in done.stdout


@pytest.mark.parametrize(
    ("pin", "code", "status"),
    [
        ("0" * 64, "PROBE_DIGEST_MISMATCH", 1),
        # Not a digest at all: the command's own argument check (exit 2).
        ("0" * 63, "argument --probe-sha256: must be a SHA-256", 2),
    ],
)
def test_preflight_with_a_wrong_pin_is_refused_unrun(
    pin: str, code: str, status: int, probes: ProbeFactory, tmp_path: Path
) -> None:
    probe = probes.binary(report())
    done = _preflight(probe, pin, tmp_path)
    assert done.returncode == status
    assert code in done.stderr
    assert "Traceback" not in done.stderr
    assert not probes.marker().exists()


# -- through `rextio generate`: the lock carries the pinned digest ----------------------


def test_rextio_generate_locks_the_pinned_digest(
    plugin_site: Path, probes: ProbeFactory, tmp_path: Path
) -> None:
    probe = probes.binary(report())
    project = generate_fixture._write_project(
        tmp_path / "project", "cuda-libtorch-linux-x86_64", probe
    )
    pin = _digest(probe)
    with (project / "rextio.toml").open("a", encoding="utf-8") as toml:
        toml.write(f'probe_sha256 = "{pin}"\n')  # [target.device_options] is the last table
    done = generate_fixture._generate(project, plugin_site, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    text = (project / generate_fixture.LOCK).read_text(encoding="utf-8")
    plan = json.loads(text)["device_provider"]
    assert plan["lock"]["option_keys"] == [
        "device_ordinal",
        "probe_executable",
        "probe_sha256",
        "sm",
    ]
    observations = {item["key"]: item["value"] for item in plan["preflight"]["observations"]}
    assert observations["probe.sha256"] == pin
    assert str(probe) not in text


def test_rextio_generate_stops_on_a_wrong_pin(
    plugin_site: Path, probes: ProbeFactory, tmp_path: Path
) -> None:
    probe = probes.binary(report())
    project = generate_fixture._write_project(
        tmp_path / "project", "cuda-libtorch-linux-x86_64", probe
    )
    with (project / "rextio.toml").open("a", encoding="utf-8") as toml:
        toml.write(f'probe_sha256 = "{"0" * 64}"\n')
    done = generate_fixture._generate(project, plugin_site, cwd=tmp_path)
    assert done.returncode != 0
    assert "Traceback" not in done.stdout + done.stderr
    assert not (project / generate_fixture.LOCK).exists()
    assert not probes.marker().exists()
