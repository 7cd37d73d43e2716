"""The reviewed probe and smoke end whatever the driver leaves behind.

docs/interfaces.md, Probe runner, says what is contained.

The simulated driver double-forks a ``setsid`` daemon from its constructor
and from ``cuInit`` (``daemon=load``, ``daemon=init``): each leaves the
process group and session the host would kill, and holds the binary's copy
of stdout. After the binary returns, the namespace's shell looks up every
daemon the driver logged: none may be alive. Without the binaries'
containment the daemons are re-parented to the namespace's init and live on.

A driver whose thread keeps forking ``setsid`` children (``fork_storm=1``)
cannot outrun the sweep: the driver runs only in the binaries' worker
process, which is killed before the sweep.
"""

from __future__ import annotations

import json
import sys

import pytest
from sim_namespace import SIM_STATE_DIR, DriverLayout, SimulatedHost

DAEMON_LOG = f"{SIM_STATE_DIR}/daemons.log"
DAEMON_NAME = "rextio-sim-dmn"
# Run the binary, then report on stderr every logged daemon that is still a
# live (non-zombie) process named like the daemon, and how many were logged.
AFTER = (
    '"$0" "$@"; status=$?\n'
    f"logged=$(grep -c '^daemon pid=' {DAEMON_LOG} 2>/dev/null || echo 0)\n"
    'alive=""\n'
    f"for pid in $(sed -n 's/^daemon pid=\\([0-9]*\\) .*/\\1/p' {DAEMON_LOG} 2>/dev/null); do\n"
    '  state=$(sed -n \'s/^[0-9]* ([^)]*) \\([A-Z]\\).*/\\1/p\' /proc/$pid/stat 2>/dev/null)\n'
    '  if [ -n "$state" ] && [ "$state" != Z ] && \\\n'
    f'    [ "$(cat /proc/$pid/comm)" = {DAEMON_NAME} ]; then\n'
    '    alive="$alive $pid"\n'
    "  fi\n"
    "done\n"
    'echo "rextio-daemons logged=$logged alive=[${alive# }]" >&2\n'
    'exit "$status"\n'
)
DEVICES = ("driver_version=12040", "device=NVIDIA Simulated A100|8|0")


def _daemons(stderr: str) -> tuple[int, str]:
    lines = [line for line in stderr.splitlines() if line.startswith("rextio-daemons ")]
    assert len(lines) == 1, stderr
    logged, alive = lines[0].removeprefix("rextio-daemons ").split(" ", 1)
    return int(logged.removeprefix("logged=")), alive.removeprefix("alive=")


@pytest.mark.process_stress
@pytest.mark.parametrize("binary", ["probe", "smoke"])
def test_no_daemon_of_the_driver_outlives_the_binary(sim_host: SimulatedHost, binary: str) -> None:
    layout = DriverLayout(config=(*DEVICES, "daemon=load", "daemon=init"))
    if binary == "probe":
        argv = ["/bin/sh", "-c", AFTER, str(sim_host.native.probe)]
        expected = ("probe-complete", 0)
    else:
        argv = ["/bin/sh", "-c", AFTER, str(sim_host.native.smoke), "--device", "0"]
        expected = ("smoke-complete", 0)
    run = sim_host.run(layout, argv)
    record = run.record()
    assert (record["status"], run.returncode) == expected, (record, run.stderr)
    logged, alive = _daemons(run.stderr)
    # Both daemons really started (constructor and cuInit) and none is left.
    assert logged == 2, run.stderr
    assert alive == "[]", run.stderr


def test_the_daemons_would_outlive_a_binary_that_does_not_contain_them(
    sim_host: SimulatedHost,
) -> None:
    # The same driver loaded by a process that is no subreaper and ends no
    # descendant (Python's ctypes): its daemons survive it. This is what the
    # test above would see without the binaries' containment.
    layout = DriverLayout(config=(*DEVICES, "daemon=load", "daemon=init"))
    loader = (
        "import ctypes; driver = ctypes.CDLL('/usr/local/nvidia/lib64/libcuda.so.1'); "
        "print(driver.cuInit(0))"
    )
    run = sim_host.run(layout, ["/bin/sh", "-c", AFTER, sys.executable, "-c", loader])
    assert run.stdout.strip() == "0", run.stderr
    logged, alive = _daemons(run.stderr)
    assert logged == 2, run.stderr
    assert len(alive.strip("[]").split()) == 2, run.stderr


