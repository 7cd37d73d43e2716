"""The sealed pin: what was hashed is what runs, and nothing else is read.

docs/interfaces.md, Probe pin, says how.

Pinned probes here are compiled binaries (``ProbeFactory.binary``) that print
what their own image says: a run of other bytes shows up as another marker.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import select
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cuda_support import (
    SPEC,
    ProbeFactory,
    ready_options,
    report,
    request_for,
    run_cli,
    run_with_memfd_noexec_2,
)

from rextio_device_cuda import CudaDeviceProvider
from rextio_device_cuda import _sealed as sealed_module
from rextio_device_cuda.probe import CudaProbeError, SubprocessProbeRunner

REWRITE_ROUNDS = 200
# Bounds only: each wait ends as soon as the state it waits for holds.
BOUND_SECONDS = 60
BOUND: int = SPEC["probe_runner"]["max_pinned_probe_bytes"]
WRONG_PIN = "0" * 64
FUZZ_ROUNDS = 500


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _code(runner: SubprocessProbeRunner) -> str:
    with pytest.raises(CudaProbeError) as caught:
        runner.run()
    return caught.value.reason_code


def _runs(marker: Path) -> int:
    return marker.read_text().count("ran") if marker.exists() else 0


# -- what a pin refuses --------------------------------------------------------------


def test_a_pinned_script_is_refused_unrun(probes: ProbeFactory, tmp_path: Path) -> None:
    probe = probes.printing(report())
    runner = SubprocessProbeRunner(probe, probe_sha256=_digest(probe))
    assert _code(runner) == "PROBE_PIN_SCRIPT_UNSUPPORTED"
    result = CudaDeviceProvider().preflight(
        request_for("cuda-linux-x86_64", ready_options(probe, probe_sha256=_digest(probe)))
    )
    assert result.reason_codes == ("PROBE_PIN_SCRIPT_UNSUPPORTED",)
    # pin-probe prints no digest that a pinned run would refuse.
    done = run_cli("pin-probe", str(probe), cwd=tmp_path)
    assert done.returncode == 1
    assert "PROBE_PIN_SCRIPT_UNSUPPORTED" in done.stderr
    assert not probes.marker().exists()
    # The same script unpinned still runs, as before.
    assert SubprocessProbeRunner(probe).run().status == "probe-complete"


def _sparse(probes: ProbeFactory, name: str, size: int) -> Path:
    path = probes.write_bytes(name, b"\x7fELF")
    os.truncate(path, size)
    return path


def test_a_huge_sparse_probe_is_refused_before_it_is_read(probes: ProbeFactory) -> None:
    # 3 GiB that would take seconds to hash; the bound refuses it from its size.
    path = _sparse(probes, "huge", 3 << 30)
    runner = SubprocessProbeRunner(path, timeout_seconds=1.0, probe_sha256=WRONG_PIN)
    assert _code(runner) == "PROBE_TOO_LARGE"


@pytest.mark.parametrize(
    ("size", "code"), [(BOUND, "PROBE_DIGEST_MISMATCH"), (BOUND + 1, "PROBE_TOO_LARGE")]
)
def test_the_size_bound_is_exact(size: int, code: str, probes: ProbeFactory) -> None:
    path = _sparse(probes, "edge", size)
    runner = SubprocessProbeRunner(path, timeout_seconds=60.0, probe_sha256=WRONG_PIN)
    assert _code(runner) == code


def test_sealing_counts_against_the_deadline(probes: ProbeFactory) -> None:
    probe = probes.binary(report())
    with pytest.raises(CudaProbeError) as caught:
        sealed_module.seal(str(probe), deadline=time.monotonic())
    assert caught.value.reason_code == "PROBE_TIMEOUT"


_CHUNK = 1 << 20


@pytest.mark.parametrize(
    "size", [0, 1, _CHUNK - 1, _CHUNK, _CHUNK + 1, 3 * _CHUNK + 12345], ids=str
)
def test_the_digest_is_the_whole_files(size: int, probes: ProbeFactory) -> None:
    # The sealed copy is read back in exact-size chunks: every byte is hashed,
    # whatever the size's relation to a chunk.
    data = (b"\0" + os.urandom(size))[:size]  # neither a script nor ELF
    probe = probes.write_bytes("sized", data)
    sealed = sealed_module.seal(str(probe))
    try:
        assert sealed.digest == hashlib.sha256(data).hexdigest()
    finally:
        sealed.close()


def test_a_script_past_the_first_bytes_is_not_a_script(probes: ProbeFactory) -> None:
    # Only a file that begins with #! is refused; #! later is just bytes.
    probe = probes.write_bytes("late", b"\0ELF" + b"#!" * 10)
    sealed = sealed_module.seal(str(probe))
    sealed.close()
    assert sealed.digest == _digest(probe)
    with pytest.raises(CudaProbeError) as caught:
        sealed_module.seal(str(probes.write_bytes("early", b"#!" + b"\0" * (_CHUNK + 3))))
    assert caught.value.reason_code == "PROBE_PIN_SCRIPT_UNSUPPORTED"


@pytest.fixture
def fifo_watch(tmp_path: Path) -> Iterator[tuple[Path, threading.Event, list[bool]]]:
    """A FIFO with a blocked writer: it records whether a reader opened it
    before the test itself did (``released``)."""
    fifo = tmp_path / "watched-fifo"
    os.mkfifo(fifo, 0o755)
    released = threading.Event()
    early: list[bool] = []

    def write() -> None:
        descriptor = os.open(fifo, os.O_WRONLY)  # blocks until someone opens for reading
        early.append(not released.is_set())
        os.close(descriptor)

    writer = threading.Thread(target=write)
    writer.start()
    yield fifo, released, early
    released.set()
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    writer.join(BOUND_SECONDS)
    os.close(reader)
    assert early == [False], "a FIFO was opened for reading by the runner"


def _in_thread(runner: SubprocessProbeRunner) -> str:
    """The run's code; the run happens in a thread so a blocking open cannot hang the test."""
    codes: list[str] = []

    def run() -> None:
        try:
            runner.run()
            codes.append("probe-complete")
        except CudaProbeError as error:
            codes.append(error.reason_code)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(BOUND_SECONDS)
    assert codes, "the pinned run did not return"
    return codes[0]


