"""How the runner starts a probe: what the probe gets, by either way of starting it.

On CPython the runner calls ``_posixsubprocess.fork_exec`` (what
``subprocess.Popen`` calls) directly where its parameters are known, and
``subprocess.Popen`` anywhere else; each test here runs both ways and the
probe must see exactly the same thing: its own session and process group,
an empty environment, stdin and stderr ``/dev/null``, stdout a pipe, no
other descriptor of the host, default signal dispositions.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cuda_support import ProbeFactory, report

from rextio_device_cuda import _runner
from rextio_device_cuda.probe import CudaProbeError, SubprocessProbeRunner

SPAWNERS = ["fork_exec", "popen"]


@pytest.fixture(params=SPAWNERS)
def spawner(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs the test with the runner's fork_exec path, then with its Popen path."""
    if request.param == "fork_exec":
        if _runner._FORK_EXEC is None:
            pytest.skip("this interpreter's fork_exec parameters are not known")
    else:
        monkeypatch.setattr(_runner, "_FORK_EXEC", None)
    name: str = request.param
    return name


# Records what the probe was given. The shell reads its own environment and
# ignored-signal mask first (it exports PWD itself, and Python would ignore
# SIGPIPE itself), then execs Python, which lists its descriptors (the
# listing adds one, its own directory descriptor).
_INSPECT = f"""ignored=$(sed -n 's/^SigIgn:[[:space:]]*//p' /proc/$$/status)
environ=$(tr '\\000' ' ' < /proc/$$/environ)
exec {sys.executable} -I -c '
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
def test_the_probe_gets_its_own_session_stdio_and_nothing_else(
    spawner: str, probes: ProbeFactory
) -> None:
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


def test_both_ways_give_the_probe_the_same(
    probes: ProbeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    if _runner._FORK_EXEC is None:
        pytest.skip("this interpreter's fork_exec parameters are not known")
    direct = _inspect(probes)
    monkeypatch.setattr(_runner, "_FORK_EXEC", None)
    through_popen = _inspect(probes)
    for key in ("fds", "stdio", "environ", "ignored"):
        assert direct[key] == through_popen[key], key


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
    spawner: str, data: bytes, facts: str, probes: ProbeFactory
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


def test_a_good_probe_runs_both_ways(spawner: str, probes: ProbeFactory) -> None:
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


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="CPython's fork_exec")
def test_fork_exec_is_used_where_its_parameters_are_known() -> None:
    import _posixsubprocess

    version = (sys.version_info[0], sys.version_info[1])
    if version in {(3, 11), (3, 12), (3, 13)}:
        # Verified: 3.11's subprocess.py passes these; 3.12 and 3.13 state them.
        assert _runner._FORK_EXEC is _posixsubprocess.fork_exec


class _Function:
    def __init__(self, signature: str | None) -> None:
        self.__text_signature__ = signature

    def __call__(self, *arguments: object) -> int:
        raise AssertionError("never called")


def test_fork_exec_with_other_parameters_is_not_used() -> None:
    known = "($module, " + ", ".join(_runner._FORK_EXEC_PARAMETERS) + ", /)"
    function = _Function(known)
    assert _runner.known_fork_exec(function, (3, 14)) is function
    # One parameter more, fewer, renamed or moved: Popen starts the probe.
    parameters = list(_runner._FORK_EXEC_PARAMETERS)
    for changed in (
        [*parameters, "pidfd"],
        parameters[:-1],
        [*parameters[:-1], "use_vfork"],
        [parameters[1], parameters[0], *parameters[2:]],
    ):
        signature = "($module, " + ", ".join(changed) + ", /)"
        assert _runner.known_fork_exec(_Function(signature), (3, 14)) is None, changed
    # No stated signature: only 3.11's is known.
    assert _runner.known_fork_exec(_Function(None), (3, 11)) is not None
    assert _runner.known_fork_exec(_Function(None), (3, 10)) is None
    assert _runner.known_fork_exec(_Function(None), (3, 12)) is None
    assert _runner.known_fork_exec(object(), (3, 11)) is None


def test_an_abandoned_probe_is_reaped_by_a_later_run(probes: ProbeFactory) -> None:
    # A probe that outlived the reap bound is reaped once it exits, when a
    # later run starts (what subprocess does for a dropped Popen).
    pid = os.posix_spawn("/bin/true", ["/bin/true"], {})
    exit_fd = os.pidfd_open(pid)
    try:
        assert select.select([exit_fd], [], [], 30.0)[0]
    finally:
        os.close(exit_fd)
    _runner._ABANDONED.add(pid)
    try:
        SubprocessProbeRunner(probes.printing(report())).run()
        if _runner._FORK_EXEC is None:
            _runner._reap_abandoned()
        assert pid not in _runner._ABANDONED
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    finally:
        _runner._ABANDONED.discard(pid)


def test_the_runner_module_loads_neither_subprocess_nor_signal() -> None:
    # Where fork_exec is used, the runner needs neither module (2.5 ms of
    # every cold start); a fresh interpreter shows what importing it loads.
    child = (
        "import sys; import rextio_device_cuda._runner as r; "
        "print(r._FORK_EXEC is not None, 'subprocess' in sys.modules, 'signal' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", child], capture_output=True, text=True, timeout=60, check=True
    )
    known, has_subprocess, has_signal = done.stdout.split()
    if known == "True":
        assert (has_subprocess, has_signal) == ("False", "False")


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
    probe.write_text(f"#!{sys.executable}\nprint({json.dumps(json.dumps(report()))})\n")
    probe.chmod(0o755)
    assert SubprocessProbeRunner(probe).run().status == "probe-complete"
