"""How the runner starts and ends a probe, and the host's odd states it must survive.

The probe gets its own session and process group, an empty environment,
stdin and stderr ``/dev/null``, stdout a pipe, no other descriptor of the
host, default signal dispositions. A host started with stdin, stdout or
stderr closed runs pinned probes; a host that ignores SIGCHLD never reads a
lost exit status as success; an interrupt at any moment of a run leaves no
probe running, no child unreaped and no descriptor open.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cuda_support import ProbeFactory, processes_with, python_shebang, report

from rextio_device_cuda.probe import CudaProbeError, SubprocessProbeRunner

# Records what the probe was given. The shell reads its own environment and
# ignored-signal mask first (it exports PWD itself, and Python would ignore
# SIGPIPE itself), then execs Python, which lists its descriptors (the
# listing adds one, its own directory descriptor).
_INSPECT = f"""ignored=$(sed -n 's/^SigIgn:[[:space:]]*//p' /proc/$$/status)
environ=$(tr '\\000' ' ' < /proc/$$/environ)
exec {shlex.quote(sys.executable)} -I -c '
import json, os, sys
print(json.dumps({{
    "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
    "stdio": [os.readlink(f"/proc/self/fd/{{fd}}") for fd in (0, 1, 2)],
    "pid": os.getpid(), "pgrp": os.getpgrp(), "sid": os.getsid(0),
    "environ": sys.argv[2],
    "ignored": int(sys.argv[1], 16),
}}))' "$ignored" "$environ"
"""


def _inspect(probes: ProbeFactory) -> dict[str, Any]:
    path = probes.shell(_INSPECT, name="inspect")
    # Descriptors the host could leak: an inheritable one, one at a high
    # number, and a non-inheritable one.
    inheritable = os.open(os.devnull, os.O_RDONLY)
    os.set_inheritable(inheritable, True)
    high = os.dup2(inheritable, 250, inheritable=True)
    private = os.open(os.devnull, os.O_RDONLY)
    try:
        output = SubprocessProbeRunner(path, timeout_seconds=30.0).read_output()
    finally:
        for descriptor in (inheritable, high, private):
            os.close(descriptor)
    seen: dict[str, Any] = json.loads(output)
    # One pipe or another: what kind of file each is.
    seen["stdio"] = [target.split("[")[0] for target in seen["stdio"]]
    return seen


@pytest.mark.process_stress
def test_the_probe_gets_its_own_session_stdio_and_nothing_else(probes: ProbeFactory) -> None:
    seen = _inspect(probes)
    assert seen["pid"] == seen["pgrp"] == seen["sid"]
    assert seen["pid"] != os.getpid()
    assert seen["stdio"][0] == seen["stdio"][2] == os.devnull
    assert seen["stdio"][1] == "pipe:"
    # 0, 1, 2 and the listing's own descriptor: nothing of the host's.
    assert len(seen["fds"]) == 4
    assert seen["fds"][:3] == [0, 1, 2]
    assert seen["environ"] == ""
    # This interpreter ignores SIGPIPE (13) and SIGXFSZ (25); the probe must not.
    assert seen["ignored"] & (1 << (13 - 1) | 1 << (25 - 1)) == 0


@pytest.mark.parametrize(
    ("data", "facts"),
    [
        (
            b"neither ELF nor a script\n",
            "starting the probe failed with ENOEXEC (Exec format error)",
        ),
        (b"#!/nonexistent/interpreter\n", "starting the probe failed with ENOENT"),
    ],
    ids=["enoexec", "missing-interpreter"],
)
def test_an_exec_failure_is_execution_failed_with_its_errno(
    data: bytes, facts: str, probes: ProbeFactory
) -> None:
    before = _children()
    probe = probes.write_bytes("probe", data)
    with pytest.raises(CudaProbeError) as caught:
        SubprocessProbeRunner(probe).run()
    assert caught.value.reason_code == "PROBE_EXECUTION_FAILED"
    assert caught.value.facts is not None
    assert caught.value.facts.startswith(facts)
    # The child that failed to exec was reaped.
    assert _children() <= before


def test_a_good_probe_runs(probes: ProbeFactory) -> None:
    assert SubprocessProbeRunner(probes.printing(report())).run().status == "probe-complete"


def _children() -> set[int]:
    found: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children", encoding="ascii") as file:
            found.update(int(pid) for pid in file.read().split())
    return found


def test_the_start_is_audited_as_popen_would_audit_it(probes: ProbeFactory) -> None:
    # An audit hook sees the probe start under Popen's event, with its
    # executable, argv and empty environment (hooks cannot be removed: a
    # fresh interpreter).
    probe = probes.printing(report())
    child = f"""
