"""Running the probe executable: bounded in time, output and side effects.

The probe is spawned directly by this process: no PATH lookup, an empty
environment, stdin and stderr ``/dev/null``, no descriptor inherited but its
stdout pipe (and, when pinned, its own sealed image), in a session and
process group of its own. Its stdout is read with a deadline (no polling
sleeps) and at most ``MAX_OUTPUT_BYTES + 1`` bytes. When a run ends, on
success and on every failure alike, the whole group is sent SIGKILL while
the probe is still unreaped (so the group id cannot have been reused), the
probe is reaped, and ``run()`` returns only once every process of that group
is confirmed to have exited (a pidfd per remaining member). A process that
holds stdout open is a member and dies with the group. A run therefore ends
at the latest ``REAP_SECONDS`` after its timeout; the host starts no helper
process and keeps none.

Not contained here: a descendant that left the probe's group or session
(``setsid``). The reviewed probe contains its own descendants (it is a child
subreaper and kills and reaps them before it prints its record); what an
unreviewed probe does outside its group is outside the trust boundary (a
same-UID process), and the pin is what makes a probe the reviewed one.
Windows: only the probe process itself is killed.

Pinned runs (``probe_sha256``): see ``_sealed``: the sealed copy that was
hashed is what is executed, through ``/proc/self/fd/N``; hashing counts
against the timeout. Off Linux a pinned run is refused after the digest check.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import select
import stat
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

from rextio_device_cuda import _codes
from rextio_device_cuda._errors import CudaProbeError, os_error_text
from rextio_device_cuda._probe_schema import MAX_OUTPUT_BYTES, Report, parse_plain
from rextio_device_cuda._provider_spec import PROVIDER_SPEC

if TYPE_CHECKING:
    import subprocess

    from rextio_device_cuda._report import CudaProbeReport

if TYPE_CHECKING:
    from signal import SIGKILL
else:
    try:  # the C module behind ``signal``, without the enum classes it builds at import
        from _signal import SIGKILL
    except ImportError:  # pragma: no cover - not CPython
        from signal import SIGKILL

_RUNNER: Final = PROVIDER_SPEC.probe_runner
DEFAULT_TIMEOUT_SECONDS: Final[float] = _RUNNER.default_timeout_seconds
MAX_TIMEOUT_SECONDS: Final[float] = _RUNNER.max_timeout_seconds
MAX_ARGUMENT_CHARS: Final[int] = _RUNNER.max_argument_chars
_WINDOWS_ENVIRONMENT: Final[tuple[str, ...]] = _RUNNER.windows_environment
_IS_WINDOWS: Final[bool] = sys.platform == "win32"
# After SIGKILL a group normally dies at once; this only bounds a stuck reap
# (a member in uninterruptible sleep), so a run ends by timeout + this.
REAP_SECONDS: Final[float] = 5.0
_READ_CHUNK: Final[int] = 16384
# Compiled at the first use (only a pinned request has a pin to check).
_SHA256_PATTERN: re.Pattern[str] | None = None


def sha256_of_descriptor(descriptor: int, deadline: float = math.inf) -> str:
    """The SHA-256 (lowercase hex) of everything readable from ``descriptor``."""
    # The sealed pin's module loads with the first pinned run, not with the runner.
    from rextio_device_cuda import _sealed

    return _sealed.sha256_of_descriptor(descriptor, deadline)


def is_probe_sha256(value: object) -> bool:
    """True for a well-formed pin: exactly 64 lowercase hexadecimal digits."""
    global _SHA256_PATTERN
    if not isinstance(value, str):
        return False
    pattern = _SHA256_PATTERN
    if pattern is None:
        pattern = _SHA256_PATTERN = re.compile(_RUNNER.sha256_pattern, re.ASCII)
    return pattern.fullmatch(value) is not None


def _validated_sha256(value: object) -> str | None:
    if value is None:
        return None
    if not is_probe_sha256(value):
        raise ValueError("probe_sha256 must be exactly 64 lowercase hexadecimal digits")
    return str(value)


def probe_file_sha256(path: str) -> str:
    """The SHA-256 of the probe at ``path`` as a pinned run would compute it.

    Raises ``CudaProbeError`` with the runner's path codes and the pin's own
    refusals (``PROBE_TOO_LARGE``, ``PROBE_PIN_SCRIPT_UNSUPPORTED``), so a
    digest is only ever printed for a probe that a pinned run can execute.
    """
    try:
        resolved = os.path.realpath(path, strict=True)
    except (OSError, ValueError) as error:
        raise CudaProbeError(_codes.PROBE_NOT_FOUND, facts=_not_found_facts(error)) from error
    from rextio_device_cuda import _sealed

    sealed = _sealed.seal(resolved)
    sealed.close()
    return sealed.digest


def _not_found_facts(error: Exception) -> str:
    if not isinstance(error, OSError):
        return "the configured probe path holds a NUL character"
    return f"resolving the configured probe path failed with {os_error_text(error)}"


def _seconds(value: float) -> str:
    return f"{value:g} s"


def _exit_facts(returncode: int) -> str:
    """``the probe exited with status 3`` or ``the probe was ended by signal 9 (SIGKILL)``."""
    if returncode >= 0:
        return f"the probe exited with status {returncode}"
    import signal  # its names serve this fact only

    try:
        name = f" ({signal.Signals(-returncode).name})"
    except ValueError:
        name = ""
    return f"the probe was ended by signal {-returncode}{name}"


def _digest_facts(found: str, pinned: str) -> str:
    # Prefixes only: enough to tell two digests apart, never the whole pin.
    return f"the file's SHA-256 begins {found[:8]}, the pin begins {pinned[:8]}"


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


# The parameters of ``_posixsubprocess.fork_exec``, in order: the C function
# behind ``subprocess.Popen`` on POSIX, which forks (vfork where it can),
# closes every inherited descriptor in the child and execs. Calling it
# directly spares the import of ``subprocess`` (and ``signal``: 2.5 ms, paid
# by every `rextio generate`) and Popen's work per run. It is private: it is
# used only where its signature is exactly this one (CPython 3.12 and later
# state it; 3.11 states none, and its subprocess.py passes exactly these),
# and anywhere else ``subprocess.Popen`` starts the probe with the same
# settings.
_FORK_EXEC_PARAMETERS: Final[tuple[str, ...]] = (
    "args",
    "executable_list",
    "close_fds",
    "pass_fds",
    "cwd",
    "env",
    "p2cread",
    "p2cwrite",
    "c2pread",
    "c2pwrite",
    "errread",
    "errwrite",
    "errpipe_read",
    "errpipe_write",
    "restore_signals",
    "call_setsid",
    "pgid_to_set",
    "gid",
    "extra_groups",
    "uid",
    "child_umask",
    "preexec_fn",
    "allow_vfork",
)
# What a child reports on its error pipe before exec (at most this much is read).
_ERRPIPE_LIMIT: Final[int] = 50000
if TYPE_CHECKING:
    _ForkExec = Callable[..., int]


def known_fork_exec(function: object, version: tuple[int, int]) -> _ForkExec | None:
    """``function`` (CPython's ``fork_exec``) if its parameters are known to be
    ``_FORK_EXEC_PARAMETERS`` on CPython ``version``, else None."""
    if not callable(function):
        return None
    signature = getattr(function, "__text_signature__", None)
    if signature is None:
        return function if version == (3, 11) else None
    names = tuple(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", str(signature)))
    return function if names == ("module", *_FORK_EXEC_PARAMETERS) else None


def _fork_exec() -> _ForkExec | None:
    if _IS_WINDOWS or sys.implementation.name != "cpython":
        return None
    try:
        import _posixsubprocess
    except ImportError:  # pragma: no cover - every POSIX CPython has it
        return None
    version = sys.version_info
    return known_fork_exec(_posixsubprocess.fork_exec, (version[0], version[1]))


# Read at each spawn (a test switches to the Popen path by setting it to None).
_FORK_EXEC: _ForkExec | None = _fork_exec()
# Probes started with fork_exec that exceeded the reap bound (a member in
# uninterruptible sleep): reaped without blocking when a later run starts,
# as subprocess does for a Popen dropped unreaped.
_ABANDONED: Final[set[int]] = set()
_ABANDONED_LOCK: Final = threading.Lock()


def _reap_abandoned() -> None:
    with _ABANDONED_LOCK:
        for pid in tuple(_ABANDONED):
            try:
                reaped, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                reaped = pid  # reaped elsewhere (or SIGCHLD ignored): gone
            if reaped == pid:
                _ABANDONED.discard(pid)


def _child_error(data: bytes) -> OSError | None:
    """The OSError a child reported before exec (``OSError:<hex errno>:...``)."""
    name, _, rest = data.partition(b":")
    hex_errno, _, _ = rest.partition(b":")
    try:
        number = int(hex_errno, 16)
    except ValueError:
        return None
    if name != b"OSError" or number <= 0:
        return None
    return OSError(number, os.strerror(number))


def _fork_exec_probe(
    fork_exec: _ForkExec, argv: list[str], program: str, pass_fds: tuple[int, ...]
) -> tuple[int, int]:
    """Start the probe as ``subprocess.Popen`` with the runner's settings does:
    no PATH lookup, an empty environment, stdin and stderr ``/dev/null``,
    stdout a pipe, every other descriptor but ``pass_fds`` closed, a session of
    its own, default signal dispositions. Returns (pid, stdout's read end).

    Raises OSError (the child's exec failure or the parent's), ValueError for
    an argument that cannot be passed.
    """
    sys.audit("subprocess.Popen", program, argv, None, {})
    executable = os.fsencode(program)
    stdout_read, stdout_write = os.pipe()
    devnull = -1
    errpipe_read = errpipe_write = -1
    pid = -1
    try:
        devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        errpipe_read, errpipe_write = os.pipe()
        # As subprocess: the error pipe must not be one of the child's 0, 1, 2.
        low: list[int] = []
        while errpipe_write < 3:
            low.append(errpipe_write)
            errpipe_write = os.dup(errpipe_write)
        for descriptor in low:
            os.close(descriptor)
        try:
            pid = fork_exec(
                argv,
                (executable,),
                True,  # close_fds
                tuple(sorted({*pass_fds, errpipe_write})),
                None,  # cwd
                [],  # env: empty
                devnull,  # p2cread: stdin
                -1,
                stdout_read,  # c2pread
                stdout_write,  # c2pwrite: stdout
                -1,
                devnull,  # errwrite: stderr
                errpipe_read,
                errpipe_write,
                True,  # restore_signals
                True,  # call_setsid: a session and process group of its own
                -1,  # pgid_to_set
                None,  # gid
                None,  # extra_groups
                None,  # uid
                -1,  # child_umask
                None,  # preexec_fn
                True,  # allow_vfork
            )
        finally:
            os.close(errpipe_write)
            errpipe_write = -1
        # EOF once the child has exec'd (the pipe is close-on-exec), else its error.
        report = bytearray()
        while len(report) <= _ERRPIPE_LIMIT:
            part = os.read(errpipe_read, _ERRPIPE_LIMIT)
            if not part:
                break
            report += part
    except BaseException:
        os.close(stdout_read)
        if pid != -1:
            # Interrupted after the start (a signal's exception): the child is
            # unreaped, so its pid is still its group's; end it like any run.
            with contextlib.suppress(OSError):
                os.killpg(pid, SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        raise
    finally:
        os.close(stdout_write)
        for descriptor in (devnull, errpipe_read, errpipe_write):
            if descriptor != -1:
                os.close(descriptor)
    if report:
        # The child failed before or in exec and exits at once: reap it.
        os.close(stdout_read)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        error = _child_error(bytes(report))
        raise error if error is not None else OSError("the probe could not be started")
    return pid, stdout_read


class _Child:
    """One probe spawned by this process and the means to end its process group.

    Started by ``fork_exec`` (``process`` is None) or, where that is not
    known, by ``subprocess.Popen`` (``process``).
    """

    def __init__(
        self, pid: int, stdout_fd: int, process: subprocess.Popen[bytes] | None = None
    ) -> None:
        self.pid = pid
        self.stdout_fd = stdout_fd
        self.process = process
        self.returncode: int | None = None
        self._exit_fd: int | None = None
        # Set once the exit descriptor was seen readable: the child has exited.
        self._exited = False
        self.group_exited = False
        if hasattr(os, "pidfd_open"):
            try:
                self._exit_fd = os.pidfd_open(pid)
            except OSError:
                self._exit_fd = None

    def _kill_group(self) -> None:
        # Only while the child is unreaped: its pid (= group id) cannot be reused.
        if self.returncode is not None:
            return
        try:
            if self.process is not None and _IS_WINDOWS:
                self.process.kill()
            else:
                os.killpg(self.pid, SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _reap(self, timeout: float | None) -> int | None:
        """Reap the child within ``timeout`` (None: block); its status, or None."""
        if self.process is not None:
            import subprocess

            try:
                self.returncode = self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return None
            return self.returncode
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.0005
        while True:
            try:
                pid, status = os.waitpid(self.pid, 0 if deadline is None else os.WNOHANG)
            except ChildProcessError:
                # Reaped elsewhere or SIGCHLD ignored: what subprocess reports, 0.
                pid, status = self.pid, 0
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
                return self.returncode
            remaining = 0.0 if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                return None
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, 0.05)

    def wait_exit(self, deadline: float) -> bool:
        """Wait until the child exits or ``deadline``; True when it exited."""
        if self._exited:
            return True
        remaining = deadline - time.monotonic()
        if self._exit_fd is None:
            return self._reap(max(remaining, 0.0)) is not None
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

    def close_stdout(self) -> None:
        """Close the read end of the probe's stdout (once)."""
        if self.stdout_fd == -1:
            return
        if self.process is not None and self.process.stdout is not None:
            self.process.stdout.close()
        else:
            os.close(self.stdout_fd)
        self.stdout_fd = -1

    def finish(self) -> int | None:
        """Kill the group, reap the child, confirm every group member exited.

        Returns the child's exit status (None when it could not be reaped
        within the bound); ``group_exited`` then says whether every other
        member of its group was confirmed to have exited.
        """
        self._kill_group()
        deadline = time.monotonic() + REAP_SECONDS
        exited = self.wait_exit(deadline)
        returncode: int | None = None
        if exited and self._exit_fd is not None:
            # The pidfd reported the exit: the zombie is there, waitpid returns at once.
            returncode = self._reap(None)
        elif exited:
            returncode = self.returncode if self.returncode is not None else self._reap(0.0)
        self.close_stdout()
        if self._exit_fd is not None:
            os.close(self._exit_fd)
            self._exit_fd = None
        if returncode is None and self.process is None:
            with _ABANDONED_LOCK:
                _ABANDONED.add(self.pid)
        if returncode is not None and not _IS_WINDOWS:
            self.group_exited = _confirm_group_exit(self.pid, deadline)
        else:
            self.group_exited = returncode is not None
        return returncode


def _popen(argv: list[str], program: str, pass_fds: tuple[int, ...]) -> subprocess.Popen[bytes]:
    """``fork_exec_probe``'s settings through ``subprocess.Popen`` (Windows,
    and wherever fork_exec's parameters are not known)."""
    import subprocess

    return subprocess.Popen(
        argv,
        executable=program,
        pass_fds=pass_fds,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_child_environment(),
        close_fds=True,
        shell=False,
        start_new_session=not _IS_WINDOWS,
    )


def _group_members(group: int) -> list[int]:
    """Processes (zombies included) whose process group is ``group``, from /proc."""
    members: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return members
    for entry in entries:
        if entry.isdigit() and _group_of(int(entry)) == group:
            members.append(int(entry))
    return members


def _group_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            fields = file.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # After the command name: state, ppid, pgrp, ...
    return int(fields[2]) if len(fields) > 2 else None


def _confirm_group_exit(group: int, deadline: float) -> bool:
    """True once no process of ``group`` is still running (a zombie has exited).

    Called after SIGKILL went to the group and its leader was reaped. A member
    with a pending SIGKILL cannot fork, so no member can appear from now on;
    the ones that remain are dying or zombies waiting for their new parent.
    """
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return True  # the common case: no member left at all, one syscall
    except PermissionError:
        pass  # a member this process may not signal: still wait for it below
    if not hasattr(os, "pidfd_open"):  # pragma: no cover - Linux < 5.3
        return True
    descriptors: list[int] = []
    try:
        for pid in _group_members(group):
            try:
                descriptor = os.pidfd_open(pid)
            except OSError:
                continue  # already reaped: it has exited
            descriptors.append(descriptor)
            # The pidfd names whatever process holds ``pid`` now; if that is
            # no longer a member, the member it replaced is gone.
            if _group_of(pid) != group:
                descriptors.pop()
                os.close(descriptor)
        return _all_exit(descriptors, deadline)
    finally:
        for descriptor in descriptors:
            os.close(descriptor)


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
        # Kept as a str: the os.path functions used per run are several times
        # cheaper than the pathlib methods that wrap them. Absoluteness is
        # lexical, so pathlib's stricter rule (drive and root on Windows) is
        # decided once here.
        self._executable = os.fspath(executable)
        self._is_absolute = Path(executable).is_absolute()
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

    def _resolve(self) -> str:
        if not self._is_absolute:
            raise CudaProbeError(
                _codes.PROBE_PATH_NOT_ABSOLUTE, facts="the configured probe path is relative"
            )
        try:
            # What Path.resolve(strict=True) does, minus the Path objects.
            resolved = os.path.realpath(self._executable, strict=True)
            status = os.stat(resolved)
        except (OSError, ValueError) as error:  # ValueError: an embedded NUL
            raise CudaProbeError(_codes.PROBE_NOT_FOUND, facts=_not_found_facts(error)) from error
        if not stat.S_ISREG(status.st_mode):
            from rextio_device_cuda._sealed import file_kind

            raise CudaProbeError(
                _codes.PROBE_NOT_EXECUTABLE,
                facts=f"the probe is {file_kind(status.st_mode)}, not a regular file",
            )
        if not _IS_WINDOWS and not os.access(resolved, os.X_OK):
            raise CudaProbeError(
                _codes.PROBE_NOT_EXECUTABLE,
                facts=f"the probe file's mode is {stat.S_IMODE(status.st_mode):04o}; "
                "this process may not execute it",
            )
        return resolved

    def _spawn(self, executable: str, descriptor: int | None = None) -> _Child:
        argv = [executable, *self._arguments]
        # Pinned: exec the sealed copy itself (what fexecve does); the
        # descriptor must be open in the child for the kernel to find it.
        program = executable if descriptor is None else f"/proc/self/fd/{descriptor}"
        pass_fds = () if descriptor is None else (descriptor,)
        if _ABANDONED:
            _reap_abandoned()
        try:
            if _FORK_EXEC is not None:
                pid, stdout_fd = _fork_exec_probe(_FORK_EXEC, argv, program, pass_fds)
                return _Child(pid, stdout_fd)
            process = _popen(argv, program, pass_fds)
        except OSError as error:
            raise CudaProbeError(
                _codes.PROBE_EXECUTION_FAILED,
                facts=f"starting the probe failed with {os_error_text(error)}",
            ) from error
        except ValueError as error:
            raise CudaProbeError(
                _codes.PROBE_EXECUTION_FAILED, facts="the probe's arguments could not be passed"
            ) from error
        if process.stdout is None:  # pragma: no cover - stdout=PIPE always makes one
            raise CudaProbeError(
                _codes.PROBE_EXECUTION_FAILED, facts="the probe was started without its output"
            )
        return _Child(process.pid, process.stdout.fileno(), process)

    def read_output(self) -> bytes:
        """Run the probe and return its stdout, or raise with a runner code."""
        return self._read_output(None, None)

    def read_output_and_status(self) -> tuple[bytes, int]:
        """``read_output()`` for a program whose exit status says something
        (the lifetime smoke exits 1 with its failure record): any status is
        returned with the output; every other runner check still applies."""
        return self._run_to_end(None, None)

    def _read_output(
        self,
        while_running: Callable[[], None] | None,
        on_pause: Callable[[bytes], None] | None,
    ) -> bytes:
        output, returncode = self._run_to_end(while_running, on_pause)
        if returncode != 0:
            raise CudaProbeError(_codes.PROBE_EXIT_NONZERO, facts=_exit_facts(returncode))
        return output

    def _run_to_end(
        self,
        while_running: Callable[[], None] | None,
        on_pause: Callable[[bytes], None] | None,
    ) -> tuple[bytes, int]:
        # Hashing a pinned probe counts against the run's timeout.
        deadline = time.monotonic() + self._timeout
        executable = self._resolve()
        if self._sha256 is None:
            child = self._spawn(executable)
        else:
            from rextio_device_cuda import _sealed

            try:
                sealed = _sealed.seal(executable, deadline)
            except CudaProbeError as error:
                if error.reason_code != _codes.PROBE_TIMEOUT:
                    raise
                raise CudaProbeError(
                    _codes.PROBE_TIMEOUT,
                    facts="copying and hashing the pinned probe took longer than the "
                    f"{_seconds(self._timeout)} timeout",
                ) from error
            try:
                if sealed.digest != self._sha256:
                    raise CudaProbeError(
                        _codes.PROBE_DIGEST_MISMATCH,
                        facts=_digest_facts(sealed.digest, self._sha256),
                    )
                if sealed.descriptor is None:
                    # Off Linux there is no sealed copy to run; never the file itself.
                    raise CudaProbeError(
                        _codes.PROBE_EXECUTION_FAILED,
                        facts="this platform has no sealed copy to run a pinned probe from",
                    )
                child = self._spawn(executable, sealed.descriptor)
            finally:
                sealed.close()
        try:
            if while_running is not None:
                # Caller's work that does not need the report, done while the
                # probe runs instead of before it; if it raises, the group is
                # killed like on any other failure.
                while_running()
            output = self._collect(child, deadline, on_pause, self._timeout)
            if not child.wait_exit(deadline):
                raise CudaProbeError(
                    _codes.PROBE_TIMEOUT,
                    facts="the probe closed its output but had not exited after "
                    f"{_seconds(self._timeout)}",
                )
        except BaseException:
            child.finish()
            raise
        returncode = child.finish()
        if not child.group_exited or returncode is None:
            # A process of the probe's group outlived the reap bound.
            raise CudaProbeError(
                _codes.PROBE_TIMEOUT,
                facts="a process of the probe's group was still running "
                f"{_seconds(REAP_SECONDS)} after it was killed",
            )
        return output, returncode

    def run(self) -> CudaProbeReport:
        """Run the probe and parse its report."""
        from rextio_device_cuda._report import parse_probe_report

        early = _EarlyParse(parse_probe_report)
        return cast("CudaProbeReport", early.result(self._read_output(None, early)))

    def run_overlapping(self, while_running: Callable[[], None]) -> CudaProbeReport:
        """``run()``, calling ``while_running`` once the probe has started."""
        from rextio_device_cuda._report import parse_probe_report

        early = _EarlyParse(parse_probe_report)
        return cast("CudaProbeReport", early.result(self._read_output(while_running, early)))

    def run_for_preflight(self, while_running: Callable[[], None]) -> Report:
        """``run_overlapping()`` into the plain records a preflight checks:
        the same checks of the same bytes, without the public dataclasses."""
        early = _EarlyParse(parse_plain)
        return cast(Report, early.result(self._read_output(while_running, early)))

    @staticmethod
    def _collect(
        child: _Child,
        deadline: float,
        on_pause: Callable[[bytes], None] | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> bytes:
        descriptor = child.stdout_fd
        if _IS_WINDOWS:
            return _collect_with_thread(descriptor, deadline, timeout)
        chunks: list[bytes] = []
        size = 0
        # poll(2), not a selector: no epoll descriptor to create and close per run.
        poller = select.poll()
        try:
            poller.register(descriptor, select.POLLIN)
        except (OSError, ValueError) as error:
            raise CudaProbeError(
                _codes.PROBE_EXECUTION_FAILED, facts="the probe's output could not be watched"
            ) from error
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not poller.poll(_poll_milliseconds(remaining)):
                raise CudaProbeError(_codes.PROBE_TIMEOUT, facts=_unfinished_facts(timeout))
            try:
                chunk = os.read(descriptor, min(_READ_CHUNK, MAX_OUTPUT_BYTES + 1 - size))
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

    # Not a Generic class: subscripting typing.Generic costs 0.1 ms at import.
    def __init__(self, parse: Callable[[bytes], Any]) -> None:
        self._parse = parse
        self._parsed_size = -1
        self._report: Any = None
        self._error: Exception | None = None

    def __call__(self, output: bytes) -> None:
        self._parsed_size = len(output)
        try:
            self._report = self._parse(output)
        except Exception as error:  # kept for result(); raised only if it applies
            self._error = error

    def result(self, output: bytes) -> Any:
        """The report of ``output`` (the complete stdout of a successful run)."""
        if len(output) != self._parsed_size:
            return self._parse(output)
        if self._error is not None:
            raise self._error
        if self._report is None:  # pragma: no cover - set whenever no error was
            return self._parse(output)
        return self._report


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
