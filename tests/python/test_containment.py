"""The probe supervisor (a child subreaper): its lifetime and its fallback.

The runner tests show what a supervised run contains; these show that the
supervisor itself leaves nothing behind, is replaced when it dies, and that
without one the runner still contains the probe's process group.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import uuid

import pytest
from cuda_support import ProbeFactory, processes_with, report

from rextio_device_cuda import _contained
from rextio_device_cuda.probe import CudaProbeError, SubprocessProbeRunner

# Bounds only: each wait ends as soon as the state it waits for holds.
EXIT_BOUND_SECONDS = 60


def _wait_gone(pid: int) -> bool:
    """True once ``pid`` has exited (or never existed), within the bound."""
    try:
        descriptor = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        poller = select.poll()
        poller.register(descriptor, select.POLLIN)
        return bool(poller.poll(EXIT_BOUND_SECONDS * 1000))
    finally:
        os.close(descriptor)


def _ready_probe(probes: ProbeFactory) -> SubprocessProbeRunner:
    return SubprocessProbeRunner(probes.printing(report()), timeout_seconds=30.0)


def _idle_supervisor_pids() -> list[int]:
    return [supervisor.pid for supervisor in _contained._POOL.idle()]


def test_a_run_is_supervised_and_its_supervisor_is_reused(probes: ProbeFactory) -> None:
    runner = _ready_probe(probes)
    assert runner.run().status == "probe-complete"
    first = _idle_supervisor_pids()
    assert first, "no supervisor served the run"
    assert runner.run().status == "probe-complete"
    assert _idle_supervisor_pids() == first


def test_a_supervisor_killed_between_runs_is_replaced(probes: ProbeFactory) -> None:
    runner = _ready_probe(probes)
    runner.run()
    for pid in _idle_supervisor_pids():
        os.kill(pid, signal.SIGKILL)
        assert _wait_gone(pid)
    assert runner.run().status == "probe-complete"
    assert _idle_supervisor_pids(), "the replacement supervisor was not kept"


def test_the_supervisor_ends_with_its_host(probes: ProbeFactory) -> None:
    # A host that runs one probe and exits: its supervisor sees end of file
    # on its socket and exits too.
    code = (
        "import sys\n"
        "from rextio_device_cuda import _contained\n"
        "from rextio_device_cuda.probe import CudaProbeError, SubprocessProbeRunner\n"
        "SubprocessProbeRunner(sys.argv[1]).run()\n"
        "print(*[supervisor.pid for supervisor in _contained._POOL.idle()])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(probes.printing(report()))],
        capture_output=True,
        text=True,
        timeout=EXIT_BOUND_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    pids = [int(pid) for pid in done.stdout.split()]
    assert len(pids) == 1
    assert _wait_gone(pids[0]), "the supervisor outlived its host"


def test_without_a_supervisor_the_group_is_still_contained(
    probes: ProbeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_contained, "start_supervised", lambda *_: None)
    tag = f"rextio-direct-{uuid.uuid4().hex}"
    sleeper = f"{sys.executable} -c 'import time; time.sleep(30)' {tag}"
    text = json.dumps(report())
    path = probes.shell(f"{sleeper} >/dev/null 2>&1 &\nprintf '%s' '{text}'\n", name=tag)
    assert SubprocessProbeRunner(path, timeout_seconds=30.0).run().status == "probe-complete"
    assert processes_with(tag) == []


def test_a_spawn_the_supervisor_cannot_make_is_an_execution_failure(
    probes: ProbeFactory,
) -> None:
    # An executable file the kernel cannot execute: no interpreter line.
    path = probes.write("not-a-program", "plain text, not a program\n")
    with pytest.raises(CudaProbeError) as caught:
        SubprocessProbeRunner(path).run()
    assert caught.value.reason_code == "PROBE_EXECUTION_FAILED"
    assert _idle_supervisor_pids(), "a failed spawn must not cost the supervisor"
