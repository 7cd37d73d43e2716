"""The probe supervisor: a child subreaper that leaves no process of a run behind.

Run by the provider as ``python -I -S _subreaper.py FD`` (standard library
only: ``-S`` keeps site-packages, and so this package, out of its path), with
FD one end of a SOCK_SEQPACKET socket pair. It makes itself a child subreaper
(``PR_SET_CHILD_SUBREAPER``): every descendant of a probe it starts, one that
left the probe's process group or session included (``setsid``, a double
fork), is re-parented to it, not to init, once its own parent exits. So after
each run it can kill the probe's group, then every remaining descendant, and
answer only when it has no child left at all.

Protocol, one message per packet (JSON, UTF-8):
- it first says ``{"subreaper": true}`` (or false, then exits);
- a run request ``{"argv": [...], "env": {...}, "program_fd": bool}`` carries
  the write end of the probe's stdout and, when ``program_fd``, the open
  program to execute through ``/proc/self/fd/N``; ``{"spawned": false}``
  answers a spawn that failed;
- when the probe exits and nothing else of the run remains, it reaps the
  probe and answers ``{"returncode": N}``: the run is over;
- when the probe exits and descendants remain, it answers
  ``{"exited": true}`` and waits for the host;
- a packet from the host ends the run (any time after the request): it kills
  the probe's group (the probe is still unreaped, so the group id is still
  its own), reaps the probe, kills and reaps every remaining descendant, and
  answers ``{"returncode": N}`` when nothing of the run is left;
- end of file on the socket ends the run the same way, then the supervisor.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import socket
import sys

PR_SET_CHILD_SUBREAPER = 36
MAX_REQUEST_BYTES = 1 << 20
MAX_FDS = 2
# Opened once (close-on-exec); each probe gets it as stdin and stderr.
_DEVNULL = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)


def _become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _send(channel: socket.socket, message: dict[str, object]) -> None:
    channel.send(json.dumps(message).encode())


def _descendants() -> list[int]:
    """Every process whose chain of parents reaches this one, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as file:
                fields = file.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    pending = [os.getpid()]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def sweep() -> None:
    """Kill and reap every descendant; returns once no child is left.

    A killed process cannot fork, and whatever it leaves behind is re-parented
    here: each reaped child is followed by a fresh look, so a process forked
    between a look and a kill is found by the next look.
    """
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # no child: no descendant can remain
        if pid:
            continue
        for victim in _descendants():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(victim, signal.SIGKILL)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _spawn(argv: list[str], env: dict[str, str], stdout: int, program_fd: int | None) -> int:
    """posix_spawn the probe in a new session: stdin and stderr /dev/null."""
    program = argv[0] if program_fd is None else f"/proc/self/fd/{program_fd}"
    if program_fd is not None:
        # Only while spawning (this process is single-threaded): a script's
        # interpreter reads the program through the same descriptor.
        os.set_inheritable(program_fd, True)
    try:
        return os.posix_spawn(
            program,
            argv,
            env,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, _DEVNULL, 0),
                (os.POSIX_SPAWN_DUP2, stdout, 1),
                (os.POSIX_SPAWN_DUP2, _DEVNULL, 2),
            ],
            setsid=True,
        )
    finally:
        if program_fd is not None:
            os.set_inheritable(program_fd, False)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _children() -> set[int]:
    """This process's children, zombies included (it is single-threaded)."""
    try:
        with open(f"/proc/self/task/{os.getpid()}/children", "rb") as file:
            return {int(pid) for pid in file.read().split()}
    except OSError:  # a kernel without the file: every descendant is a child here
        return {pid for pid in _descendants() if _parent_of(pid) == os.getpid()}


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            return int(file.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _run(channel: socket.socket, request: dict[str, object], fds: list[int]) -> bool:
    """One probe run; False when the host went away."""
    argv, env = request["argv"], request["env"]
    if not isinstance(argv, list) or not isinstance(env, dict):
        raise ValueError("malformed run request")
    stdout, *passed = fds
    program_fd = passed[0] if request.get("program_fd") and passed else None
    try:
        pid = _spawn(argv, env, stdout, program_fd)
    except (OSError, ValueError):
        _send(channel, {"spawned": False})
        return True
    finally:
        for fd in fds:
            os.close(fd)
    exit_fd = os.pidfd_open(pid)
    poller = select.poll()
    poller.register(exit_fd, select.POLLIN)
    poller.register(channel.fileno(), select.POLLIN)
    try:
        ready = {fd for fd, _ in poller.poll()}
    finally:
        os.close(exit_fd)
    if channel.fileno() not in ready and _children() == {pid}:
        # The probe exited and left nothing behind: the run is over.
        _, status = os.waitpid(pid, 0)
        _send(channel, {"returncode": os.waitstatus_to_exitcode(status)})
        return True
    if channel.fileno() not in ready:
        # Something of the run outlives the probe (it may hold stdout open):
        # the host decides when the run ends. The probe stays unreaped, so
        # its group id cannot be reused meanwhile.
        _send(channel, {"exited": True})
    host_present = bool(channel.recv(MAX_REQUEST_BYTES))
    _kill_group(pid)
    _, status = os.waitpid(pid, 0)
    sweep()
    if host_present:
        _send(channel, {"returncode": os.waitstatus_to_exitcode(status)})
    return host_present


def main(arguments: list[str]) -> int:
    """Serve run requests on the inherited socket until the host closes it."""
    channel = socket.socket(fileno=int(arguments[1]))
    channel.set_inheritable(False)  # no probe may hold the supervisor's socket
    if not _become_subreaper():
        _send(channel, {"subreaper": False})
        return 1
    _send(channel, {"subreaper": True})
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(channel, MAX_REQUEST_BYTES, MAX_FDS)
        except OSError:
            return 1
        if not message:
            return 0
        for fd in fds:
            # Received descriptors are inheritable: no probe descendant may
            # hold the stdout pipe except through its own fd 1.
            os.set_inheritable(fd, False)
        if not fds:
            continue  # an end that crossed the run's own end: nothing runs
        if not _run(channel, json.loads(message), list(fds)):
            sweep()
            return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
