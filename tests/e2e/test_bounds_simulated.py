"""The probe and the smoke are bounded by themselves, and the host's session
sweep counts a zombie leader whose threads run (docs/interfaces.md, "Probe
runner").

With a driver that hangs while loading (``hang_at_load=1``, after leaving a
``setsid`` daemon from its constructor), a host running the binary through
the provider's runner is ended from outside: SIGTERM, SIGKILL, or
``timeout`` running out. Inside the namespace a harness (a child subreaper,
so the orphaned binary comes back to it) holds pidfds of the binary, its
driver worker and the daemon, waits for them well past the binaries' own
bound, and reads the binary's exit status: ended by SIGTERM (its parent-death
signal, after stopping the worker and sweeping) and nothing left. Without
the bound the binary and its worker run on after the host.

Every wait is for a state, bounded generously; nothing asserts on timing.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from sim_namespace import SIM_STATE_DIR, DriverLayout, NamespaceRun, SimulatedHost

DEVICES = ("driver_version=12040", "device=NVIDIA Simulated A100|8|0")
HANGING = DriverLayout(config=(*DEVICES, "daemon=load", "hang_at_load=1"))
# Well past the binaries' own bound (60 s worker deadline + 2 s sweep), and
# within the namespace's own limit.
WELL_PAST_THE_BOUND_SECONDS = 100
# The host: the provider's runner with its largest timeout (60 s).
HOST = """
import sys
from pathlib import Path
from rextio_device_cuda.probe import SubprocessProbeRunner
runner = SubprocessProbeRunner(Path(sys.argv[1]), arguments=sys.argv[2:], timeout_seconds=60)
runner.read_output_and_status()
"""
# Shared by the harnesses: a child subreaper, pidfd waits, /proc reads.
COMMON = f"""
import ctypes, json, os, select, signal, subprocess, sys, time
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
BOUND = {WELL_PAST_THE_BOUND_SECONDS}

