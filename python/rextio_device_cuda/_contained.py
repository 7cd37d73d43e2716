"""Probe runs inside a subreaper supervisor: nothing of a run outlives it.

A supervisor (``_subreaper.py``, a small standard-library program started
once with this interpreter and then reused) spawns each probe and, being a
child subreaper, inherits every descendant that leaves the probe's process
group or session. A run ends only when the supervisor reports that it has no
child left, so a ``setsid`` or double-forked descendant is killed and reaped
before the runner returns. Supervisors are pooled, one per concurrent run.

Where this cannot work (not Linux, no ``socket.send_fds``, or the supervisor
cannot start or become a subreaper) ``start_supervised`` returns None and the
runner spawns the probe itself: then only the probe's process group is
contained.
"""

from __future__ import annotations

import json
import math
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Final

_SCRIPT: Final[str] = str(Path(__file__).resolve().with_name("_subreaper.py"))
# Bounds on the supervisor itself (start, spawn reply); a probe's own time is
# bounded by the runner's deadline.
_START_SECONDS: Final[float] = 10.0
_REPLY_SECONDS: Final[float] = 5.0
_MAX_REPLY_BYTES: Final[int] = 4096
_SUPPORTED: Final[bool] = sys.platform == "linux" and hasattr(socket, "send_fds")


class SupervisorError(Exception):
    """The supervisor did not answer as the protocol says."""


def _wait_readable(fd: int, deadline: float) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    remaining = deadline - time.monotonic()
    return bool(poller.poll(max(math.ceil(remaining * 1000.0), 0)))


class _Supervisor:
    """One running supervisor process and the host's end of its socket."""

    def __init__(self) -> None:
        host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-I", "-S", _SCRIPT, str(child.fileno())],
                pass_fds=(child.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={},
                close_fds=True,
                # Its own session: a terminal's Ctrl-C to the host's group
                # must not end the supervisor in the middle of a sweep.
                start_new_session=True,
            )
        except BaseException:
            host.close()
            raise
        finally:
            child.close()
        self.channel = host
        self.owner_pid = os.getpid()
        try:
            if self.receive(time.monotonic() + _START_SECONDS) != {"subreaper": True}:
                raise SupervisorError("the supervisor cannot become a subreaper")
        except BaseException:
            self.discard()
            raise

    def receive(self, deadline: float) -> dict[str, object]:
        """The next message, or SupervisorError at ``deadline`` or end of file."""
        if not _wait_readable(self.channel.fileno(), deadline):
            raise SupervisorError("the supervisor did not answer in time")
        message = self.channel.recv(_MAX_REPLY_BYTES)
        if not message:
            raise SupervisorError("the supervisor closed its socket")
        value = json.loads(message)
        if not isinstance(value, dict):
            raise SupervisorError("the supervisor sent a malformed message")
        return value

    def discard(self) -> None:
        """End the supervisor (it sweeps what it still runs on end of file)."""
        self.channel.close()
        try:
            self._process.wait(timeout=_REPLY_SECONDS)
        except subprocess.TimeoutExpired:
            self._process.send_signal(signal.SIGKILL)
            self._process.wait()


