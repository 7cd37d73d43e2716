"""``python -m rextio_device_cuda`` through real subprocesses."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cuda_support import SPEC, ProbeFactory, report, run_cli

from rextio_device_cuda import CudaDeviceProvider
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
        assert explanation in done.stdout
        assert remedy in done.stdout


def test_explain_every_code(capsys: pytest.CaptureFixture[str]) -> None:
    # In-process for all codes: one subprocess per code would only add start-up time.
    for code, (explanation, remedy) in SPEC["reason_codes"].items():
        assert main(["explain", code]) == 0
        printed = capsys.readouterr().out
        assert code in printed
        assert explanation in printed
        assert remedy in printed


def test_explain_list_names_every_code_once(tmp_path: Path) -> None:
    done = run_cli("explain", "--list", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    expected = [f"{code}: {texts[0]}" for code, texts in sorted(SPEC["reason_codes"].items())]
    assert done.stdout.splitlines() == expected


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
    ("arguments", "code", "status"),
    [
        (["--device", "0", "--sm", "sm_86"], "CUDA_SM_MISMATCH", 1),
        (["--device", "abc", "--sm", "sm_80"], "DEVICE_ORDINAL_INVALID", 1),
        (["--device", "0", "--sm", "sm_95"], "CUDA_ARCHITECTURE_UNSUPPORTED", 1),
        (["--device", "0", "--sm", "80"], "INVALID_SM", 1),
    ],
)
def test_preflight_refusals(
    arguments: list[str], code: str, status: int, probes: ProbeFactory, tmp_path: Path
) -> None:
    probe = probes.printing(report())
    done = _preflight(probe, *arguments, cwd=tmp_path)
    assert done.returncode == status
    assert code in done.stderr
    assert SPEC["reason_codes"][code][1] in done.stderr
    assert "Traceback" not in done.stderr


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
    assert missing.returncode == 1
    assert "Traceback" not in missing.stderr
    regular = tmp_path / "a-file"
    regular.write_text("kept\n")
    into_file = run_cli("runtime-source", "--into", str(regular), cwd=tmp_path)
    assert (into_file.returncode, into_file.stdout) == (1, "")
    assert into_file.stderr == "error: the project path is not a directory\n"
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
