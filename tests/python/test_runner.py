"""Hostile probes: each returns its code within timeout + 1 s and leaves nothing running."""

from __future__ import annotations

import sys
import time
import uuid

import pytest
from cuda_support import ProbeFactory, processes_with

from rextio_device_cuda.probe import CudaProbeError, SubprocessProbeRunner

TIMEOUT = 1.0


def _run(probe_body: str, probes: ProbeFactory) -> tuple[str, float, str]:
    tag = f"rextio-hostile-{uuid.uuid4().hex}"
    path = probes.shell(probe_body.replace("TAG", tag), name=tag)
    runner = SubprocessProbeRunner(path, timeout_seconds=TIMEOUT)
    started = time.monotonic()
    with pytest.raises(CudaProbeError) as caught:
        runner.run()
    return caught.value.reason_code, time.monotonic() - started, tag


# A process that sleeps with TAG in its argv (sleep(1) would reject the tag).
SLEEPER = f"{sys.executable} -c 'import time; time.sleep(30)' TAG"

HOSTILE = [
    ("hang", "exec sleep 30 # TAG", "PROBE_TIMEOUT"),
    ("flood", "exec yes TAG", "PROBE_OUTPUT_TOO_LARGE"),
    ("nonzero", "echo '{}' # TAG\nexit 7", "PROBE_EXIT_NONZERO"),
    ("invalid-utf8", "printf '\\377\\376 TAG'", "PROBE_OUTPUT_INVALID"),
    ("exit-before-writing", "exit 0 # TAG", "PROBE_OUTPUT_INVALID"),
    # The child exits at once; a grandchild keeps stdout open for 30 s.
    ("grandchild-holds-stdout", f"{SLEEPER} &\nexit 0", "PROBE_TIMEOUT"),
    ("grandchild-after-output", f"{SLEEPER} &\necho '{{}}'", "PROBE_TIMEOUT"),
]


@pytest.mark.parametrize(
    ("body", "code"), [(b, c) for _, b, c in HOSTILE], ids=[h[0] for h in HOSTILE]
)
def test_hostile_probe(body: str, code: str, probes: ProbeFactory) -> None:
    reason, elapsed, tag = _run(body, probes)
    assert reason == code
    assert elapsed < TIMEOUT + 1.0
    assert processes_with(tag) == []


def test_grandchild_is_killed_even_after_a_clean_exit(probes: ProbeFactory) -> None:
    # Output complete and exit 0, stdout closed by the grandchild: still reaped.
    tag = f"rextio-bg-{uuid.uuid4().hex}"
    sleeper = SLEEPER.replace("TAG", tag)
    body = f"{sleeper} >/dev/null 2>&1 &\nprintf '%s' 'not json'\n"
    path = probes.shell(body, name=tag)
    with pytest.raises(CudaProbeError) as caught:
        SubprocessProbeRunner(path, timeout_seconds=TIMEOUT).run()
    assert caught.value.reason_code == "PROBE_OUTPUT_INVALID"
    assert processes_with(tag) == []


def test_probe_gets_an_empty_environment_and_no_path(probes: ProbeFactory) -> None:
    # The shell's initial environment is exactly what the runner passed.
    path = probes.shell("printf 'env:'\ncat /proc/$$/environ\n")
    output = SubprocessProbeRunner(path).read_output()
    assert output == b"env:"


@pytest.mark.parametrize("timeout", [0, -1, 60.5, float("nan"), True, "5"])
def test_timeout_bounds(timeout: object, probes: ProbeFactory) -> None:
    with pytest.raises(ValueError, match="timeout_seconds"):
        SubprocessProbeRunner(probes.directory, timeout_seconds=timeout)  # type: ignore[arg-type]


@pytest.mark.parametrize("argument", ["", "a\0b", "x" * 4097])
def test_argument_bounds(argument: str, probes: ProbeFactory) -> None:
    with pytest.raises(ValueError, match="argument"):
        SubprocessProbeRunner(probes.directory, arguments=(argument,))


def test_executable_must_be_a_path() -> None:
    with pytest.raises(TypeError):
        SubprocessProbeRunner(42)  # type: ignore[arg-type]