class _Pool:
    """Idle supervisors; a process forked from the host starts its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Supervisor] = []
        self.unavailable = not _SUPPORTED

    def take(self) -> _Supervisor | None:
        with self._lock:
            while self._idle:
                supervisor = self._idle.pop()
                if supervisor.owner_pid == os.getpid():
                    return supervisor
            if self.unavailable:
                return None
        try:
            return _Supervisor()
        except (OSError, SupervisorError, ValueError):
            with self._lock:
                self.unavailable = True
            return None

    def give_back(self, supervisor: _Supervisor) -> None:
        with self._lock:
            self._idle.append(supervisor)

    def forget_inherited(self) -> None:
        # After fork the child shares the parent's sockets: never use them.
        self._lock = threading.Lock()
        self._idle = []


_POOL: Final = _Pool()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_POOL.forget_inherited)


class SupervisedChild:
    """One probe run by a supervisor: its stdout, its exit, its end.

    The request is sent without waiting for the spawn's answer, so reading
    the probe's output starts at once. The probe's pid is taken when its exit
    is first awaited, and watched through a pidfd: the supervisor reaps it
    only when ``finish`` ends the run.
    """

    def __init__(self, supervisor: _Supervisor, stdout: int) -> None:
        self._supervisor: _Supervisor | None = supervisor
        self.stdout = os.fdopen(stdout, "rb", buffering=0)
        self.spawn_failed = False
        self._exit_fd: int | None = None
        self._exited = False
        self._answered_pid = False
        self.group_exited = False

    def _await_pid(self, deadline: float) -> bool:
        """Take the spawn's answer; False when the supervisor failed."""
        if self._answered_pid:
            return True
        supervisor = self._supervisor
        if supervisor is None:
            return False
        try:
            pid = supervisor.receive(deadline).get("pid")
            if pid is None:
                self.spawn_failed = True
            elif isinstance(pid, int):
                self._exit_fd = os.pidfd_open(pid)
            else:
                raise SupervisorError("the supervisor sent no pid")
        except (OSError, SupervisorError, ValueError):
            self._drop_supervisor()
            return False
        self._answered_pid = True
        return True

    def wait_exit(self, deadline: float) -> bool:
        """Wait until the probe exits (or its spawn failed), or ``deadline``."""
        if self._exited:
            return True
        if not self._await_pid(deadline):
            return False
        if self._exit_fd is None:  # the spawn failed: nothing runs
            self._exited = True
            return True
        self._exited = _wait_readable(self._exit_fd, deadline)
        return self._exited

    def _drop_supervisor(self) -> None:
        if self._supervisor is not None:
            self._supervisor.discard()
            self._supervisor = None

    def finish(self) -> int | None:
        """End the run: kill all of it, return the probe's exit status.

        ``group_exited`` then says whether the supervisor confirmed that
        nothing of the run remains; None is returned when it did not within
        the bound, or when the spawn failed (``spawn_failed``).
        """
        deadline = time.monotonic() + _REPLY_SECONDS
        returncode: int | None = None
        supervisor = self._supervisor
        if self._await_pid(deadline) and not self.spawn_failed and supervisor is not None:
            try:
                supervisor.channel.send(b"end")
                answer = supervisor.receive(deadline).get("returncode")
                if not isinstance(answer, int):
                    raise SupervisorError("the supervisor sent no exit status")
                returncode = answer
            except (OSError, SupervisorError, ValueError):
                self._drop_supervisor()
        if self._exit_fd is not None:
            os.close(self._exit_fd)
            self._exit_fd = None
        self.stdout.close()
        self.group_exited = self._supervisor is not None
        if self._supervisor is not None:
            _POOL.give_back(self._supervisor)
            self._supervisor = None
        return returncode


def start_supervised(
    argv: list[str], env: dict[str, str], program_fd: int | None
) -> SupervisedChild | None:
    """Send one probe run to a supervisor; None where supervisors are unavailable.

    Raises OSError when no supervisor took the request.
    """
    request = json.dumps({"argv": argv, "env": env, "program_fd": program_fd is not None})
    # A pooled supervisor may have been ended from outside since its last
    # run; one fresh supervisor is tried after it.
    for _attempt in range(2):
        supervisor = _POOL.take()
        if supervisor is None:
            return None
        read_end, write_end = os.pipe()
        fds = [write_end] if program_fd is None else [write_end, program_fd]
        try:
            socket.send_fds(supervisor.channel, [request.encode()], fds)
        except OSError:
            os.close(read_end)
            supervisor.discard()
            continue
        finally:
            os.close(write_end)
        return SupervisedChild(supervisor, read_end)
    raise OSError("the probe supervisor failed")