@pytest.mark.process_stress
def test_a_fifo_is_never_opened_for_reading(
    fifo_watch: tuple[Path, threading.Event, list[bool]],
) -> None:
    fifo, _, _ = fifo_watch
    assert _in_thread(SubprocessProbeRunner(fifo, probe_sha256=WRONG_PIN)) == (
        "PROBE_NOT_EXECUTABLE"
    )


def _swap_in_before_sealing(
    monkeypatch: pytest.MonkeyPatch, replacement: Path, target: Path
) -> None:
    # The worst moment: after the runner's path checks, before the one open.
    real_seal = sealed_module.seal

    def swap_then_seal(resolved: str, deadline: float) -> sealed_module.SealedProbe:
        os.replace(replacement, target)
        return real_seal(resolved, deadline)

    monkeypatch.setattr(sealed_module, "seal", swap_then_seal)


@pytest.mark.process_stress
def test_a_fifo_swapped_in_is_refused_unread(
    probes: ProbeFactory,
    monkeypatch: pytest.MonkeyPatch,
    fifo_watch: tuple[Path, threading.Event, list[bool]],
) -> None:
    fifo, _, _ = fifo_watch
    good = probes.binary(report())
    # The watched FIFO is moved over the probe: its writer stays blocked.
    _swap_in_before_sealing(monkeypatch, fifo, good)
    runner = SubprocessProbeRunner(good, probe_sha256=_digest(good))
    assert _in_thread(runner) == "PROBE_NOT_EXECUTABLE"
    assert stat.S_ISFIFO(os.lstat(good).st_mode)
    assert not probes.marker().exists()
    os.replace(good, fifo)  # back where the fixture releases it


@pytest.mark.process_stress
def test_a_device_swapped_in_is_refused(
    probes: ProbeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = probes.binary(report())
    device = probes.directory / "zero"
    # The zero device: endless bytes, were it ever read.
    os.mknod(device, 0o755 | stat.S_IFCHR, os.makedev(1, 5))
    _swap_in_before_sealing(monkeypatch, device, good)
    runner = SubprocessProbeRunner(good, probe_sha256=_digest(good))
    assert _in_thread(runner) == "PROBE_NOT_EXECUTABLE"
    assert stat.S_ISCHR(os.lstat(good).st_mode)
    assert not probes.marker().exists()


# -- what runs is what was hashed ----------------------------------------------------

# A same-user attacker (its own process): per round it restores the good
# bytes, watches the probe with inotify, and the moment the host has read it
# (IN_ACCESS: the digest's bytes are taken), rewrites it in place (pwrite,
# same length) with other bytes. A host that hashed the file and then ran
# the file would run those.
REWRITER = r"""
import ctypes, errno, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
IN_ACCESS = 0x1
path, good, evil = sys.argv[1], open(sys.argv[2], "rb").read(), open(sys.argv[3], "rb").read()
def rewrite(data):
    # Open, write, close: a file held open for writing could not be executed.
    # ETXTBSY: the file itself is running (a host that runs the file, not a
    # copy); write once it is not.
    for _ in range(60000):
        try:
            target = os.open(path, os.O_WRONLY)
            break
        except OSError as error:
            if error.errno != errno.ETXTBSY:
                raise
            time.sleep(0.001)
    os.pwrite(target, data, 0)
    os.close(target)
for _ in sys.stdin:
    rewrite(good)
    watch = libc.inotify_init1(os.O_CLOEXEC)
    if watch < 0 or libc.inotify_add_watch(watch, path.encode(), IN_ACCESS) < 0:
        sys.exit("inotify failed")
    print("armed", flush=True)
    os.read(watch, 4096)
    rewrite(evil)
    os.close(watch)
    print("rewrote", flush=True)
"""


def _line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], BOUND_SECONDS)
    assert ready, "the rewriter did not answer"
    return process.stdout.readline().strip()


