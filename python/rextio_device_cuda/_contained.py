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

    @property
    def pid(self) -> int:
        """The supervisor's process id."""
        return self._process.pid

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

    def idle(self) -> list[_Supervisor]:
        """The idle supervisors this process started."""
        with self._lock:
            return [each for each in self._idle if each.owner_pid == os.getpid()]

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

    The request is sent without waiting for an answer, so reading the
    probe's output starts at once. The supervisor's answers say how the run
    stands: over (``returncode``: the probe exited and nothing of it is
    left), the probe exited but descendants remain (``exited``), or the spawn
    failed.
    """

    def __init__(self, supervisor: _Supervisor, stdout: int) -> None:
        self._supervisor: _Supervisor | None = supervisor
        self.stdout = os.fdopen(stdout, "rb", buffering=0)
        self.spawn_failed = False
        self._exited = False
        self._returncode: int | None = None
        self._over = False
        self.group_exited = False

    def _take_answer(self, deadline: float) -> None:
        supervisor = self._supervisor
        if supervisor is None:
            return
        try:
            answer = supervisor.receive(deadline)
        except (OSError, SupervisorError, ValueError):
            self._drop_supervisor()
            return
        returncode = answer.get("returncode")
        if answer.get("spawned") is False:
            self.spawn_failed = self._exited = self._over = True
        elif answer.get("exited") is True:
            self._exited = True
        elif isinstance(returncode, int):
            self._returncode = returncode
            self._exited = self._over = True
        else:
            self._drop_supervisor()

    def wait_exit(self, deadline: float) -> bool:
        """Wait until the probe exits (or its spawn failed), or ``deadline``."""
        while not self._exited:
            supervisor = self._supervisor
            if supervisor is None or not _wait_readable(supervisor.channel.fileno(), deadline):
                return False
            self._take_answer(deadline)
        return True

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
        if not self._over and self._supervisor is not None:
            deadline = time.monotonic() + _REPLY_SECONDS
            try:
                self._supervisor.channel.send(b"end")
            except OSError:
                self._drop_supervisor()
            while not self._over and self._supervisor is not None:
                if not _wait_readable(self._supervisor.channel.fileno(), deadline):
                    self._drop_supervisor()
                    break
                self._take_answer(deadline)
        self.stdout.close()
        self.group_exited = self._over and self._supervisor is not None
        if self._supervisor is not None:
            if self._over:
                _POOL.give_back(self._supervisor)
            else:
                self._drop_supervisor()
            self._supervisor = None
        return None if self.spawn_failed else self._returncode


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