import sys
events = []
sys.addaudithook(lambda event, args: events.append(args) if event == "subprocess.Popen" else None)
from rextio_device_cuda._runner import SubprocessProbeRunner
SubprocessProbeRunner({str(probe)!r}).run()
print(repr(events))
"""
    done = subprocess.run(
        [sys.executable, "-I", "-c", child], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == repr([(str(probe), [str(probe)], None, {})])


def test_a_path_the_child_cannot_exec_leaves_no_descriptor(probes: ProbeFactory) -> None:
    # The failure path closes what it opened: the host's descriptor count is unchanged.
    probe = probes.write_bytes("probe", b"neither ELF nor a script\n")
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        with pytest.raises(CudaProbeError):
            SubprocessProbeRunner(probe).run()
    assert len(os.listdir("/proc/self/fd")) == before


def test_the_probe_path_keeps_its_bytes(tmp_path: Path) -> None:
    # A non-ASCII (undecodable) path is passed to exec as its bytes.
    directory = tmp_path / os.fsdecode(b"caf\xe9")
    directory.mkdir()
    probe = directory / "probe"
    probe.write_text(f"{python_shebang()}print({json.dumps(json.dumps(report()))})\n")
    probe.chmod(0o755)
    assert SubprocessProbeRunner(probe).run().status == "probe-complete"


# -- hosts in odd states: each a fresh interpreter, so its state is its own ---------

# Runs the probe argv[1] (pinned to argv[2] unless it is "-") and writes
# [reason code or "ready", facts] as JSON to argv[3]: the host's stdout may be closed.
_HOST = """
import json, sys
from rextio_device_cuda.probe import CudaProbeError, SubprocessProbeRunner
pin = None if sys.argv[2] == "-" else sys.argv[2]
try:
    SubprocessProbeRunner(sys.argv[1], probe_sha256=pin, timeout_seconds=30.0).run()
    outcome = ["ready", None]
except CudaProbeError as error:
    outcome = [error.reason_code, error.facts]
with open(sys.argv[3], "w", encoding="utf-8") as file:
    json.dump(outcome, file)
"""


def _host(
    tmp_path: Path, probe: Path, pin: str | None, *, prelude: str = "", close_fd: int | None = None
) -> list[Any]:
    result = tmp_path / "outcome.json"
    code = prelude + _HOST
    argv = [sys.executable, "-I", "-c", code, str(probe), pin or "-", str(result)]
    if close_fd is not None:
        # The shell closes the descriptor, then becomes the host.
        argv = ["/bin/sh", "-c", f'exec "$@" {close_fd}>&-', "host", *argv]
    subprocess.run(argv, timeout=120, check=True, stdin=subprocess.DEVNULL)
    outcome: list[Any] = json.loads(result.read_text(encoding="utf-8"))
    return outcome


@pytest.mark.process_stress
@pytest.mark.parametrize("closed", [0, 1, 2], ids=["stdin", "stdout", "stderr"])
def test_a_host_started_with_a_standard_stream_closed_runs_a_pinned_probe(
    closed: int, probes: ProbeFactory, tmp_path: Path
) -> None:
    probe = probes.binary(report())
    pin = _digest(probe)
    assert _host(tmp_path, probe, pin, close_fd=closed) == ["ready", None]
    assert probes.marker().read_text(encoding="ascii") == "ran\n"


def _digest(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


_IGNORE_SIGCHLD = "import signal\nsignal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"


@pytest.mark.process_stress
@pytest.mark.parametrize(
    "ending", ["exit 3", "kill -KILL $$", "exit 0"], ids=["exit-3", "sigkill", "exit-0"]
)
def test_a_host_ignoring_sigchld_never_reads_a_lost_status_as_success(
    ending: str, probes: ProbeFactory, tmp_path: Path
) -> None:
    # A complete report, then the ending: the kernel reaps the probe before
    # its status can be read, so not even exit 0 can be told from exit 3.
    text = json.dumps(report())
    probe = probes.shell(f"printf '%s' '{text}'\n{ending}\n")
    code, facts = _host(tmp_path, probe, None, prelude=_IGNORE_SIGCHLD)
    assert code == "PROBE_EXECUTION_FAILED"
    assert "ignores SIGCHLD" in facts


def test_the_same_probes_in_an_ordinary_host(probes: ProbeFactory, tmp_path: Path) -> None:
    # The other side: with SIGCHLD at its default, each status is read.
    text = json.dumps(report())
    for ending, code in (("exit 3", "PROBE_EXIT_NONZERO"), ("exit 0", "ready")):
        probe = probes.shell(f"printf '%s' '{text}'\n{ending}\n", name=code)
        assert _host(tmp_path, probe, None)[0] == code


# Runs ROUNDS probes (pinned and unpinned in turn), each with a SIGALRM whose
# handler raises KeyboardInterrupt at a random moment of its first
# milliseconds; prints how many rounds raised it, and what the host holds
# afterwards: its children, its descriptors (before and after).
_INTERRUPTED_HOST = """
import json, os, random, signal, sys
from rextio_device_cuda.probe import CudaProbeError, SubprocessProbeRunner