STORM_LOG = f"{SIM_STATE_DIR}/storm.log"
STORM_NAME = "rextio-sim-frk"
STORM_ROUNDS = 20
# Run the binary STORM_ROUNDS times in one namespace. After each run report
# on stderr its exit status, its record, how many storm children the driver
# logged and every process of the namespace still alive (not a zombie) with
# the storm children's name. The namespace has its own PID view, so nothing
# outside it is seen.
AFTER_STORM = (
    "round=0\n"
    f"while [ $round -lt {STORM_ROUNDS} ]; do\n"
    f"  : > {STORM_LOG}\n"
    f'  record=$("$0" "$@"); status=$?\n'
    f"  logged=$(grep -c '^storm pid=' {STORM_LOG})\n"
    '  alive=""\n'
    "  for stat in /proc/[0-9]*/stat; do\n"
    '    pid=${stat#/proc/}; pid=${pid%/stat}\n'
    "    state=$(sed -n 's/^[0-9]* ([^)]*) \\([A-Z]\\).*/\\1/p' $stat 2>/dev/null)\n"
    '    if [ -n "$state" ] && [ "$state" != Z ] && \\\n'
    f'      [ "$(cat /proc/$pid/comm 2>/dev/null)" = {STORM_NAME} ]; then\n'
    '      alive="$alive $pid"\n'
    "    fi\n"
    "  done\n"
    '  echo "rextio-storm status=$status logged=$logged alive=[${alive# }] record=$record" >&2\n'
    "  round=$((round + 1))\n"
    "done\n"
)


@pytest.mark.process_stress
@pytest.mark.parametrize("binary", ["probe", "smoke"])
def test_a_driver_thread_that_keeps_forking_leaves_nothing_behind(
    sim_host: SimulatedHost, binary: str
) -> None:
    # The driver's constructor starts a thread that keeps forking children
    # that `setsid`. The binaries stop it (the driver lives only in their
    # worker, killed before the sweep) and sweep within their deadline: the
    # record is the binary's own (a sweep that ran out of time would turn it
    # into DRIVER_PROCESSES_SURVIVED) and no storm child is left.
    layout = DriverLayout(config=(*DEVICES, "fork_storm=1"))
    if binary == "probe":
        argv = ["/bin/sh", "-c", AFTER_STORM, str(sim_host.native.probe)]
        expected = ("probe-complete", 0)
    else:
        argv = ["/bin/sh", "-c", AFTER_STORM, str(sim_host.native.smoke), "--device", "0"]
        expected = ("smoke-complete", 0)
    run = sim_host.run(layout, argv)
    rounds = [line for line in run.stderr.splitlines() if line.startswith("rextio-storm ")]
    assert len(rounds) == STORM_ROUNDS, run.stderr
    for line in rounds:
        fields, record_text = line.removeprefix("rextio-storm ").split(" record=", 1)
        status, logged, alive = fields.split(" ", 2)
        record = json.loads(record_text)
        assert (record["status"], int(status.removeprefix("status="))) == expected, line
        # The storm really ran, and none of its children is left.
        assert int(logged.removeprefix("logged=")) >= 1, line
        assert alive == "alive=[]", line


# Inside the namespace: HOSTS threads each run the shipped probe through the
# provider's own runner (2 s timeout) while every probe's driver storms, then
# print each outcome and the storm children still alive.
HOSTS = 4
CONCURRENT_HOSTS = f"""
import json, os, sys, threading
from pathlib import Path
from rextio_device_cuda.probe import CudaProbeError, SubprocessProbeRunner

outcomes = []
def one_run():
    try:
        report = SubprocessProbeRunner(Path(sys.argv[1]), timeout_seconds=2.0).run()
        outcomes.append(report.reason_code or report.status)
    except CudaProbeError as error:
        outcomes.append(error.reason_code)
threads = [threading.Thread(target=one_run) for _ in range({HOSTS})]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
alive = []
for entry in os.listdir("/proc"):
    if not entry.isdigit():
        continue
    try:
        comm = Path("/proc", entry, "comm").read_text().strip()
        state = Path("/proc", entry, "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        continue
    if comm == "{STORM_NAME}" and state != "Z":
        alive.append(int(entry))
storms = Path("{STORM_LOG}").read_text().count("storm pid=")
print(json.dumps({{"outcomes": sorted(outcomes), "alive": alive, "storms": storms}}))
"""


