"""Running the probe executable: bounded in time, output and side effects.

The probe is started by ``subprocess.Popen``: no PATH lookup, an empty
environment (Windows: only ``SYSTEMROOT`` and ``WINDIR``), stdin and stderr
``/dev/null``, no descriptor inherited but its stdout pipe (and, when
pinned, its own sealed image), in a session and process group of its own.
Its stdout is read with a deadline and at most ``MAX_OUTPUT_BYTES + 1``
bytes. On a timeout the probe is first asked to end (SIGTERM): the reviewed
probe then stops its driver worker and sweeps every descendant, ``setsid``
children included, within ``SWEEP_SECONDS``, which the runner waits out.
When a run ends, on success and on every failure alike, the probe's
group is sent SIGKILL while the probe is still unreaped, then every process
of its session (a descendant that moved to another group stays in the
session) until none is left, and only then is the probe reaped: its exit
status is read, or the run fails closed. A run therefore ends at the latest
``SWEEP_SECONDS + REAP_SECONDS`` after its timeout; the host starts no helper
process and keeps none.

Signal handlers are held back while a run starts and ends the probe
(``_interrupts``): Ctrl-C at any moment leaves no probe running, no child
unreaped and no descriptor open.

Not contained here: a descendant that left the probe's session
(``setsid``). The reviewed probe contains its own descendants (it is a child
subreaper and kills and reaps them before it prints its record); what an
unreviewed probe does outside its session is outside the trust boundary (a
same-UID process), and the pin is what makes a probe the reviewed one.
Windows: only the probe process itself is killed.

Pinned runs (``probe_sha256``): see ``_sealed``: the sealed copy that was
hashed is what is executed, through ``/proc/self/fd/N``; hashing counts
against the timeout. Off Linux a pinned run is refused after the digest check.
Inside ``sealed_copies(paths)`` each of those probes is read once: every
pinned run of one of them in that block executes the one sealed copy made
on entry, and the file is not read again (``validate``'s records all come
from the same bytes).
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Final, TypeVar

from rextio_device_cuda import _codes, _pinned_loader, _sealed
from rextio_device_cuda._errors import CudaProbeError, os_error_text
from rextio_device_cuda._interrupts import HeldSignals
from rextio_device_cuda._provider_spec import PROVIDER_SPEC
from rextio_device_cuda._report import MAX_OUTPUT_BYTES, CudaProbeReport, parse_probe_report
from rextio_device_cuda.config import is_probe_sha256

_RUNNER: Final = PROVIDER_SPEC.probe_runner
DEFAULT_TIMEOUT_SECONDS: Final[float] = _RUNNER.default_timeout_seconds
MAX_TIMEOUT_SECONDS: Final[float] = _RUNNER.max_timeout_seconds
MAX_ARGUMENT_CHARS: Final[int] = _RUNNER.max_argument_chars
_WINDOWS_ENVIRONMENT: Final[tuple[str, ...]] = _RUNNER.windows_environment
_IS_WINDOWS: Final[bool] = sys.platform == "win32"
# After SIGKILL a session normally dies at once; this only bounds a stuck
# reap (a process in uninterruptible sleep), so a run ends by timeout + this.
REAP_SECONDS: Final[float] = 5.0
# The reviewed probe's bound on its own sweep once asked to end (SIGTERM).
SWEEP_SECONDS: Final[float] = float(_RUNNER.sweep_seconds)
_READ_CHUNK: Final[int] = 16384
# Where pidfds are missing (Linux before 5.3), how long to sleep between two
# looks at a process that is expected to be dying.
_RECHECK_SECONDS: Final[float] = 0.002
_Result = TypeVar("_Result")
# The sealed copies of ``sealed_copies``' block, by the probe path as given.
_SEALED_COPIES: ContextVar[Mapping[str, _sealed.SealedProbe]] = ContextVar(
    "rextio_device_cuda_sealed_copies", default=MappingProxyType({})
)


def _blocking(held: HeldSignals | None, call: Callable[[], _Result]) -> _Result:
    """``call`` (a wait) with signal handlers running as usual during it, when
    the run holds them back (``held``); None: they stay held back."""
    return call() if held is None else held.wait(call)


def _validated_sha256(value: object) -> str | None:
    if value is None:
        return None
    if not is_probe_sha256(value):
        raise ValueError("probe_sha256 must be exactly 64 lowercase hexadecimal digits")
    return str(value)


def probe_file_sha256(path: str) -> str:
    """The SHA-256 of the probe at ``path`` as a pinned run would compute it.

    Raises ``CudaProbeError`` with the runner's path codes and the pin's own
    refusals (``PROBE_TOO_LARGE``, ``PROBE_PIN_SCRIPT_UNSUPPORTED``,
    ``PROBE_PIN_LOADER_UNTRUSTED``), so a digest is only ever printed for a
    probe that a pinned run can execute.
    """
    try:
        resolved = os.path.realpath(path, strict=True)
    except (OSError, ValueError) as error:
        raise CudaProbeError(
            _codes.PROBE_NOT_FOUND, facts=_not_found_facts(path, error)
        ) from error
    with HeldSignals():
        sealed = _sealed.seal(resolved)
        try:
            if sealed.descriptor is not None:
                _pinned_loader.check_loader(sealed.descriptor)
        finally:
            sealed.close()
    return sealed.digest


def _not_found_facts(path: str, error: Exception) -> str:
    if isinstance(error, UnicodeEncodeError):
        return (
            "the configured probe path holds a character the file system encoding cannot "
            "represent (a lone surrogate)"
        )
    if not isinstance(error, OSError) and "\0" in path:
        return "the configured probe path holds a NUL character"
    if not isinstance(error, OSError):
        return "the configured probe path cannot be passed to the operating system"
    return f"resolving the configured probe path failed with {os_error_text(error)}"


def _seconds(value: float) -> str:
    return f"{value:g} s"


def _exit_facts(returncode: int) -> str:
    """``the probe exited with status 3`` or ``the probe was ended by signal 9 (SIGKILL)``."""
    if returncode >= 0:
        return f"the probe exited with status {returncode}"
    try:
        name = f" ({signal.Signals(-returncode).name})"
    except ValueError:
        name = ""
    return f"the probe was ended by signal {-returncode}{name}"


def _digest_facts(found: str, pinned: str) -> str:
    # Both in full: a digest is no secret, and prefixes can be identical.
    return f"the file's SHA-256 is {found}; the pin is {pinned}"


def _status_lost_facts() -> str:
    if not _IS_WINDOWS and signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN:
        return (
            "the probe's exit status could not be read: this process ignores SIGCHLD, "
            "so the kernel reaped the probe before its status was read"
        )
    return (
        "the probe's exit status could not be read: something else in this process "
        "reaped it first"
    )


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


def _pidfd(pid: int) -> int | None:
    """A pidfd for ``pid``, or None where the kernel has none (or it is gone)."""
    if not hasattr(os, "pidfd_open"):
        return None
    try:
        return os.pidfd_open(pid)
    except OSError:
        return None


def _session_and_state(pid: int) -> tuple[int, str] | None:
    """(session id, state letter) of ``pid`` from /proc, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            fields = file.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # After the command name: state, ppid, pgrp, session, ...
    if len(fields) < 4:
        return None
    return int(fields[3]), fields[0].decode("ascii", "replace")