def parent_of(pid):
    try:
        return int(open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return None  # gone

def logged_pid(path, prefix, parent=None):
    # The first pid logged in path (whose parent is parent, when given).
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        try:
            lines = open(path).read().split("\\n")[:-1]  # whole lines only
        except OSError:
            lines = []
        for line in lines:
            if line.startswith(prefix):
                pid = int(line.split()[1].removeprefix("pid="))
                if parent is None or parent_of(pid) == parent:
                    return pid
        time.sleep(0.01)
    print(json.dumps({{"error": "nothing logged in " + path}}))
    sys.exit(0)

def status_of(pid):
    # The exit status of a child of this process (a re-parented one too).
    try:
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    except ChildProcessError:
        return "not a child"

def ended(pidfds):
    # Which processes exited before the bound: one shared deadline.
    deadline = time.monotonic() + BOUND
    result = {{}}
    for name, pidfd in pidfds.items():
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        remaining = max(deadline - time.monotonic(), 0)
        result[name] = bool(poller.poll(int(remaining * 1000)))
    return result
"""
HOST_KILLED = (
    COMMON
    + f"""
how, binary, *arguments = sys.argv[1:]
host_argv = [sys.executable, "-I", "-c", {HOST!r}, binary, *arguments]
if how == "timeout":
    host_argv = ["timeout", "600", *host_argv]
host = subprocess.Popen(host_argv)
worker = logged_pid("{SIM_STATE_DIR}/hang.log", "hang ")
daemon = logged_pid("{SIM_STATE_DIR}/daemons.log", "daemon ")
probe = parent_of(worker)
pidfds = {{name: os.pidfd_open(pid) for name, pid in
          (("binary", probe), ("worker", worker), ("daemon", daemon))}}
# timeout's own way when its time is up: SIGALRM makes it send SIGTERM.
os.kill(host.pid, {{"term": signal.SIGTERM, "kill": signal.SIGKILL,
                   "timeout": signal.SIGALRM}}[how])
host_status = host.wait()
result = ended(pidfds)
# The binary was re-parented here once the host died: its exit status.
binary_status = status_of(probe) if result["binary"] else None
print(json.dumps({{"host_status": host_status, "ended": result,
                  "binary_status": binary_status}}))
"""
)


def _outcome(run: NamespaceRun) -> dict[str, Any]:
    lines = run.stdout.strip().splitlines()
    assert lines, (run.returncode, run.stderr)
    value = json.loads(lines[-1])
    assert isinstance(value, dict)
    return value


def _binary_argv(sim_host: SimulatedHost, binary: str) -> list[str]:
    if binary == "probe":
        return [str(sim_host.native.probe)]
    return [str(sim_host.native.smoke), "--device", "0"]


@pytest.mark.process_stress
@pytest.mark.parametrize("binary", ["probe", "smoke"])
@pytest.mark.parametrize(
    ("how", "host_status"),
    [("term", -signal.SIGTERM), ("kill", -signal.SIGKILL), ("timeout", 124)],
)
def test_a_killed_host_leaves_no_binary_and_no_worker(
    sim_host: SimulatedHost, binary: str, how: str, host_status: int
) -> None:
    argv = [sys.executable, "-I", "-c", HOST_KILLED, how, *_binary_argv(sim_host, binary)]
    run = sim_host.run(HANGING, argv)
    outcome = _outcome(run)
    assert outcome.get("host_status") == host_status, (outcome, run.stderr)
    # The binary, its driver worker and the driver's daemon all ended, and
    # the binary by its parent-death signal (not by its own deadline).
    assert outcome["ended"] == {"binary": True, "worker": True, "daemon": True}, outcome
    assert outcome["binary_status"] == -signal.SIGTERM, outcome


# Two copies of the binary at once (one wait for both bounds): one run by
# the harness, which stays alive, so the worker's own deadline ends the
# hanging driver; one started by a parent that exits at once, before or
# after the binary sets its parent-death signal, so it ends by that signal,
# by its check against the race, or by its deadline.
OWN_BOUND = (
    COMMON
    + f"""
starter = subprocess.Popen(["/bin/sh", "-c", '"$@" >/dev/null 2>&1 & echo $!', "sh",
                            *sys.argv[1:]], stdout=subprocess.PIPE)
orphan = int(starter.stdout.read().decode().strip())
orphan_pidfd = os.pidfd_open(orphan)
starter.wait()
binary = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
worker = logged_pid("{SIM_STATE_DIR}/hang.log", "hang ", binary.pid)
daemon = logged_pid("{SIM_STATE_DIR}/daemons.log", "daemon ", binary.pid)
pidfds = {{name: os.pidfd_open(pid) for name, pid in
          (("binary", binary.pid), ("worker", worker), ("daemon", daemon))}}
pidfds["orphan"] = orphan_pidfd
result = ended(pidfds)
status = stdout = stderr = None
if all(result.values()):  # else a survivor may hold the pipes open
    status = binary.wait()
    stdout, stderr = binary.stdout.read().decode(), binary.stderr.read().decode()
orphan_status = status_of(orphan) if result["orphan"] else None
print(json.dumps({{"ended": result, "status": status, "stdout": stdout, "stderr": stderr,
                  "orphan_status": orphan_status}}))
"""
)


@pytest.mark.process_stress
@pytest.mark.own_deadline
@pytest.mark.parametrize("binary", ["probe", "smoke"])
def test_a_hanging_driver_ends_within_the_binarys_own_bound(
    sim_host: SimulatedHost, binary: str
) -> None:
    argv = [sys.executable, "-I", "-c", OWN_BOUND, *_binary_argv(sim_host, binary)]
    run = sim_host.run(HANGING, argv)
    outcome = _outcome(run)
    ended = {"binary": True, "worker": True, "daemon": True, "orphan": True}
    assert outcome.get("ended") == ended, (outcome, run.stderr)
    # The deadline: no record (the worker wrote none), exit 1, stderr says why.
    assert (outcome["status"], outcome["stdout"]) == (1, ""), outcome
    assert "wrote no record within 60 s" in outcome["stderr"], outcome
    # The orphan: SIGTERM (the parent-death signal or the check against the
    # race), or 1 (the deadline: its parent died before its first instruction).
    assert outcome["orphan_status"] in (-signal.SIGTERM, 1), outcome


# A hostile, unpinned probe: its child moves to a process group of its own
# (still in the probe's session), starts a thread, and ends only its main
# thread, so its leader shows Z while the thread runs. The probe exits once
# that is so. After the runner returns, no thread of the child may be left.
ZOMBIE_THREAD_NAME = "rextio-zthread"
HOSTILE_PROBE = f"""
import ctypes, os, threading, time
libc = ctypes.CDLL(None)
SYS_EXIT = {{"x86_64": 60, "aarch64": 93}}[os.uname().machine]
ready_read, ready_write = os.pipe()
if os.fork() == 0:
    os.setpgid(0, 0)
    os.close(1)  # the runner's pipe: only the probe keeps it
    leader = os.getpid()

    def linger():
        libc.prctl(15, b"{ZOMBIE_THREAD_NAME}", 0, 0, 0)  # PR_SET_NAME
        while open(f"/proc/{{leader}}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
            time.sleep(0.001)
        with open("{SIM_STATE_DIR}/zombie-leader", "w") as marker:
            marker.write(str(leader))
        os.write(ready_write, b"z")
        while True:
            time.sleep(3600)

    threading.Thread(target=linger).start()
    libc.syscall(SYS_EXIT, 0)  # only the main thread exits
os.close(ready_write)
os.read(ready_read, 1)
print("{{}}")
"""
ZOMBIE_HOST = f"""
import json, os, sys
from pathlib import Path
from rextio_device_cuda.probe import SubprocessProbeRunner
output = SubprocessProbeRunner(Path(sys.argv[1]), timeout_seconds=60).read_output()
leader = int(Path("{SIM_STATE_DIR}/zombie-leader").read_text())
alive = []
for entry in os.listdir("/proc"):
    if not entry.isdigit():
        continue
    try:
        tasks = os.listdir(f"/proc/{{entry}}/task")
    except OSError:
        continue
    for task in tasks:
        try:
            comm = Path(f"/proc/{{entry}}/task/{{task}}/comm").read_text().strip()
            stat = Path(f"/proc/{{entry}}/task/{{task}}/stat").read_text()
        except OSError:
            continue
        if comm == "{ZOMBIE_THREAD_NAME}" and stat.rsplit(")", 1)[1].split()[0] != "Z":
            alive.append(int(task))
print(json.dumps({{"output": output.decode(), "leader": leader, "alive": alive}}))
"""


@pytest.mark.process_stress
def test_the_session_sweep_ends_a_zombie_leaders_running_thread(
    sim_host: SimulatedHost, tmp_path: Path
) -> None:
    probe = tmp_path / "hostile-probe"
    probe.write_text(f"#!{sys.executable}\n{HOSTILE_PROBE}", encoding="utf-8")
    probe.chmod(0o755)
    argv = [sys.executable, "-I", "-c", ZOMBIE_HOST, str(probe)]
    run = sim_host.run(DriverLayout(install="absent"), argv)
    assert run.returncode == 0, run.stderr
    outcome = _outcome(run)
    # The probe ran to its end after the child's leader became a zombie with
    # a running thread, and the runner's sweep left no thread of it.
    assert outcome["output"] == "{}\n", outcome
    assert outcome["leader"] > 0, outcome
    assert outcome["alive"] == [], outcome
