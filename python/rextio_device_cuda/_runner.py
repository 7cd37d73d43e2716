"""Running the probe executable: bounded in time, output and side effects.

The probe runs with an empty environment, no PATH lookup, stderr discarded,
in its own process group. Its stdout is read with a deadline (no polling
sleeps); on every failure the whole group is killed and the child reaped with
bounded waits, so a grandchild that keeps stdout open cannot outlive it.
"""

from __future__ import annotations

import math
import os
import select
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Final

from rextio_device_cuda import _codes
from rextio_device_cuda._errors import CudaProbeError
from rextio_device_cuda._provider_spec import PROVIDER_SPEC
from rextio_device_cuda._report import MAX_OUTPUT_BYTES, CudaProbeReport, parse_probe_report

_RUNNER: Final = PROVIDER_SPEC.probe_runner
DEFAULT_TIMEOUT_SECONDS: Final[float] = _RUNNER.default_timeout_seconds
MAX_TIMEOUT_SECONDS: Final[float] = _RUNNER.max_timeout_seconds
MAX_ARGUMENT_CHARS: Final[int] = _RUNNER.max_argument_chars
_WINDOWS_ENVIRONMENT: Final[tuple[str, ...]] = _RUNNER.windows_environment
_IS_WINDOWS: Final[bool] = sys.platform == "win32"
# After SIGKILL a child normally dies at once; this only bounds a stuck reap.
_REAP_SECONDS: Final[float] = 5.0
_READ_CHUNK: Final[int] = 16384


def _child_environment() -> dict[str, str]:
    if not _IS_WINDOWS:
        return {}
    return {name: os.environ[name] for name in _WINDOWS_ENVIRONMENT if name in os.environ}


def _validated_timeout(timeout_seconds: object) -> float:
    if isinstance(timeout_seconds, bool) or not isinstance(timeout_seconds, int | float):
        raise ValueError("timeout_seconds must be a number")
    value = float(timeout_seconds)
    if not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT_SECONDS:
        raise ValueError(f"timeout_seconds must be above 0 and at most {MAX_TIMEOUT_SECONDS:g}")
    return value


def _validated_arguments(arguments: Sequence[str]) -> tuple[str, ...]:
    if type(arguments) is tuple and not arguments:
        return ()  # the provider's case; skips the costly Sequence ABC check
    if isinstance(arguments, str | bytes) or not isinstance(arguments, Sequence):
        raise ValueError("arguments must be a sequence of strings")
    result = tuple(arguments)
    for argument in result:
        if (
            not isinstance(argument, str)
            or not argument
            or len(argument) > MAX_ARGUMENT_CHARS
            or "\0" in argument
        ):
            raise ValueError(
                f"each argument must be a non-empty string of at most {MAX_ARGUMENT_CHARS} "
                "characters without NUL"
            )
    return result


def _poll_milliseconds(remaining: float) -> int:
    # Round up so a wait never returns before the deadline it was given.
    return max(math.ceil(remaining * 1000.0), 0)