@pytest.mark.process_stress
def test_an_in_place_rewriter_never_substitutes_the_probe(probes: ProbeFactory) -> None:
    good_bytes = probes.binary_bytes(json.dumps(report()), "good")
    evil_bytes = probes.binary_bytes(json.dumps(report()), "evil")
    assert len(good_bytes) == len(evil_bytes)
    assert good_bytes != evil_bytes
    good_file = probes.write_bytes("good-bytes", good_bytes)
    evil_file = probes.write_bytes("evil-bytes", evil_bytes)
    target = probes.write_bytes("probe", good_bytes)
    runner = SubprocessProbeRunner(target, timeout_seconds=30.0, probe_sha256=_digest(good_file))
    rewriter = subprocess.Popen(
        [sys.executable, "-c", REWRITER, str(target), str(good_file), str(evil_file)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert rewriter.stdin is not None
    outcomes: dict[str, int] = {}
    try:
        for _ in range(REWRITE_ROUNDS):
            rewriter.stdin.write("go\n")
            rewriter.stdin.flush()
            assert _line(rewriter) == "armed"
            try:
                outcome = runner.run().status
            except CudaProbeError as error:
                outcome = error.reason_code
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            # The rewrite happened in every round, right after the host's read.
            assert _line(rewriter) == "rewrote"
    finally:
        # Between rounds it waits on stdin; after a failed round, on inotify.
        rewriter.kill()
        rewriter.wait(BOUND_SECONDS)
        rewriter.stdin.close()
        assert rewriter.stdout is not None
        rewriter.stdout.close()
    assert set(outcomes) <= {"probe-complete", "PROBE_DIGEST_MISMATCH"}, outcomes
    assert sum(outcomes.values()) == REWRITE_ROUNDS
    assert not probes.marker("evil").exists(), outcomes
    assert _runs(probes.marker("good")) == outcomes.get("probe-complete", 0)
    assert target.read_bytes() == evil_bytes  # the last rewrite stuck to the file


# -- where the kernel forbids executing a memfd --------------------------------------

NOEXEC_CHILD = r"""
import json, sys
from rextio_device_cuda.probe import CudaProbeError, SubprocessProbeRunner
try:
    SubprocessProbeRunner(sys.argv[1], probe_sha256=sys.argv[2]).run()
    print(json.dumps({"code": None}))
except CudaProbeError as error:
    print(json.dumps({"code": error.reason_code, "detail": error.detail,
                      "explanation": error.explanation}))
"""


@pytest.mark.process_stress
def test_memfd_noexec_2_refuses_and_never_runs_the_file(probes: ProbeFactory) -> None:
    probe = probes.binary(report())
    done = run_with_memfd_noexec_2(NOEXEC_CHILD, str(probe), _digest(probe), timeout=BOUND_SECONDS)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["code"] == "PROBE_EXECUTION_FAILED"
    assert "vm.memfd_noexec" in outcome["detail"]
    assert "vm.memfd_noexec" in outcome["explanation"]
    assert not probes.marker().exists()


def test_a_descriptor_holding_more_than_its_size_says_is_hashed_whole() -> None:
    # The reads follow the file's size but go on to end of file: a file
    # whose size says 0 (a procfs one) is still hashed whole.
    from rextio_device_cuda._sealed import sha256_of_descriptor

    descriptor = os.open("/proc/self/cmdline", os.O_RDONLY)
    try:
        assert os.fstat(descriptor).st_size == 0
        assert sha256_of_descriptor(descriptor) == hashlib.sha256(
            Path("/proc/self/cmdline").read_bytes()
        ).hexdigest()
    finally:
        os.close(descriptor)


# -- what the dynamic loader would bring (PROBE_PIN_LOADER_UNTRUSTED) -------------------

_MAIN_C = "#include <stdio.h>\nint main(void) { puts(\"{}\"); return 0; }\n"
SYSTEM_INTERPRETER = "/lib64/ld-linux-x86-64.so.2"


def _compile(directory: Path, name: str, *flags: str, source: str = _MAIN_C) -> Path:
    """A small C program linked with ``flags`` (the system's cc)."""
    directory.mkdir(parents=True, exist_ok=True)
    source_path = directory / f"{name}.c"
    source_path.write_text(source, encoding="ascii")
    binary = directory / name
    compiler = shutil.which("cc")
    assert compiler is not None, "a C compiler (cc) is needed"
    subprocess.run([compiler, "-o", str(binary), str(source_path), *flags], check=True)
    return binary


def _pinned_code(probe: Path) -> tuple[str, str | None]:
    with pytest.raises(CudaProbeError) as caught:
        SubprocessProbeRunner(probe, probe_sha256=_digest(probe)).run()
    return caught.value.reason_code, caught.value.facts


def _copied_interpreter(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    interpreter = directory / "ld.so"
    interpreter.write_bytes(Path(SYSTEM_INTERPRETER).read_bytes())
    interpreter.chmod(0o755)
    return interpreter


def test_an_interpreter_in_a_writable_directory_is_refused_unrun(tmp_path: Path) -> None:
    loader = tmp_path / "loader"
    interpreter = _copied_interpreter(loader)
    loader.chmod(0o777)
    probe = _compile(tmp_path, "probe", f"-Wl,--dynamic-linker={interpreter}")
    # It runs unpinned (the interpreter works): only the pin refuses it.
    assert subprocess.run([str(probe)], capture_output=True, check=True).stdout == b"{}\n"
    code, facts = _pinned_code(probe)
    assert code == "PROBE_PIN_LOADER_UNTRUSTED"
    assert facts is not None
    assert "may be written by its group or others" in facts


@pytest.fixture
def root_only_directory() -> Iterator[Path]:
    """A directory only root can change, reached from / through such directories."""
    directory = Path(tempfile.mkdtemp(prefix="rextio-loader-", dir="/run"))
    try:
        directory.chmod(0o755)
        yield directory
    finally:
        shutil.rmtree(directory)


def test_an_interpreter_owned_by_another_user_is_refused(
    tmp_path: Path, root_only_directory: Path
) -> None:
    interpreter = _copied_interpreter(root_only_directory)
    os.chown(interpreter, 65534, 65534)
    probe = _compile(tmp_path, "probe", f"-Wl,--dynamic-linker={interpreter}")
    code, facts = _pinned_code(probe)
    assert code == "PROBE_PIN_LOADER_UNTRUSTED"
    assert facts is not None
    assert "uid 65534" in facts
    # The same interpreter, root's again, passes.
    os.chown(interpreter, 0, 0)
    output = SubprocessProbeRunner(probe, probe_sha256=_digest(probe)).read_output()
    assert output == b"{}\n"


def test_a_link_through_a_writable_directory_is_refused(
    tmp_path: Path, root_only_directory: Path
) -> None:
    # The link lies in a root-only directory, but what it names lies in a
    # directory anyone may write: whoever may write there may swap the
    # interpreter later.
    elsewhere = _copied_interpreter(tmp_path / "loader")
    (tmp_path / "loader").chmod(0o777)
    link = root_only_directory / "ld.so"
    link.symlink_to(elsewhere)
    probe = _compile(tmp_path, "probe", f"-Wl,--dynamic-linker={link}")
    code, facts = _pinned_code(probe)
    assert code == "PROBE_PIN_LOADER_UNTRUSTED"
    assert facts is not None
    assert "mode 0777" in facts


def test_an_interpreter_in_a_sticky_directory_is_root_alone_only_when_its_entry_is_roots(
    tmp_path: Path, root_only_directory: Path
) -> None:
    # A sticky root-owned directory others may write (the Nix store's
    # root:nixbld 1775, /tmp's 1777): nobody but an entry's owner can rename
    # or unlink it, so a root-owned entry below it is root's alone.
    shared = root_only_directory / "store"
    shared.mkdir()
    shared.chmod(0o1777)
    package = shared / "glibc"
    interpreter = _copied_interpreter(package)
    probe = _compile(tmp_path, "probe", f"-Wl,--dynamic-linker={interpreter}")
    output = SubprocessProbeRunner(probe, probe_sha256=_digest(probe)).read_output()
    assert output == b"{}\n"
    # The same entry owned by another user: that user may replace what lies below it.
    os.chown(package, 65534, 65534)
    code, facts = _pinned_code(probe)
    assert code == "PROBE_PIN_LOADER_UNTRUSTED"
    assert facts is not None
    assert "sticky" in facts
    assert "uid 65534" in facts


def test_a_writable_directory_that_is_not_sticky_is_refused(
    tmp_path: Path, root_only_directory: Path
) -> None:
    shared = root_only_directory / "shared"
    interpreter = _copied_interpreter(shared / "glibc")
    shared.chmod(0o777)
    probe = _compile(tmp_path, "probe", f"-Wl,--dynamic-linker={interpreter}")
    code, facts = _pinned_code(probe)
    assert code == "PROBE_PIN_LOADER_UNTRUSTED"
    assert facts is not None
    assert "mode 0777" in facts


@pytest.mark.parametrize(
    "flags",
    [
        ("-Wl,--enable-new-dtags,-rpath,/opt/runpath",),
        ("-Wl,--disable-new-dtags,-rpath,/opt/rpath",),
    ],
    ids=["runpath", "rpath"],
)
def test_a_runpath_or_rpath_is_refused_unrun(flags: tuple[str, ...], tmp_path: Path) -> None:
    probe = _compile(tmp_path, "probe", *flags)
    code, facts = _pinned_code(probe)
    assert code == "PROBE_PIN_LOADER_UNTRUSTED"
    assert facts is not None
    assert ("DT_RUNPATH" if "enable" in flags[0] else "DT_RPATH") in facts


def test_a_library_needed_by_path_is_refused_unrun(tmp_path: Path) -> None:
    # A library without a soname, linked by its path, is needed by that path.
    library = _compile(
        tmp_path, "libextra.so", "-shared", "-fPIC", source="int extra(void) { return 1; }\n"
    )
    uses_it = (
        "#include <stdio.h>\nint extra(void);\n"
        'int main(void) { puts("{}"); return extra() - 1; }\n'
    )
    probe = _compile(tmp_path, "probe", str(library), source=uses_it)
    code, facts = _pinned_code(probe)
    assert code == "PROBE_PIN_LOADER_UNTRUSTED"
    assert facts is not None
    assert "needed library by a path" in facts


@pytest.mark.parametrize(
    "data",
    [
        b"\x7fELF",  # no class, no header
        b"\x7fELF\x02\x01\x01" + b"\0" * 9 + b"\xff" * 48,  # program headers far past the end
        b"\x7fELF\x07\x01\x01" + b"\0" * 100,  # no such class
        # ELF64, one program header of the right size, at an offset no file reaches.
        b"\x7fELF\x02\x01\x01"
        + b"\0" * 9
        + struct.pack("<HHIQQQIHHHHHH", 2, 62, 1, 0, 2**64 - 1, 0, 0, 64, 56, 1, 0, 0, 0),
    ],
    ids=["truncated", "headers-past-the-end", "unknown-class", "offset-past-any-file"],
)
def test_a_malformed_elf_is_refused_unrun(data: bytes, probes: ProbeFactory) -> None:
    probe = probes.write_bytes("probe", data)
    assert _pinned_code(probe)[0] == "PROBE_PIN_LOADER_UNTRUSTED"


def test_the_system_loader_and_a_static_probe_pass(tmp_path: Path) -> None:
    from rextio_device_cuda._root_owned import review

    assert review(SYSTEM_INTERPRETER) is None
    kinds = (("dynamic", ()), ("static", ("-static",)), ("static-pie", ("-static-pie",)))
    for name, flags in kinds:
        probe = _compile(tmp_path, name, *flags)
        output = SubprocessProbeRunner(probe, probe_sha256=_digest(probe)).read_output()
        assert output == b"{}\n", name


def test_the_shipped_probe_passes() -> None:
    from rextio_device_cuda._runner import probe_file_sha256
    from rextio_device_cuda._shipped import shipped_binary

    shipped = shipped_binary(SPEC["probe_report"]["probe"])
    assert probe_file_sha256(str(shipped.path)) == shipped.sha256


# -- what ld.so reads beyond the interpreter (found by an adversarial review) ---------
#
# Each ELF here was accepted by the check of 0.2.0's first cut, which looked
# only for DT_RPATH/DT_RUNPATH and for a '/' in DT_NEEDED, read the dynamic
# section by the first mapping that held it, and followed PT_INTERP's links
# by their text.

_AUDIT_C = r"""
#include <fcntl.h>
#include <unistd.h>
unsigned int la_version(unsigned int version) {
    int fd = open(MARKER, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) { (void)write(fd, "audited\n", 8); close(fd); }
    return version;
}
"""


def _shared_audit_library(tmp_path: Path) -> tuple[Path, Path]:
    """An audit library that logs to a marker file, in a world-writable directory
    (anyone could replace it): the marker, and the library."""
    shared = tmp_path / "shared"
    shared.mkdir()
    marker = tmp_path / "audited"
    library = _compile(
        shared, "libaud.so", "-shared", "-fPIC", f'-DMARKER="{marker}"', source=_AUDIT_C
    )
    shared.chmod(0o1777)
    return marker, library


def test_an_audit_library_in_a_world_writable_directory_is_refused_unrun(
    tmp_path: Path,
) -> None:
    marker, library = _shared_audit_library(tmp_path)
    probe = _compile(tmp_path, "probe", f"-Wl,--audit={library}")
    # ld.so runs the audit library named by DT_AUDIT (anyone could replace it).
    assert subprocess.run([str(probe)], capture_output=True, check=True).stdout == b"{}\n"
    assert marker.read_text() == "audited\n"
    marker.unlink()
    code, facts = _pinned_code(probe)
    assert code == "PROBE_PIN_LOADER_UNTRUSTED"
    assert facts is not None
    assert "DT_AUDIT" in facts
    # pin-probe prints no digest for it.
    done = run_cli("pin-probe", str(probe), cwd=tmp_path)
    assert done.returncode == 1
    assert "PROBE_PIN_LOADER_UNTRUSTED" in done.stderr
    assert "Traceback" not in done.stderr
    assert not marker.exists()


@pytest.mark.parametrize(
    "soname",
    [
        "${ORIGIN}tmp${ORIGIN}libx.so",
        "$ORIGIN.libx.so",
        "${LIB}libx.so",
        "$LIB.libx.so",
        "${PLATFORM}libx.so",
        "$PLATFORM.libx.so",
    ],
)
def test_a_needed_library_with_a_dynamic_string_token_is_refused_unrun(
    soname: str, tmp_path: Path
) -> None:
    # No '/' in the name, but ld.so expands the token into a path (from a
    # memfd, $ORIGIN is '/'): the library would come from anywhere.
    library = _compile(
        tmp_path / "lib",
        "libx.so",
        "-shared",
        "-fPIC",
        f"-Wl,-soname,{soname}",
        source="int extra(void) { return 1; }\n",
    )
    uses_it = (
        "#include <stdio.h>\nint extra(void);\n"
        'int main(void) { puts("{}"); return extra() - 1; }\n'
    )
    probe = _compile(tmp_path, "probe", str(library), source=uses_it)
    assert _needed(probe) == [soname.encode(), b"libc.so.6"]
    code, facts = _pinned_code(probe)
    assert code == "PROBE_PIN_LOADER_UNTRUSTED"
    assert facts is not None
    assert "$ token" in facts


def _needed(binary: Path) -> list[bytes]:
    """DT_NEEDED of ``binary`` as readelf prints it."""
    readelf = shutil.which("readelf")
    assert readelf is not None, "binutils' readelf is needed"
    lines = subprocess.run(
        [readelf, "-dW", str(binary)], capture_output=True, check=True
    ).stdout.splitlines()
    return [line.split(b"[", 1)[1].rsplit(b"]", 1)[0] for line in lines if b"(NEEDED)" in line]


_PAGE = 4096
_PT_LOAD, _PT_DYNAMIC, _PT_NOTE = 1, 2, 4
_DT_STRTAB, _DT_DEBUG, _DT_RUNPATH = 5, 21, 29
_PROGRAM_HEADER = struct.Struct("<IIQQQQQQ")
_DYNAMIC_ENTRY = struct.Struct("<qQ")


def _with_a_later_mapping_of_a_dynamic_copy(binary: Path, runpath: bytes) -> bytes:
    """``binary`` (ELF64, little-endian) with one PT_NOTE turned into a
    PT_LOAD, after the others, that maps over the dynamic section's pages a
    copy of them whose DT_DEBUG has become a DT_RUNPATH of ``runpath`` (a
    string already in the string table). The file's own dynamic section,
    where the first mapping puts it, is unchanged."""
    data = bytearray(binary.read_bytes())
    (phoff,) = struct.unpack_from("<Q", data, 32)
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    assert phentsize == _PROGRAM_HEADER.size
    headers = [_PROGRAM_HEADER.unpack_from(data, phoff + i * phentsize) for i in range(phnum)]
    loads = [header for header in headers if header[0] == _PT_LOAD]
    dynamic = next(header for header in headers if header[0] == _PT_DYNAMIC)
    note = max(index for index, header in enumerate(headers) if header[0] == _PT_NOTE)

    def offset_of(address: int) -> int:
        load = next(h for h in loads if h[3] <= address < h[3] + h[5])
        return int(load[2] + address - load[3])

    _, _, dynamic_offset, dynamic_address, _, dynamic_size, _, _ = dynamic
    entries = [
        _DYNAMIC_ENTRY.unpack_from(data, dynamic_offset + i * _DYNAMIC_ENTRY.size)
        for i in range(dynamic_size // _DYNAMIC_ENTRY.size)
    ]
    strings = offset_of(dict(entries)[_DT_STRTAB])
    runpath_index = data.index(runpath + b"\0", strings) - strings
    start = dynamic_address - dynamic_address % _PAGE
    end = -(-(dynamic_address + dynamic_size) // _PAGE) * _PAGE
    holder = next(h for h in loads if h[3] <= dynamic_address < h[3] + h[5])
    first = holder[2] - (holder[3] - start)
    copy = bytearray(data[first : first + end - start].ljust(end - start, b"\0"))
    # What the holder leaves to zero-fill (its bss) stays zero in the copy.
    file_end = min(holder[3] + holder[4] - start, len(copy))
    copy[file_end:] = bytes(len(copy) - file_end)
    debug = next(i for i, (tag, _) in enumerate(entries) if tag == _DT_DEBUG)
    _DYNAMIC_ENTRY.pack_into(
        copy,
        dynamic_address - start + debug * _DYNAMIC_ENTRY.size,
        _DT_RUNPATH,
        runpath_index,
    )
    data.extend(bytes(-len(data) % _PAGE))
    copy_offset = len(data)
    data.extend(copy)
    _PROGRAM_HEADER.pack_into(
        data,
        phoff + note * phentsize,
        _PT_LOAD,
        6,  # PF_R | PF_W
        copy_offset,
        start,
        start,
        len(copy),
        len(copy),
        _PAGE,
    )
    return bytes(data)


def test_a_later_mapping_of_a_dynamic_section_with_a_runpath_is_refused_unrun(
    tmp_path: Path,
) -> None:
    plain = _compile(tmp_path, "plain")
    probe = tmp_path / "probe"
    probe.write_bytes(_with_a_later_mapping_of_a_dynamic_copy(plain, b"GLIBC_2.2.5"))
    probe.chmod(0o755)
    # The kernel maps the copy last, and ld.so reads the DT_RUNPATH in it:
    # a relative directory, looked up from wherever the probe runs.
    ran = subprocess.run(
        [str(probe)], capture_output=True, check=True, cwd=tmp_path, env={"LD_DEBUG": "libs"}
    )
    assert ran.stdout == b"{}\n"
    assert b"RUNPATH from file" in ran.stderr
    code, facts = _pinned_code(probe)
    assert code == "PROBE_PIN_LOADER_UNTRUSTED"
    assert facts is not None
    assert "overlap" in facts


_DT_AUDIT = 0x6FFFFEFC
_ELF_TYPES = {2: "ET_EXEC", 3: "ET_DYN"}


def _with_a_second_mapping_of_the_headers(binary: Path, audit: bytes) -> bytes:
    """``binary`` (ELF64, little-endian, its first PT_LOAD mapping offset 0 at
    ``base``) with one PT_NOTE turned into a last PT_LOAD that maps the whole
    file again, from offset 0, at a higher address.

    The kernel takes ``AT_PHDR`` from that last mapping of the program
    headers, so ld.so's load bias is off by the distance between the two
    mappings and it reads PT_DYNAMIC at file offset ``p_vaddr - base`` of the
    copy: a hidden dynamic section there (the real one with DT_DEBUG turned
    into DT_AUDIT of ``audit``) is what ld.so reads. The section headers go
    (nothing loads them), so the file ends where the hidden section does.
    """
    data = bytearray(binary.read_bytes())
    (phoff,) = struct.unpack_from("<Q", data, 32)
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    headers = [_PROGRAM_HEADER.unpack_from(data, phoff + i * phentsize) for i in range(phnum)]
    loads = [header for header in headers if header[0] == _PT_LOAD]
    _, _, dynamic_offset, dynamic_address, _, dynamic_size, _, _ = next(
        header for header in headers if header[0] == _PT_DYNAMIC
    )
    note = max(index for index, header in enumerate(headers) if header[0] == _PT_NOTE)
    base = loads[0][3]
    del data[max(load[2] + load[5] for load in loads) :]
    struct.pack_into("<Q", data, 40, 0)  # e_shoff
    struct.pack_into("<HHH", data, 58, 0, 0, 0)  # e_shentsize, e_shnum, e_shstrndx
    hidden = dynamic_address - base
    assert hidden >= len(data), "the hidden section would lie over the file's own bytes"
    data.extend(bytes(hidden - len(data)))
    entries = [
        _DYNAMIC_ENTRY.unpack_from(data, dynamic_offset + i * _DYNAMIC_ENTRY.size)
        for i in range(dynamic_size // _DYNAMIC_ENTRY.size)
    ]
    strings = dict(entries)[_DT_STRTAB] - base
    audit_at = hidden + len(entries) * _DYNAMIC_ENTRY.size
    for tag, value in entries:
        if tag == _DT_DEBUG:
            tag, value = _DT_AUDIT, audit_at - strings
        data.extend(_DYNAMIC_ENTRY.pack(tag, value))
    data.extend(audit + b"\0")
    last = loads[-1]
    copy_address = -(-(last[3] + last[6]) // _PAGE) * _PAGE + _PAGE
    size = len(data)
    header = (_PT_LOAD, 6, 0, copy_address, copy_address, size, size, _PAGE)  # PF_R | PF_W
    _PROGRAM_HEADER.pack_into(data, phoff + note * phentsize, *header)
    return bytes(data)


@pytest.mark.parametrize("position", ["-no-pie", "-pie"])
def test_a_second_mapping_of_the_program_headers_is_refused_unrun(
    position: str, tmp_path: Path
) -> None:
    marker, library = _shared_audit_library(tmp_path)
    plain = _compile(tmp_path, "plain", position)
    probe = tmp_path / "probe"
    probe.write_bytes(_with_a_second_mapping_of_the_headers(plain, os.fsencode(library)))
    probe.chmod(0o755)
    kind = _ELF_TYPES[struct.unpack_from("<H", probe.read_bytes(), 16)[0]]
    assert kind == ("ET_EXEC" if position == "-no-pie" else "ET_DYN")
    # readelf shows no DT_AUDIT (it reads the file's own dynamic section),
    # yet ld.so runs the audit library (the program then crashes: its
    # relocations went to the copy).
    readelf = shutil.which("readelf")
    assert readelf is not None, "binutils' readelf is needed"
    dynamic = subprocess.run([readelf, "-dW", str(probe)], capture_output=True, check=True)
    assert b"AUDIT" not in dynamic.stdout
    subprocess.run([str(probe)], capture_output=True, check=False, cwd=tmp_path)
    assert marker.read_text() == "audited\n"
    marker.unlink()
    code, facts = _pinned_code(probe)
    assert code == "PROBE_PIN_LOADER_UNTRUSTED", kind
    assert facts is not None
    assert "a second loadable segment of the pinned ELF maps its program headers again" in facts
    done = run_cli("pin-probe", str(probe), cwd=tmp_path)
    assert done.returncode == 1
    assert "PROBE_PIN_LOADER_UNTRUSTED" in done.stderr
    assert "Traceback" not in done.stderr
    assert not marker.exists()


_PT_NULL, _PT_PHDR = 0, 6


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("no-phdr", "the pinned ELF has PT_INTERP but no PT_PHDR"),
        ("phdr-elsewhere", "the pinned ELF's PT_PHDR does not name its program headers"),
    ],
)
def test_a_pt_phdr_that_does_not_name_the_headers_is_refused(
    change: str, said: str, tmp_path: Path
) -> None:
    data = bytearray(_compile(tmp_path, "plain").read_bytes())
    (phoff,) = struct.unpack_from("<Q", data, 32)
    header = list(_PROGRAM_HEADER.unpack_from(data, phoff))
    assert header[0] == _PT_PHDR  # gcc's first program header
    if change == "no-phdr":
        header[0] = _PT_NULL
    else:
        header[3] += 8  # p_vaddr: ld.so's load bias would be off by 8
        header[4] += 8
    _PROGRAM_HEADER.pack_into(data, phoff, *header)
    probe = tmp_path / "probe"
    probe.write_bytes(bytes(data))
    probe.chmod(0o755)
    code, facts = _pinned_code(probe)
    assert (code, facts) == ("PROBE_PIN_LOADER_UNTRUSTED", said)


@pytest.fixture
def other_mount_namespace() -> Iterator[int]:
    """The pid of a root-owned process in a private mount namespace of its own."""
    unshare, sleep = shutil.which("unshare"), shutil.which("sleep")
    assert unshare is not None, "util-linux's unshare is needed"
    assert sleep is not None, "coreutils' sleep is needed"
    process = subprocess.Popen(
        [unshare, "-m", "--propagation", "private", sleep, "600"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    try:
        # unshare execs sleep once the namespace exists: wait for that exec.
        deadline = time.monotonic() + BOUND_SECONDS
        while Path(f"/proc/{process.pid}/comm").read_text().strip() != "sleep":
            assert time.monotonic() < deadline, "unshare never started sleep"
            time.sleep(0.01)
        yield process.pid
    finally:
        process.kill()
        process.wait()


def test_an_interpreter_through_another_processes_root_is_refused_unrun(
    tmp_path: Path, other_mount_namespace: int
) -> None:
    # /proc/PID/root reads as "/", but the kernel follows the link itself,
    # into that process's mount namespace, where anything may lie there.
    namespace = os.readlink(f"/proc/{other_mount_namespace}/ns/mnt")
    assert namespace != os.readlink("/proc/self/ns/mnt")
    interpreter = f"/proc/{other_mount_namespace}/root{SYSTEM_INTERPRETER}"
    probe = _compile(tmp_path, "probe", f"-Wl,--dynamic-linker={interpreter}")
    assert subprocess.run([str(probe)], capture_output=True, check=True).stdout == b"{}\n"
    code, facts = _pinned_code(probe)
    assert code == "PROBE_PIN_LOADER_UNTRUSTED"
    assert facts is not None
    assert "/proc" in facts


@pytest.mark.parametrize(
    "interpreter",
    [
        "//lib64/ld-linux-x86-64.so.2",
        "/lib64/./ld-linux-x86-64.so.2",
        "/lib64/../lib64/ld-linux-x86-64.so.2",
        "/proc/self/root/lib64/ld-linux-x86-64.so.2",
        "/dev/fd/../../lib64/ld-linux-x86-64.so.2",
        "lib64/ld-linux-x86-64.so.2",
    ],
)
def test_an_interpreter_named_by_no_plain_canonical_path_is_refused(
    interpreter: str, tmp_path: Path
) -> None:
    probe = _compile(tmp_path, "probe", f"-Wl,--dynamic-linker={interpreter}")
    code, _ = _pinned_code(probe)
    assert code == "PROBE_PIN_LOADER_UNTRUSTED"


def test_a_link_into_proc_on_the_interpreters_path_is_refused(
    tmp_path: Path, root_only_directory: Path
) -> None:
    link = root_only_directory / "root"
    link.symlink_to("/proc/self/root")
    probe = _compile(tmp_path, "probe", f"-Wl,--dynamic-linker={link}{SYSTEM_INTERPRETER}")
    code, facts = _pinned_code(probe)
    assert code == "PROBE_PIN_LOADER_UNTRUSTED"
    assert facts is not None
    assert "rule `location`" in facts


def test_a_dynamic_tag_no_ordinary_program_carries_is_refused(tmp_path: Path) -> None:
    probe = _compile(tmp_path, "probe", "-Wl,-soname,libprobe.so")
    code, facts = _pinned_code(probe)
    assert code == "PROBE_PIN_LOADER_UNTRUSTED"
    assert facts is not None
    assert "DT_SONAME" in facts


def test_mutated_headers_are_refused_or_accepted_never_a_traceback(tmp_path: Path) -> None:
    from rextio_device_cuda import _pinned_loader

    plain = _compile(tmp_path, "plain").read_bytes()
    generator = random.Random(27)
    outcomes: set[str] = set()
    for _ in range(FUZZ_ROUNDS):
        mutated = bytearray(plain)
        for _ in range(generator.randint(1, 8)):
            # The headers and the dynamic section's neighbourhood, where the check reads.
            mutated[generator.randrange(min(len(plain), 0x4000))] = generator.randrange(256)
        path = tmp_path / "mutated"
        path.write_bytes(bytes(mutated))
        descriptor = os.open(path, os.O_RDONLY)
        try:
            _pinned_loader.check_loader(descriptor)
            outcomes.add("accepted")
        except CudaProbeError as error:
            outcomes.add(error.reason_code)
        finally:
            os.close(descriptor)
    assert outcomes == {"accepted", "PROBE_PIN_LOADER_UNTRUSTED"}


# -- messages that say what is true ----------------------------------------------------

_NOEXEC_CHILD = r"""
import json, shutil, subprocess, sys
subprocess.run(["mount", "-t", "tmpfs", "-o", "noexec", "tmpfs", sys.argv[2]], check=True)
probe = shutil.copy2(sys.argv[1], sys.argv[2])
from rextio_device_cuda.probe import CudaProbeError, SubprocessProbeRunner
try:
    SubprocessProbeRunner(probe).run()
    print(json.dumps([None, None]))
except CudaProbeError as error:
    print(json.dumps([error.reason_code, error.facts]))
"""


def test_a_probe_on_a_noexec_mount_is_said_to_be_there(
    probes: ProbeFactory, tmp_path: Path
) -> None:
    mount_point = tmp_path / "noexec"
    mount_point.mkdir()
    probe = probes.printing(report())
    unshare = shutil.which("unshare")
    assert unshare is not None, "util-linux unshare is needed"
    argv = [unshare, "--mount", "--propagation", "private", sys.executable, "-I", "-c"]
    done = subprocess.run(
        [*argv, _NOEXEC_CHILD, str(probe), str(mount_point)],
        capture_output=True,
        text=True,
        timeout=BOUND_SECONDS,
        check=True,
    )
    code, facts = json.loads(done.stdout)
    assert code == "PROBE_NOT_EXECUTABLE"
    assert "mounted noexec" in facts
    assert "mode" not in facts


def test_a_path_with_a_lone_surrogate_is_said_to_hold_one(tmp_path: Path) -> None:
    with pytest.raises(CudaProbeError) as caught:
        SubprocessProbeRunner(tmp_path / "probe\ud800").run()
    assert caught.value.reason_code == "PROBE_NOT_FOUND"
    assert caught.value.facts is not None
    assert "lone surrogate" in caught.value.facts
    assert "NUL" not in caught.value.facts


def test_a_digest_mismatch_shows_both_digests_in_full(probes: ProbeFactory) -> None:
    probe = probes.binary(report())
    with pytest.raises(CudaProbeError) as caught:
        SubprocessProbeRunner(probe, probe_sha256=WRONG_PIN).run()
    assert caught.value.reason_code == "PROBE_DIGEST_MISMATCH"
    assert caught.value.facts == f"the file's SHA-256 is {_digest(probe)}; the pin is {WRONG_PIN}"
