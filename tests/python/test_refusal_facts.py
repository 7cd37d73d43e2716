"""Refusals of the probe runner and the toolkit inspector state what was observed.

Each case runs the real runner against a real small probe (or the real
inspector against a real toolkit tree in a temporary directory) and checks
the three human lines: the provider's WARNING log line, and the
``preflight`` command's text and ``--json`` "observed". None holds a path:
the temporary directory never appears. Records keep the code alone.

The ``preflight`` command runs in this process (``cli.main``, the code the
console runs) so that 50 repeats stay short; one test runs it as a process.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cuda_support import (
    SPEC,
    ProbeFactory,
    ready_options,
    report,
    request_for,
    run_cli,
    run_with_memfd_noexec_2,
    unwrapped,
)

from rextio_device_cuda import CudaDeviceProvider
from rextio_device_cuda._explain import OPTION_FLAGS, for_command
from rextio_device_cuda._runner import probe_file_sha256
from rextio_device_cuda.cli import main
from rextio_device_cuda.probe import CudaProbeError, SubprocessProbeRunner

CAPABILITY = "cuda-linux-x86_64"
# For probes that hang (sleep 30 s): the timeout of the injected runner.
HANG_TIMEOUT = 0.3
PIN_OF_ZEROS = "0" * 64
# Bound on one process this file starts; never a measure of speed.
BOUND_SECONDS = 120


def _log_line(
    caplog: pytest.LogCaptureFixture, options: dict[str, str], **provider: object
) -> tuple[tuple[str, ...], str]:
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rextio_device_cuda"):
        result = CudaDeviceProvider(**provider).preflight(  # type: ignore[arg-type]
            request_for(CAPABILITY, options)
        )
    lines = [
        record.getMessage()
        for record in caplog.records
        if record.name == "rextio_device_cuda" and record.levelno == logging.WARNING
    ]
    assert len(lines) == 1, lines
    return result.reason_codes, unwrapped(lines[0])


def _command(
    capsys: pytest.CaptureFixture[str], probe: str, *extra: str
) -> tuple[str, dict[str, object]]:
    """The preflight command's text (stderr) and its --json record."""
    arguments = [
        "preflight",
        "--capability",
        CAPABILITY,
        "--probe",
        probe,
        "--device",
        "0",
        "--sm",
        "sm_80",
        *extra,
    ]
    capsys.readouterr()
    assert main(arguments) == 1
    text = capsys.readouterr()
    assert text.out == ""
    assert main([*arguments, "--json"]) == 1
    record = capsys.readouterr()
    parsed: dict[str, object] = json.loads(record.out)
    return text.err, parsed


def _options_of(probe: str, extra: tuple[str, ...]) -> dict[str, str]:
    keys = {"--toolkit-root": "toolkit_root", "--probe-sha256": "probe_sha256"}
    options = ready_options(Path(probe))
    options["probe_executable"] = probe
    for flag, value in zip(extra[::2], extra[1::2], strict=True):
        options[keys[flag]] = value
    return options


def _check_all_three(
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    hidden: Path,
    code: str,
    facts: str | Callable[[str], bool],
    probe: str,
    *extra: str,
) -> str:
    """The log line, the command's text and its JSON agree on ``code`` and its facts."""
    codes, line = _log_line(caplog, _options_of(probe, extra))
    assert codes == (code,)
    text, record = _command(capsys, probe, *extra)
    text = unwrapped(text)
    assert record["reason_code"] == code
    observed = record["observed"]
    assert isinstance(observed, str), record
    if callable(facts):
        assert facts(observed), observed
    else:
        assert observed == facts
    assert f"\nobserved: {observed}\n" in line, line
    assert f"{code}: " in line
    assert f"\nobserved: {observed}\n" in text, text
    # The command's remedy names its own options (--toolkit-root for toolkit_root).
    assert for_command(SPEC["reason_codes"][code][1], OPTION_FLAGS) in text
    for shown in (line, text, json.dumps(record)):
        assert str(hidden) not in shown
    assert "/" not in observed
    assert "\\" not in observed
    return observed


# -- the runner ----------------------------------------------------------------------------

