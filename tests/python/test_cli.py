"""``python -m rextio_device_cuda`` through real subprocesses."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cuda_support import SPEC, ProbeFactory, report, run_cli, unavailable_report, unwrapped

import rextio_device_cuda
from rextio_device_cuda import CudaDeviceProvider
from rextio_device_cuda._explain import OPTION_FLAGS, for_command
from rextio_device_cuda.cli import _parser, main
from rextio_device_cuda.runtime_source import packaged_crates


def _preflight(
    probe: Path, *arguments: str, cwd: Path, capability: str = "cuda-linux-x86_64"
) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "preflight", "--capability", capability, "--probe", str(probe), *arguments, cwd=cwd
    )


def test_explain_prints_explanation_and_remedy(tmp_path: Path) -> None:
    for code, (explanation, remedy) in list(SPEC["reason_codes"].items())[:5]:
        done = run_cli("explain", code, cwd=tmp_path)
        assert done.returncode == 0
        assert explanation in unwrapped(done.stdout)
        assert remedy in unwrapped(done.stdout)


def test_explain_every_code(capsys: pytest.CaptureFixture[str]) -> None:
    # In-process for all codes: one subprocess per code would only add start-up time.
    for code, (explanation, remedy) in SPEC["reason_codes"].items():
        assert main(["explain", code]) == 0
        printed = unwrapped(capsys.readouterr().out)
        assert code in printed
        assert explanation in printed
        assert remedy in printed


def test_explain_list_names_every_code_once(tmp_path: Path) -> None:
    done = run_cli("explain", "--list", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    expected = [f"{code}: {texts[0]}" for code, texts in sorted(SPEC["reason_codes"].items())]
    assert unwrapped(done.stdout).splitlines() == expected


@pytest.mark.parametrize("arguments", [["explain"], ["explain", "--list", "CUDA_SM_MISMATCH"]])
def test_explain_needs_exactly_one_of_code_or_list(arguments: list[str], tmp_path: Path) -> None:
    done = run_cli(*arguments, cwd=tmp_path)
    assert done.returncode == 2
    assert "--list" in done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path: Path) -> None:
    # The reader closes the pipe before anything is written, so the very first
    # write fails: a guaranteed state, not a race.
    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "rextio_device_cuda", "explain", "--list"],
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            cwd=tmp_path,
            check=False,
        )
    finally:
        os.close(writer)
    assert done.returncode == 1
    assert done.stderr == ""


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["explain"],
        ["preflight"],
        ["runtime-source"],
        ["pin-probe"],
        ["build-probe"],
        ["validate"],
        ["manifest"],
    ],
)
def test_help_is_plain_text(command: list[str], tmp_path: Path) -> None:
    done = run_cli(*command, "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for markup in ("``", ":func:", ":class:", "**"):
        assert markup not in done.stdout


def test_every_argument_has_help() -> None:
    parser = _parser()
    parsers = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            parsers.extend(action.choices.values())
            assert {choice.dest for choice in action._choices_actions} == set(action.choices)
            assert all(choice.help for choice in action._choices_actions)
    assert [each.prog.split()[-1] for each in parsers[1:]] == [
        "explain",
        "preflight",
        "runtime-source",
        "pin-probe",
        "probe",
        "build-probe",
        "reproduce",
        "validate",
        "manifest",
    ]
    for each in parsers:
        for action in each._actions:
            assert action.help, f"{each.prog}: {action.dest} has no help text"


def test_explain_unknown_code(tmp_path: Path) -> None:
    done = run_cli("explain", "NOT_A_CODE", cwd=tmp_path)
    assert done.returncode != 0
    assert "unknown reason code" in done.stderr
    assert "Traceback" not in done.stderr


def test_preflight_ready_prints_the_redacted_plan(probes: ProbeFactory, tmp_path: Path) -> None:
    probe = probes.printing(report())
    done = _preflight(probe, "--device", "0", "--sm", "sm_80", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["preflight"]["status"] == "ready"
    assert plan["artifact_profile"]["kind"] == "rust-crate"
    assert str(probe) not in done.stdout


def test_preflight_ready_on_a_second_device(probes: ProbeFactory, tmp_path: Path) -> None:
    # Core 0.1.6 authorizes lowering only for gpu:0; the plan of device 1 is
    # still printed, with the authorization absent and the reason stated.
    probe = probes.printing(report(sms=("sm_80", "sm_86")))
    done = _preflight(probe, "--device", "1", "--sm", "sm_86", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    plan = json.loads(done.stdout)
    assert plan["preflight"]["status"] == "ready"
    observations = {item["key"]: item["value"] for item in plan["preflight"]["observations"]}
    assert observations["selected.device"] == "1"
    assert observations["selected.sm"] == "sm_86"
    assert plan["lowering_authorization"] is None
    assert "gpu:0" in plan["lowering_authorization_refused"]
    assert str(probe) not in done.stdout


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        (["--device", "0", "--sm", "sm_86"], "CUDA_SM_MISMATCH"),
        (["--device", "0", "--sm", "sm_95"], "CUDA_ARCHITECTURE_UNSUPPORTED"),
    ],
)
def test_preflight_refusals(
    arguments: list[str], code: str, probes: ProbeFactory, tmp_path: Path
) -> None:
    probe = probes.printing(report())
    done = _preflight(probe, *arguments, cwd=tmp_path)
    assert done.returncode == 1
    assert code in done.stderr
    # The remedy names this command's options (--sm for sm).
    assert for_command(SPEC["reason_codes"][code][1], OPTION_FLAGS) in unwrapped(done.stderr)
    assert "Traceback" not in done.stderr


def test_no_driver_found_prints_this_architectures_directories_and_explain_every_one(
    probes: ProbeFactory, tmp_path: Path
) -> None:
    searched = {entry["arch"]: entry["dirs"] for entry in SPEC["loader"]["linux_candidate_dirs"]}
    aarch64_only = [path for path in searched["aarch64"] if path not in searched["x86_64"]]
    probe = probes.printing(unavailable_report("LIBCUDA_SO_NOT_FOUND"))
    done = _preflight(probe, "--device", "0", "--sm", "sm_80", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    # The directories one per line, then what was observed.
    directories = len(searched["x86_64"])
    assert lines[: directories + 3] == [
        "not ready (unavailable)",
        "LIBCUDA_SO_NOT_FOUND: No libcuda.so.1 exists where the probe looked:",
        *(f"  {directory}" for directory in searched["x86_64"]),
        "observed: the probe searched its x86_64 directories",
    ], lines
    assert "aarch64" not in done.stderr
    # explain has no probe to ask: it names every architecture's directories.
    explained = run_cli("explain", "LIBCUDA_SO_NOT_FOUND", cwd=tmp_path).stdout
    assert all(path in explained for path in aarch64_only), explained
    assert ", ".join(searched["x86_64"]) in unwrapped(explained)


def test_framework_preflight_rejects_toolkit_root(probes: ProbeFactory, tmp_path: Path) -> None:
    probe = probes.printing(report())
    done = _preflight(
        probe,
        *("--device", "0", "--sm", "sm_80", "--toolkit-root", str(tmp_path), "--json"),
        cwd=tmp_path,
        capability="cuda-libtorch-linux-x86_64",
    )
    assert done.returncode == 1
    assert json.loads(done.stdout)["reason_code"] == "PROVIDER_OPTION_UNKNOWN"


def _preflight_arguments(capability: str, probe: str) -> list[str]:
    selection = ["--capability", capability, "--probe", probe]
    return ["preflight", *selection, "--device", "0", "--sm", "sm_80"]


@pytest.mark.parametrize(
    "arguments",
    [
        _preflight_arguments("cuda-nope", "/x"),
        _preflight_arguments("cuda-linux-x86_64", "\x07"),
        _preflight_arguments("cuda-linux-x86_64", ""),
        ["preflight"],
        ["frobnicate"],
        [],
    ],
)
def test_bad_input_never_tracebacks(arguments: list[str], tmp_path: Path) -> None:
    done = run_cli(*arguments, cwd=tmp_path)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr


def test_runtime_source_command(tmp_path: Path) -> None:
    first = run_cli("runtime-source", "--into", str(tmp_path), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    crates = [crate.install_dir for crate in packaged_crates()]
    assert first.stdout.splitlines() == [f"installed: {crate}" for crate in crates]
    again = run_cli("runtime-source", "--into", str(tmp_path), cwd=tmp_path)
    assert again.returncode == 0
    assert again.stdout.splitlines() == [f"already current: {crate}" for crate in crates]
    missing = run_cli("runtime-source", "--into", str(tmp_path / "missing"), cwd=tmp_path)
    assert (missing.returncode, missing.stdout) == (2, "")
    said = f"error: argument --into: {str(tmp_path / 'missing')!r} does not exist\n"
    assert unwrapped(missing.stderr).endswith(said)
    regular = tmp_path / "a-file"
    regular.write_text("kept\n")
    into_file = run_cli("runtime-source", "--into", str(regular), cwd=tmp_path)
    assert (into_file.returncode, into_file.stdout) == (2, "")
    assert unwrapped(into_file.stderr).endswith(
        f"error: argument --into: {str(regular)!r} is not a directory\n"
    )
    assert regular.read_text() == "kept\n"


def test_preflight_states_what_was_observed(probes: ProbeFactory, tmp_path: Path) -> None:
    probe = probes.printing(report(driver_version=12040))
    done = _preflight(probe, "--device", "0", "--sm", "sm_86", cwd=tmp_path)
    assert done.returncode == 1
    assert "observed: device 0 is sm_80 (Fixture GPU 0); sm_86 was selected\n" in done.stderr
    refused = _preflight(probe, "--device", "0", "--sm", "sm_120", "--json", cwd=tmp_path)
    record = json.loads(refused.stdout)
    assert record["reason_code"] == "CUDA_ARCHITECTURE_DRIVER_TOO_OLD"
    assert record["observed"] == (
        "driver 12.4 is older than 12.8, the first CUDA release that knows sm_120"
    )
    assert str(probe) not in done.stderr + refused.stdout + refused.stderr


def test_manifest_prints_the_shipped_json_byte_for_byte(tmp_path: Path) -> None:
    # The shipped rextio_device_cuda/manifest.json (generated/manifest.json,
    # staged into the wheel) is the provider's own manifest, canonically serialized.
    manifest = CudaDeviceProvider().manifest().to_dict()
    expected = json.dumps(manifest, sort_keys=True, indent=2) + "\n"
    done = subprocess.run(
        [sys.executable, "-m", "rextio_device_cuda", "manifest"],
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == b""
    assert done.stdout == expected.encode("utf-8")


# -- one argument check, before any work (docs/interfaces.md, the command line) ---------


def _one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one ``error:`` message of an exit-2 answer (argparse's usage lines may precede
    it), its wrapped lines joined again; every line fits 100 columns."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    stderr = unwrapped(done.stderr)
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    assert stderr.endswith(errors[0] + "\n")
    return errors[0]


@pytest.mark.parametrize(
    ("changed", "said"),
    [
        ({"--sm": "80"}, "argument --sm: must look like sm_80, not '80'"),
        ({"--sm": "SM_80"}, "argument --sm: must look like sm_80, not 'SM_80'"),
        ({"--device": "x"}, "argument --device: must be a number from 0 to 1023, not 'x'"),
        ({"--device": "-1"}, "argument --device: must be a number from 0 to 1023, not '-1'"),
        ({"--device": "1024"}, "argument --device: must be a number from 0 to 1023"),
        ({"--probe-sha256": "abc"}, "argument --probe-sha256: must be a SHA-256 in 64 lowercase"),
        ({"--probe-sha256": "A" * 64}, "argument --probe-sha256: must be a SHA-256 in 64"),
        ({"--probe": "probes/probe"}, "argument --probe: must be an absolute path"),
        ({"--probe": ""}, "argument --probe: must not be empty"),
        ({"--probe": "/nonexistent/probe"}, "argument --probe: '/nonexistent/probe' does not"),
        ({"--toolkit-root": "cuda"}, "argument --toolkit-root: must be an absolute path"),
        ({"--driver-root": "compat"}, "argument --driver-root: must be an absolute path"),
        (
            {"--driver-root": "/nonexistent"},
            "argument --driver-root: '/nonexistent' does not exist",
        ),
        ({"--capability": "cuda-nope"}, "argument --capability: must be one of"),
    ],
    ids=lambda value: str(value)[:40],
)
def test_preflight_refuses_unusable_input_with_one_line_and_runs_nothing(
    changed: dict[str, str], said: str, probes: ProbeFactory, tmp_path: Path
) -> None:
    probe = probes.binary(report())
    values = {
        "--capability": "cuda-linux-x86_64",
        "--probe": str(probe),
        "--device": "0",
        "--sm": "sm_80",
        **changed,
    }
    arguments = [word for pair in values.items() for word in pair]
    done = run_cli("preflight", *arguments, cwd=tmp_path)
    assert _one_error_line(done).startswith(f"error: {said}")
    assert not probes.marker().exists()


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["build-probe", "--into", ""], "argument --into: must not be empty"),
        (["pin-probe", ""], "argument PATH: must not be empty"),
        (["runtime-source", "--into", ""], "argument --into: must not be empty"),
        (["validate", "--sm", "sm_80", "--output", ""], "argument --output: must not be empty"),
        (["validate", "--sm", "sm_80", "--device", "x"], "argument --device: must be a number"),
        (["explain", "CUDA_SM_MISMATCH", "--cuda-result", "x"], "argument --cuda-result: must"),
    ],
)
def test_empty_and_malformed_values_are_refused_in_every_command(
    arguments: list[str], said: str, tmp_path: Path
) -> None:
    done = run_cli(*arguments, cwd=tmp_path)
    assert _one_error_line(done).startswith(f"error: {said}")
    assert list(tmp_path.iterdir()) == []


def test_validate_refuses_an_output_it_could_not_write_before_running(tmp_path: Path) -> None:
    missing = tmp_path / "missing" / "evidence.json"
    done = run_cli("validate", "--sm", "sm_80", "--output", str(missing), cwd=tmp_path)
    assert _one_error_line(done) == (
        f"error: argument --output: the directory of {str(missing)!r} does not exist"
    )
    directory = run_cli("validate", "--sm", "sm_80", "--output", str(tmp_path), cwd=tmp_path)
    assert _one_error_line(directory) == (
        f"error: argument --output: {str(tmp_path)!r} is a directory; name a file in it"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["--probe", "/bin/sh"], "--probe and --smoke go together"),
        (["--smoke", "/bin/sh"], "--probe and --smoke go together"),
        (["--probe-sha256", "0" * 64], "--probe-sha256 and --smoke-sha256 go together"),
        (["--smoke-sha256", "0" * 64], "--probe-sha256 and --smoke-sha256 go together"),
        (
            ["--probe-sha256", "0" * 64, "--smoke-sha256", "0" * 64],
            "the digests pin --probe and --smoke",
        ),
    ],
)
def test_validate_options_that_go_together(
    arguments: list[str], said: str, tmp_path: Path
) -> None:
    done = run_cli("validate", "--sm", "sm_80", *arguments, cwd=tmp_path)
    assert _one_error_line(done).startswith(f"error: {said}")


def test_version_prints_the_version(tmp_path: Path) -> None:
    done = run_cli("--version", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"rextio-device-cuda {rextio_device_cuda.__version__}\n"


# -- a ready preflight in a few lines ---------------------------------------------------


def test_a_ready_preflight_prints_a_few_lines_and_json_the_plan(
    probes: ProbeFactory, tmp_path: Path
) -> None:
    probe = probes.binary(report(driver_version=12040))
    done = _preflight(probe, "--device", "0", "--sm", "sm_80", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.splitlines() == [
        "ready: cuda-linux-x86_64",
        "device: 0 (Fixture GPU 0, sm_80)",
        "driver: 12.4 (12040)",
        "probe: not pinned (--probe-sha256 DIGEST runs it only with that digest)",
        "(--json prints the whole plan)",
    ]
    digest = hashlib.sha256(probe.read_bytes()).hexdigest()
    pinned = _preflight(
        probe, "--device", "0", "--sm", "sm_80", "--probe-sha256", digest, cwd=tmp_path
    )
    assert pinned.returncode == 0, pinned.stderr
    assert f"probe: pinned to SHA-256 {digest}" in pinned.stdout.splitlines()
    as_json = _preflight(probe, "--device", "0", "--sm", "sm_80", "--json", cwd=tmp_path)
    assert json.loads(as_json.stdout)["preflight"]["status"] == "ready"


def test_a_refusal_names_the_option_of_the_command_that_prints_it(
    probes: ProbeFactory, tmp_path: Path
) -> None:
    # CUDA_DEVICE_NOT_FOUND's remedy names device_ordinal (rextio.toml's key);
    # the preflight command's reader types --device.
    probe = probes.printing(report())
    done = _preflight(probe, "--device", "3", "--sm", "sm_80", cwd=tmp_path)
    assert done.returncode == 1
    remedy = SPEC["reason_codes"]["CUDA_DEVICE_NOT_FOUND"][1]
    assert "device_ordinal" in remedy
    assert f"remedy: {remedy.replace('device_ordinal', '--device')}\n" in done.stderr
    record = json.loads(
        _preflight(probe, "--device", "3", "--sm", "sm_80", "--json", cwd=tmp_path).stdout
    )
    assert record["remedy"] == remedy.replace("device_ordinal", "--device")
    # explain stands for no command's options: the key as rextio.toml spells it.
    assert f"remedy: {remedy}\n" in run_cli("explain", "CUDA_DEVICE_NOT_FOUND", cwd=tmp_path).stdout


def test_pin_probe_names_its_path_argument_in_the_remedy(
    probes: ProbeFactory, tmp_path: Path
) -> None:
    probe = probes.printing(report())
    probe.chmod(0o644)
    done = run_cli("pin-probe", str(probe), cwd=tmp_path)
    assert done.returncode == 1
    remedy = SPEC["reason_codes"]["PROBE_NOT_EXECUTABLE"][1]
    assert "probe_executable" in remedy
    assert f"remedy: {remedy.replace('probe_executable', 'PATH')}\n" in done.stderr


# -- explain: any case, and the nearest code ---------------------------------------------


def test_explain_takes_any_case_and_suggests_the_nearest_code(tmp_path: Path) -> None:
    lower = run_cli("explain", "cuda_sm_mismatch", cwd=tmp_path)
    assert lower.returncode == 0, lower.stderr
    assert lower.stdout == run_cli("explain", "CUDA_SM_MISMATCH", cwd=tmp_path).stdout
    assert lower.stdout.startswith("CUDA_SM_MISMATCH: ")
    typo = run_cli("explain", "cuda_sm_mismatsh", cwd=tmp_path)
    assert _one_error_line(typo) == (
        "error: unknown reason code 'cuda_sm_mismatsh'; did you mean CUDA_SM_MISMATCH?"
    )
    nothing_near = run_cli("explain", "zz", cwd=tmp_path)
    assert _one_error_line(nothing_near) == (
        "error: unknown reason code 'zz'; python -m rextio_device_cuda explain --list lists them"
    )


# -- never a traceback: no home, stdout closed or full --------------------------------------

# A private mount namespace where /etc/passwd is empty and read alone (no
# nss-systemd to make up root's entry): this uid has no entry, and neither HOME
# nor XDG_CACHE_HOME is set. Nothing mounted there reaches the host.
_NO_HOME = (
    'mount --bind "$1/passwd" /etc/passwd && mount --bind "$1/nsswitch.conf" '
    '/etc/nsswitch.conf && shift && exec env -u HOME -u XDG_CACHE_HOME "$@"'
)
_IN_PRIVATE_MOUNTS = [
    shutil.which("unshare") or "unshare",
    *("--mount", "--propagation", "private", "sh", "-c", _NO_HOME, "sh"),
]
_HOME = "import pathlib; pathlib.Path.home()"


def _without_a_home(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    etc = cwd / "etc"
    etc.mkdir(exist_ok=True)
    (etc / "passwd").write_text("")
    (etc / "nsswitch.conf").write_text("passwd: files\ngroup: files\n")
    return subprocess.run(
        [*_IN_PRIVATE_MOUNTS, str(etc), sys.executable, "-m", "rextio_device_cuda", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        check=False,
    )


def test_no_home_directory_needs_only_build_probes_default(tmp_path: Path) -> None:
    # The namespace really has no home for this uid.
    probe = _without_a_home("explain", "CUDA_SM_MISMATCH", cwd=tmp_path)
    assert probe.returncode == 0, probe.stderr
    check = subprocess.run(
        [*_IN_PRIVATE_MOUNTS, str(tmp_path / "etc"), sys.executable, "-c", _HOME],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "Could not determine home directory" in check.stderr
    for arguments in (["--help"], ["build-probe", "--help"], ["explain", "--list"], ["manifest"]):
        done = _without_a_home(*arguments, cwd=tmp_path)
        assert (done.returncode, done.stderr) == (0, ""), (arguments, done.stderr)
    build = _without_a_home("build-probe", cwd=tmp_path)
    assert _one_error_line(build) == (
        "error: build-probe needs a cache directory and no home directory is known: "
        "set XDG_CACHE_HOME (or HOME) to an absolute directory of yours"
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == ["etc"]


_WITH_STDOUT_CLOSED = [shutil.which("sh") or "sh", "-c", 'exec "$@" >&-', "sh"]
# probe: the installed wheel is this host's platform wheel, which ships one.
_COMMANDS_THAT_PRINT = [
    ["manifest"],
    ["explain", "--list"],
    ["explain", "CUDA_SM_MISMATCH"],
    ["probe"],
]


@pytest.mark.parametrize("arguments", [*_COMMANDS_THAT_PRINT, ["--version"]])
def test_a_closed_stdout_is_one_line_and_exit_1(arguments: list[str], tmp_path: Path) -> None:
    done = subprocess.run(
        [*_WITH_STDOUT_CLOSED, sys.executable, "-m", "rextio_device_cuda", *arguments],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert (done.returncode, done.stderr) == (
        1,
        "error: cannot write to standard output: standard output is closed\n",
    )


@pytest.mark.parametrize("arguments", [*_COMMANDS_THAT_PRINT, ["--version"], ["--help"]])
def test_a_full_stdout_is_one_line_and_exit_1(arguments: list[str], tmp_path: Path) -> None:
    with open("/dev/full", "w", encoding="utf-8") as full:
        done = subprocess.run(
            [sys.executable, "-m", "rextio_device_cuda", *arguments],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            cwd=tmp_path,
            check=False,
        )
    assert (done.returncode, done.stderr) == (
        1,
        "error: cannot write to standard output: No space left on device\n",
    )