class _Child:
    """One spawned probe and the means to end its whole process group."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self._exit_fd: int | None = None
        # Set once the exit descriptor was seen readable: the child has exited.
        self._exited = False
        if hasattr(os, "pidfd_open"):
            try:
                self._exit_fd = os.pidfd_open(process.pid)
            except OSError:
                self._exit_fd = None

    @property
    def exit_fd(self) -> int | None:
        """A descriptor that becomes readable when the child exits (Linux)."""
        return self._exit_fd

    def _kill_group(self) -> None:
        # Only while the child is unreaped: its pid (= group id) cannot be reused.
        if self.process.returncode is not None:
            return
        try:
            if _IS_WINDOWS:
                self.process.kill()
            else:
                os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def wait_exit(self, deadline: float) -> bool:
        """Wait until the child exits or ``deadline``; True when it exited."""
        if self._exited:
            return True
        remaining = deadline - time.monotonic()
        if self._exit_fd is None:
            try:
                self.process.wait(timeout=max(remaining, 0.0))
            except subprocess.TimeoutExpired:
                return False
            return True
        # poll(2) on the pidfd: no selector object or epoll descriptor per wait.
        poller = select.poll()
        poller.register(self._exit_fd, select.POLLIN)
        while True:
            if poller.poll(_poll_milliseconds(remaining)):
                self._exited = True
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False

    def finish(self) -> int | None:
        """Kill the group (grandchildren too), reap with a bound, release fds."""
        self._kill_group()
        exited = self.wait_exit(time.monotonic() + _REAP_SECONDS)
        returncode: int | None = None
        if exited and self._exit_fd is not None:
            # The pidfd reported the exit: the zombie is there, waitpid returns at once.
            returncode = self.process.wait()
        elif exited:
            try:
                returncode = self.process.wait(timeout=_REAP_SECONDS)
            except subprocess.TimeoutExpired:
                returncode = None
        if self.process.stdout is not None:
            self.process.stdout.close()
        if self._exit_fd is not None:
            os.close(self._exit_fd)
            self._exit_fd = None
        return returncode


class SubprocessProbeRunner:
    """Runs an explicitly configured probe executable and parses its report."""

    def __init__(
        self,
        executable: Path | str,
        *,
        arguments: Sequence[str] = (),
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        if not isinstance(executable, Path | str):
            raise TypeError("executable must be a pathlib.Path or str")
        # Kept as a str: the os.path functions used per run are several times
        # cheaper than the pathlib methods that wrap them. Absoluteness is
        # lexical, so pathlib's stricter rule (drive and root on Windows) is
        # decided once here.
        self._executable = os.fspath(executable)
        self._is_absolute = Path(executable).is_absolute()
        self._arguments = _validated_arguments(arguments)
        self._timeout = _validated_timeout(timeout_seconds)

    @property
    def timeout_seconds(self) -> float:
        """The wall-clock limit for one run."""
        return self._timeout

    def _resolve(self) -> str:
        if not self._is_absolute:
            raise CudaProbeError(_codes.PROBE_PATH_NOT_ABSOLUTE)
        try:
            # What Path.resolve(strict=True) does, minus the Path objects.
            resolved = os.path.realpath(self._executable, strict=True)
            status = os.stat(resolved)
        except (OSError, ValueError) as error:  # ValueError: an embedded NUL
            raise CudaProbeError(_codes.PROBE_NOT_FOUND) from error
        if not stat.S_ISREG(status.st_mode):
            raise CudaProbeError(_codes.PROBE_NOT_EXECUTABLE)
        if not _IS_WINDOWS and not os.access(resolved, os.X_OK):
            raise CudaProbeError(_codes.PROBE_NOT_EXECUTABLE)
        return resolved

    def _spawn(self, executable: str) -> _Child:
        try:
            process = subprocess.Popen(
                [executable, *self._arguments],
                executable=executable,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=_child_environment(),
                close_fds=True,
                shell=False,
                start_new_session=not _IS_WINDOWS,
            )
        except (OSError, ValueError) as error:
            raise CudaProbeError(_codes.PROBE_EXECUTION_FAILED) from error
        return _Child(process)

    def read_output(self) -> bytes:
        """Run the probe and return its stdout, or raise with a runner code."""
        return self._read_output(None, None)

    def _read_output(
        self,
        while_running: Callable[[], None] | None,
        on_pause: Callable[[bytes], None] | None,
    ) -> bytes:
        executable = self._resolve()
        deadline = time.monotonic() + self._timeout
        child = self._spawn(executable)
        try:
            if while_running is not None:
                # Caller's work that does not need the report, done while the
                # probe runs instead of before it; if it raises, the group is
                # killed like on any other failure.
                while_running()
            output = self._collect(child, deadline, on_pause)
            if not child.wait_exit(deadline):
                raise CudaProbeError(_codes.PROBE_TIMEOUT)
        except BaseException:
            child.finish()
            raise
        returncode = child.finish()
        if returncode != 0:
            raise CudaProbeError(_codes.PROBE_EXIT_NONZERO)
        return output

    def run(self) -> CudaProbeReport:
        """Run the probe and parse its report."""
        early = _EarlyParse()
        return early.result(self._read_output(None, early))

    def run_overlapping(self, while_running: Callable[[], None]) -> CudaProbeReport:
        """``run()``, calling ``while_running`` once the probe has started."""
        early = _EarlyParse()
        return early.result(self._read_output(while_running, early))

    @staticmethod
    def _collect(
        child: _Child, deadline: float, on_pause: Callable[[bytes], None] | None = None
    ) -> bytes:
        stdout = child.process.stdout
        if stdout is None:
            raise CudaProbeError(_codes.PROBE_EXECUTION_FAILED)
        if _IS_WINDOWS:
            return _collect_with_thread(stdout, deadline)
        descriptor = stdout.fileno()
        chunks: list[bytes] = []
        size = 0
        # poll(2), not a selector: no epoll descriptor to create and close per run.
        poller = select.poll()
        try:
            poller.register(descriptor, select.POLLIN)
        except (OSError, ValueError) as error:
            raise CudaProbeError(_codes.PROBE_EXECUTION_FAILED) from error
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not poller.poll(_poll_milliseconds(remaining)):
                raise CudaProbeError(_codes.PROBE_TIMEOUT)
            try:
                chunk = os.read(descriptor, min(_READ_CHUNK, MAX_OUTPUT_BYTES + 1 - size))
            except OSError as error:
                raise CudaProbeError(_codes.PROBE_EXECUTION_FAILED) from error
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_OUTPUT_BYTES:
                raise CudaProbeError(_codes.PROBE_OUTPUT_TOO_LARGE)
            if on_pause is not None and not poller.poll(0):
                # Nothing more yet and no EOF: typically the probe wrote its
                # report and is exiting. Hand over what was read (once).
                on_pause(b"".join(chunks))
                on_pause = None


class _EarlyParse:
    """Parses the output read so far when the probe pauses, so the parse
    overlaps the probe's exit instead of following it.

    Parsing is a pure function of the bytes, and output only grows: the early
    result is used only when no byte followed, else the whole output is parsed
    anew. An early failure is raised only then too, after every runner check.
    """

    def __init__(self) -> None:
        self._parsed_size = -1
        self._report: CudaProbeReport | None = None
        self._error: Exception | None = None

    def __call__(self, output: bytes) -> None:
        self._parsed_size = len(output)
        try:
            self._report = parse_probe_report(output)
        except Exception as error:  # kept for result(); raised only if it applies
            self._error = error

    def result(self, output: bytes) -> CudaProbeReport:
        """The report of ``output`` (the complete stdout of a successful run)."""
        if len(output) != self._parsed_size:
            return parse_probe_report(output)
        if self._error is not None:
            raise self._error
        if self._report is None:  # pragma: no cover - set whenever no error was
            return parse_probe_report(output)
        return self._report


def _collect_with_thread(stdout: IO[bytes], deadline: float) -> bytes:  # pragma: no cover
    """Windows pipes cannot be selected; a reader thread gives the same bounds."""
    chunks: list[bytes] = []
    failure: list[BaseException] = []

    def read() -> None:
        size = 0
        try:
            while size <= MAX_OUTPUT_BYTES:
                chunk = os.read(stdout.fileno(), min(_READ_CHUNK, MAX_OUTPUT_BYTES + 1 - size))
                if not chunk:
                    return
                chunks.append(chunk)
                size += len(chunk)
        except (OSError, ValueError) as error:
            failure.append(error)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(max(deadline - time.monotonic(), 0.0))
    if reader.is_alive():
        raise CudaProbeError(_codes.PROBE_TIMEOUT)
    if failure:
        raise CudaProbeError(_codes.PROBE_EXECUTION_FAILED) from failure[0]
    output = b"".join(chunks)
    if len(output) > MAX_OUTPUT_BYTES:
        raise CudaProbeError(_codes.PROBE_OUTPUT_TOO_LARGE)
    return output
