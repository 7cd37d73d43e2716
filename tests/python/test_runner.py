"""Hostile probes: each returns its code and leaves nothing of its group running.

No assertion here depends on how fast the OS acts: a probe expected to hang
sleeps 30 s against a short timeout, every other probe runs against a long
one, and "nothing running" is what ``run()`` guarantees when it returns: no
member of the probe's process group, and no child of the host. (A descendant
that leaves the group with ``setsid`` is outside what the host contains; the
reviewed probe contains its own, see tests/e2e/test_containment_simulated.py.)
The ``process_stress`` tests are the ones `pytest -m process_stress --count N` repeats.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import uuid

import pytest
from cuda_support import ProbeFactory, processes_with, report

from rextio_device_cuda.probe import CudaProbeError, SubprocessProbeRunner, parse_probe_report

# For probes that hang (they sleep 30 s): short, so the tests stay quick.
HANG_TIMEOUT = 0.3
# For probes that finish on their own: long, so a loaded host cannot turn
# their code into PROBE_TIMEOUT.
FINISH_TIMEOUT = 30.0


def _run(probe_body: str, probes: ProbeFactory, timeout: float) -> tuple[str, str]:
    tag = f"rextio-hostile-{uuid.uuid4().hex}"
    path = probes.shell(probe_body.replace("TAG", tag), name=tag)
    runner = SubprocessProbeRunner(path, timeout_seconds=timeout)
    with pytest.raises(CudaProbeError) as caught:
        runner.run()
    return caught.value.reason_code, tag


# A process that sleeps with TAG in its argv (sleep(1) would reject the tag).
SLEEPER = f"{shlex.quote(sys.executable)} -c 'import time; time.sleep(30)' TAG"

# The same started in the background in a process group of its own (still
# in the probe's session), not holding stdout; the probe's shell goes on once
# it has moved.
OWN_GROUP_SLEEPER = (
    f"{shlex.quote(sys.executable)} -c 'import os, time; os.setpgid(0, 0); time.sleep(30)' TAG "
    ">/dev/null 2>&1 &\n"
    'while set -- $(cat /proc/$!/stat) && [ "$5" = "$$" ]; do :; done'
)

HOSTILE = [
    ("hang", "exec sleep 30 # TAG", "PROBE_TIMEOUT"),
    ("flood", "exec yes TAG", "PROBE_OUTPUT_TOO_LARGE"),
    ("nonzero", "echo '{}' # TAG\nexit 7", "PROBE_EXIT_NONZERO"),
    ("invalid-utf8", "printf '\\377\\376 TAG'", "PROBE_OUTPUT_INVALID"),
    ("exit-before-writing", "exit 0 # TAG", "PROBE_OUTPUT_INVALID"),
    # The child exits at once; a grandchild keeps stdout open for 30 s.
    ("grandchild-holds-stdout", f"{SLEEPER} &\nexit 0", "PROBE_TIMEOUT"),
    ("grandchild-after-output", f"{SLEEPER} &\necho '{{}}'", "PROBE_TIMEOUT"),
    # Many members at once, some orphaned by their exiting parent.
    (
        "many-grandchildren",
        "for i in 1 2 3 4 5 6 7 8; do (" + SLEEPER + " &) ; done\nexec sleep 30 # TAG",
        "PROBE_TIMEOUT",
    ),
    # A flood that also leaves a sleeper behind.
    ("flood-and-grandchild", f"{SLEEPER} &\nexec yes TAG", "PROBE_OUTPUT_TOO_LARGE"),
    # A grandchild that moved to a group of its own stays in the probe's
    # session: killing the probe's group alone would leave it running.
    ("own-group-after-output", f"{OWN_GROUP_SLEEPER}\necho 'x'", "PROBE_OUTPUT_INVALID"),
    ("own-group-hang", f"{OWN_GROUP_SLEEPER}\nexec sleep 30 # TAG", "PROBE_TIMEOUT"),
]


@pytest.mark.process_stress
@pytest.mark.parametrize(
    ("body", "code"), [(b, c) for _, b, c in HOSTILE], ids=[h[0] for h in HOSTILE]
)
def test_hostile_probe(body: str, code: str, probes: ProbeFactory) -> None:
    timeout = HANG_TIMEOUT if code == "PROBE_TIMEOUT" else FINISH_TIMEOUT
    reason, tag = _run(body, probes, timeout)
    assert reason == code
    assert processes_with(tag) == []


@pytest.mark.process_stress
def test_grandchild_is_killed_even_after_a_clean_exit(probes: ProbeFactory) -> None:
    # Output complete and exit 0, stdout closed by the grandchild: still killed.
    tag = f"rextio-bg-{uuid.uuid4().hex}"
    sleeper = SLEEPER.replace("TAG", tag)
    body = f"{sleeper} >/dev/null 2>&1 &\nprintf '%s' 'not json'\n"
    path = probes.shell(body, name=tag)
    with pytest.raises(CudaProbeError) as caught:
        SubprocessProbeRunner(path, timeout_seconds=FINISH_TIMEOUT).run()
    assert caught.value.reason_code == "PROBE_OUTPUT_INVALID"
    assert processes_with(tag) == []


@pytest.mark.process_stress
def test_a_ready_run_leaves_no_process_of_its_session(probes: ProbeFactory) -> None:
    # A valid report and exit 0, a sleeper left behind in a group of its own.
    tag = f"rextio-session-{uuid.uuid4().hex}"
    text = json.dumps(report())
    body = f"{OWN_GROUP_SLEEPER.replace('TAG', tag)}\nprintf '%s' '{text}'\n"
    path = probes.shell(body, name=tag)
    parsed = SubprocessProbeRunner(path, timeout_seconds=FINISH_TIMEOUT).run()
    assert parsed.status == "probe-complete"
    assert processes_with(tag) == []


@pytest.mark.process_stress
def test_a_ready_run_leaves_no_grandchild(probes: ProbeFactory) -> None:
    # The success path too: a valid report, exit 0, a sleeper left behind.
    tag = f"rextio-ready-{uuid.uuid4().hex}"
    sleeper = SLEEPER.replace("TAG", tag)
    text = json.dumps(report())
    path = probes.shell(f"{sleeper} >/dev/null 2>&1 &\nprintf '%s' '{text}'\n", name=tag)
    parsed = SubprocessProbeRunner(path, timeout_seconds=FINISH_TIMEOUT).run()
    assert parsed.status == "probe-complete"
    assert processes_with(tag) == []


def _host_children() -> list[int]:
    """This process's children (every thread's), zombies included."""
    found: list[int] = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children", encoding="ascii") as file:
            found.extend(int(pid) for pid in file.read().split())
    return found


# Hostile probes beyond HOSTILE, each with the code it must give.
MORE_HOSTILE = [
    ("killed-by-signal", "kill -9 $$ # TAG", "PROBE_EXIT_NONZERO", FINISH_TIMEOUT),
    ("stopped", "kill -STOP $$ # TAG", "PROBE_TIMEOUT", HANG_TIMEOUT),
    # Keeps forking group members (small shells, each waiting on a sleep)
    # until the group is killed; capped so a slow host is not flooded.
    (
        "fork-bomb",
        "i=0; while [ $i -lt 200 ]; do sh -c 'sleep 30' TAG & i=$((i+1)); done\n"
        "exec sleep 30 # TAG",
        "PROBE_TIMEOUT",
        HANG_TIMEOUT,
    ),
    ("huge-output", "head -c 10000000 /dev/zero # TAG", "PROBE_OUTPUT_TOO_LARGE", FINISH_TIMEOUT),
]


@pytest.mark.process_stress
@pytest.mark.parametrize(
    ("body", "code", "timeout"),
    [(b, c, t) for _, b, c, t in MORE_HOSTILE],
    ids=[h[0] for h in MORE_HOSTILE],
)
def test_more_hostile_probes(body: str, code: str, timeout: float, probes: ProbeFactory) -> None:
    # Children the test process had before (another test's) are not ours to judge.
    before = set(_host_children())
    reason, tag = _run(body, probes, timeout)
    assert reason == code
    assert processes_with(tag) == []
    assert set(_host_children()) <= before


@pytest.mark.process_stress
def test_a_long_lived_host_stays_healthy(probes: ProbeFactory) -> None:
    # One process, every hostile probe in turn; after each, a good probe
    # still completes and the host is left with no child of its own.
    good = SubprocessProbeRunner(probes.printing(report(), name="good"), timeout_seconds=30.0)
    before = set(_host_children())
    cases = [(b, c) for _, b, c in HOSTILE] + [(b, c) for _, b, c, _ in MORE_HOSTILE]
    for body, code in cases:
        timeout = HANG_TIMEOUT if code == "PROBE_TIMEOUT" else FINISH_TIMEOUT
        reason, tag = _run(body, probes, timeout)
        assert reason == code, body
        assert processes_with(tag) == []
        assert good.run().status == "probe-complete", body
        assert set(_host_children()) <= before


def test_probe_gets_an_empty_environment_and_no_path(probes: ProbeFactory) -> None:
    # The shell's initial environment is exactly what the runner passed.
    path = probes.shell("printf 'env:'\ncat /proc/$$/environ\n")
    output = SubprocessProbeRunner(path).read_output()
    assert output == b"env:"


@pytest.mark.parametrize("timeout", [0, -1, 60.5, float("nan"), True, "5"])
def test_timeout_bounds(timeout: object, probes: ProbeFactory) -> None:
    with pytest.raises(ValueError, match="timeout_seconds"):
        SubprocessProbeRunner(probes.directory, timeout_seconds=timeout)  # type: ignore[arg-type]


@pytest.mark.parametrize("argument", ["", "a\0b", "x" * 4097])
def test_argument_bounds(argument: str, probes: ProbeFactory) -> None:
    with pytest.raises(ValueError, match="argument"):
        SubprocessProbeRunner(probes.directory, arguments=(argument,))


def test_executable_must_be_a_path() -> None:
    with pytest.raises(TypeError):
        SubprocessProbeRunner(42)  # type: ignore[arg-type]


def _halves(text: str) -> tuple[str, str]:
    middle = len(text) // 2
    return text[:middle], text[middle:]


def test_output_after_a_pause_is_parsed_whole(probes: ProbeFactory) -> None:
    # The first half alone is not JSON; the report is only complete after the pause.
    first, second = _halves(json.dumps(report()))
    path = probes.shell(f"printf '%s' '{first}'\nsleep 0.2\nprintf '%s' '{second}'\n")
    parsed = SubprocessProbeRunner(path).run()
    assert parsed == parse_probe_report(json.dumps(report()).encode())


def test_bytes_after_a_complete_report_still_count(probes: ProbeFactory) -> None:
    # A valid report, a pause, then trailing garbage: the whole output is judged.
    text = json.dumps(report())
    path = probes.shell(f"printf '%s' '{text}'\nsleep 0.2\nprintf '%s' 'garbage'\n")
    with pytest.raises(CudaProbeError) as caught:
        SubprocessProbeRunner(path).run()
    assert caught.value.reason_code == "PROBE_OUTPUT_INVALID"


def test_runner_codes_win_over_a_parse_failure_seen_early(probes: ProbeFactory) -> None:
    path = probes.shell("printf '%s' 'not json'\nsleep 0.2\nexit 3\n")
    with pytest.raises(CudaProbeError) as caught:
        SubprocessProbeRunner(path).run()
    assert caught.value.reason_code == "PROBE_EXIT_NONZERO"


def test_a_path_with_nul_is_not_found(probes: ProbeFactory) -> None:
    # Strict resolution fails (a ValueError in os.path), so the code is PROBE_NOT_FOUND.
    with pytest.raises(CudaProbeError) as caught:
        SubprocessProbeRunner(f"{probes.directory}/probe\0x").run()
    assert caught.value.reason_code == "PROBE_NOT_FOUND"


@pytest.mark.parametrize(("size", "code"), [(65536, None), (65537, "PROBE_OUTPUT_TOO_LARGE")])
def test_output_size_bound(size: int, code: str | None, probes: ProbeFactory) -> None:
    path = probes.python(f"import sys\nsys.stdout.write(' ' * {size})\n")
    runner = SubprocessProbeRunner(path)
    if code is None:
        assert len(runner.read_output()) == size
        with pytest.raises(CudaProbeError) as caught:
            runner.run()
        assert caught.value.reason_code == "PROBE_OUTPUT_INVALID"
    else:
        with pytest.raises(CudaProbeError) as caught:
            runner.read_output()
        assert caught.value.reason_code == code


@pytest.mark.process_stress
def test_output_and_status_returns_any_exit_status_with_the_output(probes: ProbeFactory) -> None:
    # The lifetime smoke exits 1 with its failure record; validate needs both.
    path = probes.shell("echo '{\"status\": \"unavailable\"}'\nexit 1\n")
    runner = SubprocessProbeRunner(path, arguments=("--device", "0"))
    assert runner.read_output_and_status() == (b'{"status": "unavailable"}\n', 1)
    with pytest.raises(CudaProbeError) as caught:
        runner.read_output()
    assert caught.value.reason_code == "PROBE_EXIT_NONZERO"


@pytest.mark.process_stress
@pytest.mark.parametrize(
    ("body", "code"), [(b, c) for _, b, c in HOSTILE[:2]], ids=[h[0] for h in HOSTILE[:2]]
)
def test_output_and_status_keeps_every_other_runner_bound(
    body: str, code: str, probes: ProbeFactory
) -> None:
    tag = f"rextio-status-{uuid.uuid4().hex}"
    path = probes.shell(body.replace("TAG", tag), name=tag)
    timeout = HANG_TIMEOUT if code == "PROBE_TIMEOUT" else FINISH_TIMEOUT
    with pytest.raises(CudaProbeError) as caught:
        SubprocessProbeRunner(path, timeout_seconds=timeout).read_output_and_status()
    assert caught.value.reason_code == code
    assert processes_with(tag) == []