@pytest.mark.process_stress
def test_concurrent_storming_probes_end_through_the_host_and_leave_nothing(
    sim_host: SimulatedHost,
) -> None:
    # Under concurrent fork storms on the same CPUs, every run the host makes
    # ends (a ready report, or a refusal: never a hang) and no storm child is
    # left. How late a starved host ends is the scheduler's; the bound stated
    # in docs/interfaces.md is a deadline checked whenever the host runs, not
    # something a test can time without asserting on the OS's speed.
    layout = DriverLayout(config=(*DEVICES, "fork_storm=1"))
    argv = [sys.executable, "-I", "-c", CONCURRENT_HOSTS, str(sim_host.native.probe)]
    run = sim_host.run(layout, argv)
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert len(seen["outcomes"]) == HOSTS, seen
    allowed = {"probe-complete", "PROBE_TIMEOUT", "DRIVER_PROCESSES_SURVIVED"}
    assert set(seen["outcomes"]) <= allowed, seen
    assert seen["alive"] == [], seen
    # The storms really ran: each driver forked at least its first child.
    assert seen["storms"] >= HOSTS, seen


# -- a timeout asks the reviewed probe to sweep first -------------------------------

# The provider's runner runs the probe (a short timeout); 3 s after it
# returns, every process of the namespace's own PID view but its init and
# this harness is listed with its state, and the daemons the driver logged
# are counted. Zombies are no processes left running.
RUN_THEN_LOOK = f"""
import json, os, sys, time
from rextio_device_cuda.probe import CudaProbeError, SubprocessProbeRunner
timeout, binary = float(sys.argv[1]), sys.argv[2]
try:
    SubprocessProbeRunner(binary, timeout_seconds=timeout).read_output_and_status()
    outcome = "returned"
except CudaProbeError as error:
    outcome = error.reason_code
time.sleep(3)
alive = []
for name in os.listdir("/proc"):
    if not name.isdigit() or int(name) in (1, os.getpid()):
        continue
    try:
        with open(f"/proc/{{name}}/stat") as stat:
            fields = stat.read()
    except OSError:
        continue  # gone
    if fields.rsplit(")", 1)[1].split()[0] != "Z":
        alive.append(fields.split(" (", 1)[1].rsplit(")", 1)[0])
try:
    with open("{DAEMON_LOG}") as log:
        logged = sum(line.startswith("daemon pid=") for line in log)
except OSError:
    logged = 0
print(json.dumps({{"outcome": outcome, "logged": logged, "alive": alive}}))
"""
# Long enough that the driver's constructor has left its daemon before the
# timeout (the test checks that it did), short enough to loop.
HANG_TIMEOUT_SECONDS = 4


@pytest.mark.process_stress
@pytest.mark.parametrize(
    ("config", "timeout", "outcome"),
    [
        (("daemon=load", "hang_at_load=1"), HANG_TIMEOUT_SECONDS, "PROBE_TIMEOUT"),
        (("daemon=load",), 60, "returned"),
    ],
    ids=["timeout", "success"],
)
def test_nothing_the_driver_started_outlives_the_run(
    sim_host: SimulatedHost, config: tuple[str, ...], timeout: int, outcome: str
) -> None:
    # A driver whose constructor leaves a setsid daemon (outside the
    # probe's session) and then, for the timeout, hangs: the runner's
    # SIGKILL of the session alone would leave the daemon under init; the
    # probe's own sweep (asked for by SIGTERM) ends it.
    layout = DriverLayout(config=(*DEVICES, *config))
    argv = [sys.executable, "-I", "-c", RUN_THEN_LOOK, str(timeout), str(sim_host.native.probe)]
    run = sim_host.run(layout, argv)
    lines = run.stdout.strip().splitlines()
    assert lines, (run.returncode, run.stderr)
    found = json.loads(lines[-1])
    assert found["outcome"] == outcome, run.stderr
    assert found["logged"] == 1, run.stderr
    assert found["alive"] == [], run.stderr