# (name, shell body, code, facts): probes that finish on their own.
SHELL_PROBES = [
    ("flood", "exec yes", "PROBE_OUTPUT_TOO_LARGE", "the probe wrote more than 65,536 bytes"),
    ("exit-3", "echo '{}'\nexit 3", "PROBE_EXIT_NONZERO", "the probe exited with status 3"),
    (
        "killed",
        "kill -9 $$",
        "PROBE_EXIT_NONZERO",
        "the probe was ended by signal 9 (SIGKILL)",
    ),
    ("silent", "exit 0", "PROBE_OUTPUT_INVALID", "the probe's output is empty"),
    ("not-json", "printf 'hello'", "PROBE_OUTPUT_INVALID", "the probe's output is not JSON"),
    (
        "not-utf8",
        "printf '\\377\\376'",
        "PROBE_OUTPUT_INVALID",
        "the probe's output is not UTF-8",
    ),
    (
        "empty-object",
        "echo '{}'",
        "PROBE_SCHEMA_INVALID",
        "the probe's report breaks schema 1: report keys differ from schema 1",
    ),
]


@pytest.mark.process_stress
@pytest.mark.parametrize(
    ("body", "code", "facts"),
    [case[1:] for case in SHELL_PROBES],
    ids=[case[0] for case in SHELL_PROBES],
)
def test_a_hostile_probe_s_refusal_states_what_it_did(
    body: str,
    code: str,
    facts: str,
    probes: ProbeFactory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    probe = probes.shell(body)
    _check_all_three(caplog, capsys, tmp_path, code, facts, str(probe))


@pytest.mark.process_stress
def test_a_hanging_probe_s_log_line_states_the_timeout(
    probes: ProbeFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The real runner with a short timeout, injected (the command uses 10 s).
    probe = probes.shell("exec sleep 30")
    runner = SubprocessProbeRunner(probe, timeout_seconds=HANG_TIMEOUT)
    options = ready_options(probe)
    codes, line = _log_line(caplog, options, probe_runner=runner)
    assert codes == ("PROBE_TIMEOUT",)
    assert "\nobserved: the probe did not finish within 0.3 s\n" in line
    assert str(tmp_path) not in line


def test_the_preflight_command_states_the_default_timeout(
    probes: ProbeFactory, tmp_path: Path
) -> None:
    # The command's own runner: the 10 s default, text and JSON side by side.
    probe = probes.shell("exec sleep 30")
    arguments = ["preflight", "--capability", CAPABILITY, "--probe", str(probe)]
    arguments += ["--device", "0", "--sm", "sm_80"]
    command = [sys.executable, "-m", "rextio_device_cuda", *arguments]
    with (
        subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path
        ) as text,
        subprocess.Popen(
            [*command, "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
        ) as as_json,
    ):
        text_out, text_err = text.communicate(timeout=BOUND_SECONDS)
        json_out, _ = as_json.communicate(timeout=BOUND_SECONDS)
    assert (text.returncode, as_json.returncode) == (1, 1)
    facts = "the probe did not finish within 10 s"
    assert f"\nobserved: {facts}\n" in unwrapped(text_err)
    record = json.loads(json_out)
    assert (record["reason_code"], record["observed"]) == ("PROBE_TIMEOUT", facts)
    assert str(tmp_path) not in text_out + text_err + json_out


@pytest.mark.process_stress
def test_a_file_the_kernel_cannot_execute(
    probes: ProbeFactory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    probe = probes.write_bytes("probe", b"neither ELF nor a script\n")
    _check_all_three(
        caplog,
        capsys,
        tmp_path,
        "PROBE_EXECUTION_FAILED",
        "starting the probe failed with ENOEXEC (Exec format error)",
        str(probe),
    )


def test_a_probe_without_an_execute_bit(
    probes: ProbeFactory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    probe = probes.printing(report())
    probe.chmod(0o644)
    _check_all_three(
        caplog,
        capsys,
        tmp_path,
        "PROBE_NOT_EXECUTABLE",
        "the probe file's mode is 0644; this process may not execute it",
        str(probe),
    )


def _check_log_and_argument_error(
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    code: str,
    facts: str,
    said: str,
    probe: str,
    *extra: str,
) -> None:
    """A path that does not exist or is not what it must be: the provider (as
    rextio.toml reaches it) refuses it with its code and facts; the command
    refuses the same argument itself, before any work (one error line, exit 2)."""
    codes, line = _log_line(caplog, _options_of(probe, extra))
    assert codes == (code,)
    assert f"{code}: " in line
    assert f"\nobserved: {facts}\n" in line, line
    arguments = ["preflight", "--capability", CAPABILITY, "--probe", probe]
    arguments += ["--device", "0", "--sm", "sm_80", *extra]
    capsys.readouterr()
    assert main(arguments) == 2
    printed = capsys.readouterr()
    assert printed.out == ""
    assert unwrapped(printed.err).endswith(f"\nerror: {said}\n"), printed.err


def test_a_directory_for_the_probe(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    _check_log_and_argument_error(
        caplog,
        capsys,
        "PROBE_NOT_EXECUTABLE",
        "the probe is a directory, not a regular file",
        f"argument --probe: {str(tmp_path)!r} is a directory, not a file",
        str(tmp_path),
    )


def test_a_missing_probe(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "missing")
    _check_log_and_argument_error(
        caplog,
        capsys,
        "PROBE_NOT_FOUND",
        "resolving the configured probe path failed with ENOENT (No such file or directory)",
        f"argument --probe: {missing!r} does not exist",
        missing,
    )


@pytest.mark.process_stress
def test_a_pin_that_does_not_match_names_both_digests_in_full(
    probes: ProbeFactory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    probe = probes.binary(report())
    actual = probe_file_sha256(str(probe))
    observed = _check_all_three(
        caplog,
        capsys,
        tmp_path,
        "PROBE_DIGEST_MISMATCH",
        f"the file's SHA-256 is {actual}; the pin is {PIN_OF_ZEROS}",
        str(probe),
        "--probe-sha256",
        PIN_OF_ZEROS,
    )
    assert actual in observed
    assert not probes.marker().exists()


def test_a_pinned_script_is_refused_with_its_first_bytes(
    probes: ProbeFactory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    probe = probes.printing(report())
    _check_all_three(
        caplog,
        capsys,
        tmp_path,
        "PROBE_PIN_SCRIPT_UNSUPPORTED",
        "the pinned file begins with #!, so its interpreter would run unpinned",
        str(probe),
        "--probe-sha256",
        PIN_OF_ZEROS,
    )
    assert not probes.marker().exists()


def test_a_pinned_file_over_the_bound_states_its_size(
    probes: ProbeFactory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    probe = probes.write_bytes("probe", b"\x7fELF")
    os.truncate(probe, 70 * 1024 * 1024)  # sparse: nothing is written
    _check_all_three(
        caplog,
        capsys,
        tmp_path,
        "PROBE_TOO_LARGE",
        "the pinned file is 70 MiB (73,400,320 bytes), over the 64 MiB bound",
        str(probe),
        "--probe-sha256",
        PIN_OF_ZEROS,
    )


def test_the_error_keeps_its_code_as_text_and_its_facts_apart() -> None:
    error = CudaProbeError("PROBE_TIMEOUT", facts="the probe did not finish within 1 s")
    assert str(error) == "PROBE_TIMEOUT"
    assert error.args == ("PROBE_TIMEOUT",)
    assert (error.detail, error.facts) == (None, "the probe did not finish within 1 s")
    assert CudaProbeError("PROBE_TIMEOUT").facts is None
    copy = pickle.loads(pickle.dumps(error))  # noqa: S301  (bytes this test just made)
    assert (str(copy), copy.reason_code, copy.facts) == (
        "PROBE_TIMEOUT",
        "PROBE_TIMEOUT",
        "the probe did not finish within 1 s",
    )


# -- where the kernel forbids executing a memfd ----------------------------------------------

NOEXEC_CHILD = r"""
import contextlib, io, json, logging, sys
from rextio.artifacts.models import DeviceRequirement
from rextio.artifacts.profiles import rust_crate_profile
from rextio.devices import DevicePreflightRequest, DeviceProviderOptions, DeviceProviderSelection
from rextio_device_cuda import CudaDeviceProvider
from rextio_device_cuda._runner import probe_file_sha256
from rextio_device_cuda.cli import main

probe, pin = sys.argv[1], sys.argv[2]
log = io.StringIO()
logging.getLogger("rextio_device_cuda").addHandler(logging.StreamHandler(log))
options = {"device_ordinal": "0", "probe_executable": probe, "probe_sha256": pin, "sm": "sm_80"}
requirement = DeviceRequirement(
    "cuda:0", "cuda", "cuda-driver", ("driver-api",), (), ("device",), ("sm_80",)
)
request = DevicePreflightRequest(
    artifact_profile=rust_crate_profile(
        "x86_64-unknown-linux-gnu", device_requirements=(requirement,)
    ),
    selection=DeviceProviderSelection("rextio-device-cuda", "cuda-linux-x86_64"),
    options=DeviceProviderOptions(tuple(sorted(options.items()))),
)
codes = CudaDeviceProvider().preflight(request).reason_codes
arguments = ["preflight", "--capability", "cuda-linux-x86_64", "--probe", probe,
             "--device", "0", "--sm", "sm_80", "--probe-sha256", pin]
text, record = io.StringIO(), io.StringIO()
with contextlib.redirect_stderr(text):
    text_status = main(arguments)
with contextlib.redirect_stdout(record):
    json_status = main([*arguments, "--json"])
print(json.dumps({"codes": codes, "log": log.getvalue(), "text": text.getvalue(),
                  "record": json.loads(record.getvalue()),
                  "statuses": [text_status, json_status]}))
"""


@pytest.mark.process_stress
def test_memfd_noexec_2_is_stated(probes: ProbeFactory, tmp_path: Path) -> None:
    probe = probes.binary(report())
    pin = probe_file_sha256(str(probe))
    done = run_with_memfd_noexec_2(NOEXEC_CHILD, str(probe), pin, timeout=BOUND_SECONDS)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["codes"] == ["PROBE_EXECUTION_FAILED"]
    assert outcome["statuses"] == [1, 1]
    observed = outcome["record"]["observed"]
    assert observed.startswith("vm.memfd_noexec is 2; the kernel refused an executable memfd")
    assert f"\nobserved: {observed}\n" in unwrapped(outcome["log"])
    assert f"\nobserved: {observed}\n" in unwrapped(outcome["text"])
    assert str(tmp_path) not in done.stdout
    assert not probes.marker().exists()


# -- the toolkit inspector ---------------------------------------------------------------


def _toolkit_case(
    make_toolkit: Callable[..., Path],
    probes: ProbeFactory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    code: str,
    facts: str | Callable[[str], bool],
    root: Path,
) -> str:
    probe = probes.printing(report())
    return _check_all_three(
        caplog, capsys, tmp_path, code, facts, str(probe), "--toolkit-root", str(root)
    )


def _write_version(root: Path, text: str) -> Path:
    (root / "version.json").write_text(text)
    return root


@pytest.mark.parametrize(
    ("tree", "facts", "said"),
    [
        (
            lambda tmp, make: tmp / "no-toolkit",
            "resolving the configured toolkit root failed with ENOENT (No such file or directory)",
            "does not exist",
        ),
        (
            lambda tmp, make: make() / "version.json",
            "the configured toolkit root is not a directory",
            "is not a directory",
        ),
    ],
    ids=["missing-root", "file-root"],
)
def test_a_toolkit_root_that_is_no_directory(
    tree: Callable[[Path, Callable[..., Path]], Path],
    facts: str,
    said: str,
    make_toolkit: Callable[..., Path],
    probes: ProbeFactory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = str(tree(tmp_path, make_toolkit))
    probe = str(probes.printing(report()))
    _check_log_and_argument_error(
        caplog,
        capsys,
        "TOOLKIT_NOT_FOUND",
        facts,
        f"argument --toolkit-root: {root!r} {said}",
        probe,
        "--toolkit-root",
        root,
    )


TOOLKIT_TREES: list[tuple[str, Callable[[Path, Callable[..., Path]], Path], str, str]] = [
    (
        "no-version-json",
        lambda tmp, make: _unlinked(make() / "version.json"),
        "TOOLKIT_VERSION_UNAVAILABLE",
        "the toolkit root has no version.json",
    ),
    (
        "version-json-directory",
        lambda tmp, make: _replaced_by_directory(make() / "version.json"),
        "TOOLKIT_VERSION_UNAVAILABLE",
        "version.json is a directory, not a regular file",
    ),
    (
        "version-json-outside",
        lambda tmp, make: _linked_outside(make() / "version.json", tmp),
        "TOOLKIT_VERSION_UNAVAILABLE",
        "version.json is a link that leads outside the toolkit root or nowhere",
    ),
    (
        "no-cuda-version",
        lambda tmp, make: _write_version(make(), '{"cuda": {}}'),
        "TOOLKIT_VERSION_UNAVAILABLE",
        "version.json has no cuda.version",
    ),
    (
        "not-json",
        lambda tmp, make: _write_version(make(), "version 12.4"),
        "TOOLKIT_VERSION_UNAVAILABLE",
        "version.json is not a UTF-8 JSON document",
    ),
    (
        "version-a-path",
        lambda tmp, make: _write_version(make(), json.dumps({"cuda": {"version": str(tmp)}})),
        "TOOLKIT_VERSION_INVALID",
        "version.json's cuda.version is a string that is not MAJOR.MINOR or MAJOR.MINOR.PATCH",
    ),
    (
        "version-a-number",
        lambda tmp, make: _write_version(make(), '{"cuda": {"version": 12.4}}'),
        "TOOLKIT_VERSION_INVALID",
        "version.json's cuda.version is a JSON number, not a string",
    ),
    (
        "version-json-too-large",
        lambda tmp, make: _write_version(make(), " " * 70000),
        "TOOLKIT_VERSION_INVALID",
        "version.json is larger than 65,536 bytes",
    ),
    (
        "no-components",
        lambda tmp, make: make(components=False),
        "TOOLKIT_COMPONENT_MISSING",
        "toolkit component cuda-header is missing: no candidate of it is a regular file "
        "inside the toolkit root",
    ),
    (
        "toolkit-11",
        lambda tmp, make: make(version="11.8"),
        "TOOLKIT_VERSION_TOO_OLD",
        "toolkit 11.8 is older than 12.0, the oldest this provider accepts",
    ),
]


def _unlinked(path: Path) -> Path:
    path.unlink()
    return path.parent


def _replaced_by_directory(path: Path) -> Path:
    path.unlink()
    path.mkdir()
    return path.parent


def _linked_outside(path: Path, outside: Path) -> Path:
    target = outside / "elsewhere.json"
    target.write_text(path.read_text())
    path.unlink()
    path.symlink_to(target)
    return path.parent


@pytest.mark.parametrize(
    ("tree", "code", "facts"),
    [case[1:] for case in TOOLKIT_TREES],
    ids=[case[0] for case in TOOLKIT_TREES],
)
def test_a_toolkit_refusal_states_what_the_tree_holds(
    tree: Callable[[Path, Callable[..., Path]], Path],
    code: str,
    facts: str,
    make_toolkit: Callable[..., Path],
    probes: ProbeFactory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = tree(tmp_path, make_toolkit)
    _toolkit_case(make_toolkit, probes, tmp_path, caplog, capsys, code, facts, root)


def test_the_process_command_states_a_toolkit_fact(
    make_toolkit: Callable[..., Path], probes: ProbeFactory, tmp_path: Path
) -> None:
    # The console command as a process, once: what the in-process runs stand for.
    probe = probes.printing(report())
    root = make_toolkit(components=False)
    done = run_cli(
        "preflight",
        *("--capability", CAPABILITY, "--probe", str(probe), "--device", "0"),
        *("--sm", "sm_80", "--toolkit-root", str(root), "--json"),
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr
    record = json.loads(done.stdout)
    assert record["reason_code"] == "TOOLKIT_COMPONENT_MISSING"
    assert record["observed"].startswith("toolkit component cuda-header is missing")
    assert str(tmp_path) not in done.stdout + done.stderr


# -- injected runners and inspectors ------------------------------------------------------


class _RaisingRunner:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def run(self) -> object:
        raise self.error


@pytest.mark.parametrize(
    ("error", "code", "facts"),
    [
        (
            CudaProbeError("PROBE_TIMEOUT", facts="the probe did not finish within 2 s"),
            "PROBE_TIMEOUT",
            "the probe did not finish within 2 s",
        ),
        (KeyError("x"), "PROBE_EXECUTION_FAILED", "the injected probe runner raised KeyError"),
    ],
    ids=["its-own-facts", "a-bug"],
)
def test_an_injected_runner_s_refusal_states_its_facts(
    error: Exception,
    code: str,
    facts: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    options = ready_options(tmp_path / "unused")
    codes, line = _log_line(caplog, options, probe_runner=_RaisingRunner(error))
    assert codes == (code,)
    assert f"\nobserved: {facts}\n" in line


@pytest.mark.parametrize(
    "facts",
    ["the probe at /opt/probe failed", "C:\\probe failed", "two\nlines", "x" * 401, ""],
)
def test_facts_an_injected_runner_gives_with_a_path_are_not_shown(
    facts: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    runner = _RaisingRunner(CudaProbeError("PROBE_TIMEOUT", facts=facts))
    codes, line = _log_line(caplog, ready_options(tmp_path / "unused"), probe_runner=runner)
    assert codes == ("PROBE_TIMEOUT",)
    assert "observed:" not in line
    assert "/opt/probe" not in line