def children():
    found = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as file:
            found.extend(file.read().split())
    return found

signal.signal(signal.SIGALRM, signal.default_int_handler)
runners = [
    SubprocessProbeRunner(sys.argv[1], timeout_seconds=30.0),
    SubprocessProbeRunner(sys.argv[2], probe_sha256=sys.argv[3], timeout_seconds=30.0),
]
for runner in runners:
    runner.run()  # both work uninterrupted
descriptors = sorted(os.listdir("/proc/self/fd"))
interrupted = 0
for round in range(int(sys.argv[4])):
    try:
        try:
            signal.setitimer(signal.ITIMER_REAL, random.uniform(0.0, float(sys.argv[5])))
            runners[round % 2].run()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except KeyboardInterrupt:
        interrupted += 1
print(json.dumps({
    "interrupted": interrupted,
    "children": children(),
    "descriptors": [descriptors, sorted(os.listdir("/proc/self/fd"))],
}))
"""


@pytest.mark.process_stress
def test_interrupts_at_random_moments_leave_nothing_behind(
    probes: ProbeFactory, tmp_path: Path
) -> None:
    text = json.dumps(report())
    tag = "rextio-interrupted"
    plain = probes.shell(f"printf '%s' '{text}'\n", name=f"{tag}-plain")
    pinned = probes.binary(report(), name=f"{tag}-pinned")
    rounds, window = 300, 0.004
    done = subprocess.run(
        [sys.executable, "-I", "-c", _INTERRUPTED_HOST, str(plain), str(pinned), _digest(pinned),
         str(rounds), str(window)],
        capture_output=True, text=True, timeout=600, check=True,
    )
    seen = json.loads(done.stdout)
    # Runs were interrupted (some after they ended: the timer can fire late).
    assert seen["interrupted"] > 0
    assert seen["children"] == []
    assert seen["descriptors"][0] == seen["descriptors"][1]
    assert processes_with(str(probes.directory)) == []


# Makes every Popen raise KeyboardInterrupt the moment the probe has been
# started (a real SIGINT to this process, handled at the next instruction,
# inside Popen), then reports what the host holds.
_INTERRUPTED_AT_SPAWN = """
import json, os, signal, subprocess, sys
from rextio_device_cuda.probe import SubprocessProbeRunner

# Python raises KeyboardInterrupt on SIGINT only where it was not ignored at
# start; this test may run with SIGINT ignored (nohup, a background job).
signal.signal(signal.SIGINT, signal.default_int_handler)

class Interrupted(subprocess.Popen):
    def __init__(self, *arguments, **keywords):
        super().__init__(*arguments, **keywords)
        os.kill(os.getpid(), signal.SIGINT)
        started.append(self.pid)

started = []
subprocess.Popen = Interrupted
descriptors = sorted(os.listdir("/proc/self/fd"))
raised = 0
for pin in (None, sys.argv[3]):
    runner = SubprocessProbeRunner(sys.argv[1 if pin is None else 2], probe_sha256=pin)
    try:
        runner.run()
    except KeyboardInterrupt:
        raised += 1
children = []
for task in os.listdir("/proc/self/task"):
    with open(f"/proc/self/task/{task}/children") as file:
        children.extend(file.read().split())
print(json.dumps({
    "raised": raised,
    "started": len(started),
    "children": children,
    "descriptors": [descriptors, sorted(os.listdir("/proc/self/fd"))],
}))
"""


@pytest.mark.process_stress
def test_an_interrupt_right_at_the_spawn_leaves_nothing_behind(
    probes: ProbeFactory, tmp_path: Path
) -> None:
    # The probes would run for 30 s: only the runner's cleanup can end them.
    tag = f"rextio-at-spawn-{os.getpid()}"
    plain = probes.shell(f"exec sleep 30 # {tag}", name=f"{tag}-plain")
    pinned = probes.binary(report(), name=f"{tag}-pinned")
    done = subprocess.run(
        [sys.executable, "-I", "-c", _INTERRUPTED_AT_SPAWN, str(plain), str(pinned),
         _digest(pinned)],
        capture_output=True, text=True, timeout=120, check=True,
    )
    seen = json.loads(done.stdout)
    # Both runs started their probe and raised KeyboardInterrupt (not swallowed).
    assert (seen["raised"], seen["started"]) == (2, 2)
    assert seen["children"] == []
    assert seen["descriptors"][0] == seen["descriptors"][1]
    assert processes_with(tag) == []