def _has_live_thread(pid: int) -> bool:
    """Whether a thread of ``pid``'s thread group (``/proc/PID/task``) has not exited."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/stat", "rb") as file:
                state = file.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X", b"x"):
            return True
    return False


def _live_session_members(session: int) -> list[int]:
    """Every process of ``session`` that has not exited: not a zombie, or a
    zombie leader whose other threads still run (SIGKILL to its pid ends them)."""
    members: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return members
    for entry in entries:
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            if os.getsid(pid) != session:
                continue
        except OSError:
            continue
        found = _session_and_state(pid)
        if found is None or found[0] != session:
            continue
        if found[1] != "Z" or _has_live_thread(pid):
            members.append(pid)
    return members


def _kill_member(pid: int, session: int) -> int | None:
    """SIGKILL ``pid`` if it is (still) in ``session``; its pidfd when there is one."""
    descriptor = _pidfd(pid)
    try:
        # The pidfd names whatever process holds ``pid`` now: checked after it was taken.
        if os.getsid(pid) != session:
            _closed(descriptor)
            return None
        if descriptor is not None:
            signal.pidfd_send_signal(descriptor, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except OSError:
        _closed(descriptor)
        return None
    return descriptor


def _closed(descriptor: int | None) -> None:
    if descriptor is not None:
        os.close(descriptor)


def _kill_session(session: int, deadline: float) -> bool:
    """SIGKILL every process of ``session`` until none is left; False at ``deadline``.

    Called while the session's leader (the probe) is unreaped, so the session
    id cannot have been reused. A process with a pending SIGKILL cannot fork;
    each round ends the members a round before left behind. Every round
    signals what it found, even past the deadline.
    """
    while True:
        members = _live_session_members(session)
        if not members:
            return True
        descriptors: list[int] = []
        try:
            for pid in members:
                descriptor = _kill_member(pid, session)
                if descriptor is not None:
                    descriptors.append(descriptor)
            if time.monotonic() >= deadline or not _all_exit(descriptors, deadline):
                return False
        finally:
            for descriptor in descriptors:
                os.close(descriptor)
        if len(descriptors) < len(members):
            time.sleep(_RECHECK_SECONDS)  # a member without a pidfd: look again shortly


def _all_exit(descriptors: list[int], deadline: float) -> bool:
    """Wait until every pidfd reports its process exited, or ``deadline``."""
    poller = select.poll()
    pending = set(descriptors)
    for descriptor in pending:
        poller.register(descriptor, select.POLLIN)
    while pending:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        for descriptor, _ in poller.poll(_poll_milliseconds(remaining)):
            poller.unregister(descriptor)
            pending.discard(descriptor)
    return True


class _ProbeProcess:
    """One started probe and the means to end its session and read its status."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        if process.stdout is None:  # pragma: no cover - stdout=PIPE always makes one
            raise RuntimeError("the probe was started without its output")
        self.process = process
        self.pid = process.pid
        self.stdout = process.stdout
        self.stdout_fd = process.stdout.fileno()
        self.exit_fd = None if _IS_WINDOWS else _pidfd(process.pid)
        self.exited = False
        # Set by end(): the exit status (None: not reaped within the bound),
        # whether it was lost to another reaper, whether the session is empty.
        self.returncode: int | None = None
        self.status_lost = False
        self.session_ended = False

    def wait_exit(self, deadline: float, held: HeldSignals | None) -> bool:
        """Wait until the probe exits (without reaping it) or ``deadline``."""
        while not self.exited:
            remaining = max(deadline - time.monotonic(), 0.0)
            if self.exit_fd is not None:
                poller = select.poll()
                poller.register(self.exit_fd, select.POLLIN)
                ready = _blocking(held, partial(poller.poll, _poll_milliseconds(remaining)))
                self.exited = bool(ready)
            elif _IS_WINDOWS:  # pragma: no cover
                self.exited = _blocking(held, partial(self._windows_wait, remaining))
            else:
                self.exited = self._exited_unreaped()
                if not self.exited and remaining > 0:
                    _blocking(held, partial(time.sleep, min(_RECHECK_SECONDS, remaining)))
            if remaining <= 0:
                break
        return self.exited

    def _windows_wait(self, timeout: float) -> bool:  # pragma: no cover
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def _exited_unreaped(self) -> bool:
        # Without a pidfd: waitid with WNOWAIT sees the exit and leaves the zombie.
        try:
            found = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True  # reaped by the kernel or someone else: end() says so
        return found is not None

    def ask_to_end(self) -> None:
        """SIGTERM the (unreaped) probe and wait until it exits, at most ``SWEEP_SECONDS``.

        The reviewed probe stops its worker and sweeps what the driver
        started, which a SIGKILL of the session would leave running where
        it left the session. Runs with signal handlers held back.
        """
        if _IS_WINDOWS:  # pragma: no cover - no sweep there; end() kills the probe
            return
        try:
            if self.exit_fd is not None:
                signal.pidfd_send_signal(self.exit_fd, signal.SIGTERM)
            else:
                os.kill(self.pid, signal.SIGTERM)
        except OSError:
            return  # exited already: end() reaps it
        self.wait_exit(time.monotonic() + SWEEP_SECONDS, None)

    def end(self) -> None:
        """Kill the session, reap the probe, close every descriptor.

        Runs with signal handlers held back. Sets ``returncode``,
        ``status_lost`` and ``session_ended``.
        """
        deadline = time.monotonic() + REAP_SECONDS
        try:
            if _IS_WINDOWS:
                self._end_on_windows(deadline)
                return
            # The probe is unreaped: its pid is still its group's and session's id.
            with contextlib.suppress(OSError):
                os.killpg(self.pid, signal.SIGKILL)
            self.session_ended = _kill_session(self.pid, deadline)
            if self.wait_exit(deadline, None):
                self._reap()
            # Else stuck (uninterruptible sleep): Popen reaps it once it exits.
        finally:
            self.stdout.close()
            _closed(self.exit_fd)
            self.exit_fd = None

    def _reap(self) -> None:
        try:
            _, status = os.waitpid(self.pid, 0)  # the probe has exited: at once
        except ChildProcessError:
            self.status_lost = True
            # Unknown; set so that Popen never waits on a pid that may be reused.
            self.process.returncode = -signal.SIGKILL
            return
        self.returncode = os.waitstatus_to_exitcode(status)
        self.process.returncode = self.returncode

    def _end_on_windows(self, deadline: float) -> None:  # pragma: no cover
        with contextlib.suppress(OSError):
            self.process.kill()
        try:
            self.returncode = self.process.wait(max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            return
        self.session_ended = True


class SubprocessProbeRunner:
    """Runs an explicitly configured probe executable and parses its report."""

    def __init__(
        self,
        executable: Path | str,
        *,
        arguments: Sequence[str] = (),
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        probe_sha256: str | None = None,
    ) -> None:
        if not isinstance(executable, Path | str):
            raise TypeError("executable must be a pathlib.Path or str")
        self._executable = Path(executable)
        self._arguments = _validated_arguments(arguments)
        self._timeout = _validated_timeout(timeout_seconds)
        self._sha256 = _validated_sha256(probe_sha256)

    @property
    def timeout_seconds(self) -> float:
        """The wall-clock limit for one run."""
        return self._timeout

    @property
    def probe_sha256(self) -> str | None:
        """The pinned SHA-256 of the probe, or None when unpinned."""
        return self._sha256

    def run(self) -> CudaProbeReport:
        """Run the probe and parse its report."""
        return parse_probe_report(self.read_output())

    def read_output(self) -> bytes:
        """Run the probe and return its stdout, or raise with a runner code."""
        output, returncode = self.read_output_and_status()
        if returncode != 0:
            raise CudaProbeError(_codes.PROBE_EXIT_NONZERO, facts=_exit_facts(returncode))
        return output

    def read_output_and_status(self) -> tuple[bytes, int]:
        """``read_output()`` for a program whose exit status says something
        (the lifetime smoke exits 1 with its failure record): any status is
        returned with the output; every other runner check still applies."""
        # Hashing a pinned probe counts against the run's timeout.
        deadline = time.monotonic() + self._timeout
        held_copy = self._held_copy()
        # A held copy was read from the resolved file once: no second lookup.
        executable = self._resolve() if held_copy is None else os.fspath(self._executable)
        with HeldSignals() as held:
            probe = self._start(executable, deadline)
            try:
                output = _collect(probe, deadline, held, self._timeout)
                if not probe.wait_exit(deadline, held):
                    raise CudaProbeError(
                        _codes.PROBE_TIMEOUT,
                        facts="the probe closed its output but had not exited after "
                        f"{_seconds(self._timeout)}",
                    )
            except CudaProbeError as error:
                if error.reason_code == _codes.PROBE_TIMEOUT:
                    probe.ask_to_end()
                raise
            finally:
                probe.end()
        return output, self._exit_status(probe)

    @staticmethod
    def _exit_status(probe: _ProbeProcess) -> int:
        if probe.status_lost:
            raise CudaProbeError(_codes.PROBE_EXECUTION_FAILED, facts=_status_lost_facts())
        if probe.returncode is None or not probe.session_ended:
            raise CudaProbeError(
                _codes.PROBE_TIMEOUT,
                facts="a process of the probe's session was still running "
                f"{_seconds(REAP_SECONDS)} after it was killed",
            )
        return probe.returncode

    def _held_copy(self) -> _sealed.SealedProbe | None:
        """The sealed copy ``sealed_copies`` holds for this pinned probe, if any."""
        if self._sha256 is None:
            return None
        return _SEALED_COPIES.get().get(os.fspath(self._executable))

    def _resolve(self) -> str:
        return _resolved(self._executable)

    def _start(self, executable: str, deadline: float) -> _ProbeProcess:
        """Seal (when pinned) and spawn the probe; runs with signal handlers held back."""
        if self._sha256 is None:
            return self._spawn(executable, None)
        held_copy = self._held_copy()
        sealed = held_copy or _sealed_probe(executable, deadline, self._timeout)
        try:
            if sealed.digest != self._sha256:
                raise CudaProbeError(
                    _codes.PROBE_DIGEST_MISMATCH, facts=_digest_facts(sealed.digest, self._sha256)
                )
            if sealed.descriptor is None:
                # Off Linux there is no sealed copy to run; never the file itself.
                raise CudaProbeError(
                    _codes.PROBE_EXECUTION_FAILED,
                    facts="this platform has no sealed copy to run a pinned probe from",
                )
            # What the loader would bring, read from the copy that will run.
            _pinned_loader.check_loader(sealed.descriptor)
            return self._spawn(executable, sealed.descriptor)
        finally:
            if held_copy is None:
                sealed.close()

    def _spawn(self, executable: str, descriptor: int | None) -> _ProbeProcess:
        argv = [executable, *self._arguments]
        # Pinned: exec the sealed copy itself (what fexecve does); the
        # descriptor must be open in the child for the kernel to find it.
        program = executable if descriptor is None else f"/proc/self/fd/{descriptor}"
        try:
            process = subprocess.Popen(
                argv,
                executable=program,
                pass_fds=() if descriptor is None else (descriptor,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=_child_environment(),
                close_fds=True,
                shell=False,
                start_new_session=not _IS_WINDOWS,
            )
        except OSError as error:
            raise CudaProbeError(
                _codes.PROBE_EXECUTION_FAILED,
                facts=f"starting the probe failed with {os_error_text(error)}",
            ) from error
        except ValueError as error:
            raise CudaProbeError(
                _codes.PROBE_EXECUTION_FAILED, facts="the probe's arguments could not be passed"
            ) from error
        return _ProbeProcess(process)


def _resolved(executable: Path) -> str:
    """The probe's resolved path, checked: absolute, a regular file this process may execute."""
    if not executable.is_absolute():
        raise CudaProbeError(
            _codes.PROBE_PATH_NOT_ABSOLUTE, facts="the configured probe path is relative"
        )
    text = os.fspath(executable)
    try:
        resolved = os.path.realpath(text, strict=True)
        status = os.stat(resolved)
    except (OSError, ValueError) as error:  # ValueError: NUL, or unencodable
        raise CudaProbeError(
            _codes.PROBE_NOT_FOUND, facts=_not_found_facts(text, error)
        ) from error
    if not stat.S_ISREG(status.st_mode):
        raise CudaProbeError(
            _codes.PROBE_NOT_EXECUTABLE,
            facts=f"the probe is {_sealed.file_kind(status.st_mode)}, not a regular file",
        )
    if not _IS_WINDOWS and not os.access(resolved, os.X_OK):
        raise CudaProbeError(_codes.PROBE_NOT_EXECUTABLE, facts=_no_execute_facts(resolved))
    return resolved


def _no_execute_facts(resolved: str) -> str:
    """Why this process may not execute the regular file at ``resolved``."""
    try:
        mounted_noexec = bool(os.statvfs(resolved).f_flag & os.ST_NOEXEC)
    except OSError:
        mounted_noexec = False
    if mounted_noexec:
        return "the probe lies on a file system mounted noexec; nothing on it may be executed"
    mode = stat.S_IMODE(os.stat(resolved).st_mode)
    return f"the probe file's mode is {mode:04o}; this process may not execute it"


def _sealed_probe(executable: str, deadline: float, timeout: float) -> _sealed.SealedProbe:
    try:
        return _sealed.seal(executable, deadline)
    except CudaProbeError as error:
        if error.reason_code != _codes.PROBE_TIMEOUT:
            raise
        raise CudaProbeError(
            _codes.PROBE_TIMEOUT,
            facts="copying and hashing the pinned probe took longer than the "
            f"{_seconds(timeout)} timeout",
        ) from error


def _collect(probe: _ProbeProcess, deadline: float, held: HeldSignals, timeout: float) -> bytes:
    """The probe's stdout up to its end of file, within ``deadline`` and the size bound."""
    if _IS_WINDOWS:  # pragma: no cover
        return _collect_with_thread(probe.stdout_fd, deadline, timeout)
    chunks: list[bytes] = []
    size = 0
    poller = select.poll()
    poller.register(probe.stdout_fd, select.POLLIN)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not held.wait(partial(poller.poll, _poll_milliseconds(remaining))):
            raise CudaProbeError(_codes.PROBE_TIMEOUT, facts=_unfinished_facts(timeout))
        try:
            chunk = os.read(probe.stdout_fd, min(_READ_CHUNK, MAX_OUTPUT_BYTES + 1 - size))
        except OSError as error:
            raise CudaProbeError(
                _codes.PROBE_EXECUTION_FAILED,
                facts=f"reading the probe's output failed with {os_error_text(error)}",
            ) from error
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_OUTPUT_BYTES:
            raise CudaProbeError(_codes.PROBE_OUTPUT_TOO_LARGE, facts=_too_much_facts())


def _unfinished_facts(timeout: float) -> str:
    return f"the probe did not finish within {_seconds(timeout)}"


def _too_much_facts() -> str:
    return f"the probe wrote more than {MAX_OUTPUT_BYTES:,} bytes"


def _collect_with_thread(  # pragma: no cover
    descriptor: int, deadline: float, timeout: float
) -> bytes:
    """Windows pipes cannot be selected; a reader thread gives the same bounds."""
    chunks: list[bytes] = []
    failure: list[BaseException] = []

    def read() -> None:
        size = 0
        try:
            while size <= MAX_OUTPUT_BYTES:
                chunk = os.read(descriptor, min(_READ_CHUNK, MAX_OUTPUT_BYTES + 1 - size))
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
        raise CudaProbeError(_codes.PROBE_TIMEOUT, facts=_unfinished_facts(timeout))
    if failure:
        raise CudaProbeError(
            _codes.PROBE_EXECUTION_FAILED, facts="reading the probe's output failed"
        ) from failure[0]
    output = b"".join(chunks)
    if len(output) > MAX_OUTPUT_BYTES:
        raise CudaProbeError(_codes.PROBE_OUTPUT_TOO_LARGE, facts=_too_much_facts())
    return output



@contextlib.contextmanager
def sealed_copies(paths: Sequence[Path]) -> Iterator[dict[Path, str]]:
    """Each probe at ``paths`` read once into its sealed copy, for the block.

    Yields each path's digest (of its sealed copy). While the block runs,
    every pinned run of one of these paths, by the path as given (the
    provider's too), executes that copy: pinned to another digest it is
    refused (``PROBE_DIGEST_MISMATCH``), and the file is never read again.
    Raises ``CudaProbeError`` with the runner's codes for a path that cannot
    be sealed. Linux only (elsewhere no sealed copy can run).
    """
    copies: dict[str, _sealed.SealedProbe] = {}
    try:
        for path in paths:
            if os.fspath(path) not in copies:
                resolved = _resolved(Path(path))
                copies[os.fspath(path)] = _sealed.seal(resolved)
        token = _SEALED_COPIES.set({**_SEALED_COPIES.get(), **copies})
        try:
            yield {path: copies[os.fspath(path)].digest for path in paths}
        finally:
            _SEALED_COPIES.reset(token)
    finally:
        for copy in copies.values():
            copy.close()
