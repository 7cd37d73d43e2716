"""Preflight latency through the provider versus the bare probe spawn (run by xtask bench).

Usage: python preflight_bench.py (compiles its fast fixture probe with ``$CC`` or ``cc``)
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rextio.artifacts.models import DeviceRequirement
from rextio.artifacts.profiles import rust_crate_profile
from rextio.devices import DevicePreflightRequest, DeviceProviderOptions, DeviceProviderSelection

ROUNDS = 400

# A fast fixture probe: prints one fixed valid report and exits 0.
FAST_PROBE_C = r"""#include <stdio.h>
int main(void) {
    fputs("{\"schema_version\":\"1\",\"probe\":\"rextio-cuda-driver-probe\",\"support_claim\":false,"
          "\"target\":{\"os\":\"linux\",\"arch\":\"x86_64\",\"environment\":\"gnu\"},"
          "\"platform_supported\":true,\"status\":\"probe-complete\",\"reason_code\":null,"
          "\"driver_loaded\":true,\"driver_version\":12080,\"device_count\":1,\"cuda_result\":0,"
          "\"devices\":[{\"ordinal\":0,\"name\":\"Bench GPU\",\"compute_major\":8,"
          "\"compute_minor\":0,\"sm\":\"sm_80\"}]}\n", stdout);
    return 0;
}
"""

# The least any containment through another process costs: a standard-library
# relay that receives the stdout pipe, posix_spawns the probe, waits for it
# and answers its status (no subreaper, no sweep, no checks).
_RELAY = """
import json, os, socket, sys
channel = socket.socket(fileno=int(sys.argv[1]))
while True:
    message, fds, _, _ = socket.recv_fds(channel, 4096, 1)
    if not message:
        break
    argv = json.loads(message)
    actions = [(os.POSIX_SPAWN_DUP2, fds[0], 1)]
    pid = os.posix_spawn(argv[0], argv, {}, file_actions=actions, setsid=True)
    os.close(fds[0])
    channel.send(str(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])).encode())
"""


class _Relay:
    """A running relay process and the host's end of its socket."""

    def __init__(self) -> None:
        self.channel, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _RELAY, str(child.fileno())],
            pass_fds=(child.fileno(),),
        )
        child.close()

    def run(self, probe: Path) -> None:
        read_end, write_end = os.pipe()
        socket.send_fds(self.channel, [json.dumps([str(probe)]).encode()], [write_end])
        os.close(write_end)
        while os.read(read_end, 65536):
            pass
        os.close(read_end)
        if self.channel.recv(16) != b"0":
            raise RuntimeError("the relayed probe failed")

    def close(self) -> None:
        self.channel.close()
        self.process.wait()


def _interleaved_medians(*actions: Callable[[], object], rounds: int = ROUNDS) -> list[float]:
    """Median seconds of each action, sampled in turn so load drift hits all."""
    samples: list[list[float]] = [[] for _ in actions]
    for _ in range(rounds):
        for action, taken in zip(actions, samples, strict=True):
            started = time.perf_counter()
            action()
            taken.append(time.perf_counter() - started)
    return [statistics.median(taken) for taken in samples]


def _hash_cost(size: int, directory: Path) -> float:
    """Median seconds to hash a ``size``-byte file from an open descriptor."""
    from rextio_device_cuda._runner import sha256_of_descriptor

    path = directory / "hash-sample"
    path.write_bytes(os.urandom(size))
    descriptor = os.open(path, os.O_RDONLY)
    try:
        taken = []
        for _ in range(50):
            started = time.perf_counter()
            sha256_of_descriptor(descriptor)
            taken.append(time.perf_counter() - started)
        return statistics.median(taken)
    finally:
        os.close(descriptor)


def _request(probe: Path, **extra: str) -> DevicePreflightRequest:
    options = {"device_ordinal": "0", "probe_executable": str(probe), "sm": "sm_80", **extra}
    return DevicePreflightRequest(
        artifact_profile=rust_crate_profile(
            "x86_64-unknown-linux-gnu",
            device_requirements=(
                DeviceRequirement(
                    "cuda:0", "cuda", "cuda-driver", ("driver-api",), (), ("device",), ("sm_80",)
                ),
            ),
        ),
        selection=DeviceProviderSelection("rextio-device-cuda", "cuda-linux-x86_64"),
        options=DeviceProviderOptions(tuple(sorted(options.items()))),
    )


def main(probe: Path) -> None:
    import_samples = []
    for _ in range(10):
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                "import time; t = time.perf_counter(); import rextio_device_cuda; "
                "print(time.perf_counter() - t)",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        import_samples.append(float(done.stdout))
    from rextio_device_cuda import CudaDeviceProvider

    request = _request(probe)
    pinned = _request(probe, probe_sha256=hashlib.sha256(probe.read_bytes()).hexdigest())
    provider = CudaDeviceProvider()
    assert provider.preflight(request).status.value == "ready"
    assert provider.preflight(pinned).status.value == "ready"

    def floor() -> None:
        # Just spawn the probe and read it, with the process isolation the
        # provider's runner uses (own session, empty env, no PATH lookup,
        # stdin/stderr /dev/null, close_fds): like is compared with like.
        subprocess.run(
            [str(probe)],
            executable=str(probe),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={},
            close_fds=True,
            start_new_session=True,
            check=True,
        )

    from rextio_device_cuda import _contained

    supervised = _contained.start_supervised

    def unsupervised() -> None:
        # The same preflight with the probe spawned directly: only its
        # process group contained (what a host without supervisors gets).
        _contained.start_supervised = lambda *_: None
        try:
            provider.preflight(request)
        finally:
            _contained.start_supervised = supervised

    relay = _Relay()
    try:
        floor_s, relay_s, preflight_s, pinned_s, unsupervised_s = _interleaved_medians(
            floor,
            lambda: relay.run(probe),
            lambda: provider.preflight(request),
            lambda: provider.preflight(pinned),
            unsupervised,
        )
    finally:
        relay.close()
    print(
        f"probe spawn+read floor (median of {ROUNDS}, interleaved; runner's isolation flags: "
        f"start_new_session, env={{}}, close_fds, stdin/stderr DEVNULL): {floor_s * 1e3:.3f} ms"
    )
    print(
        f"relay floor            (median of {ROUNDS}, the probe spawned by a minimal "
        f"helper process, the least any containment through a supervisor costs): "
        f"{relay_s * 1e3:.3f} ms"
    )
    print(f"provider preflight     (median of {ROUNDS}): {preflight_s * 1e3:.3f} ms")
    print(f"pinned preflight       (median of {ROUNDS}, probe_sha256): {pinned_s * 1e3:.3f} ms")
    print(
        f"unsupervised preflight (median of {ROUNDS}, probe spawned directly, "
        f"process group only): {unsupervised_s * 1e3:.3f} ms"
    )
    print(f"ratio preflight/floor: {preflight_s / floor_s:.2f} (target <= 1.3)")
    print(f"ratio unsupervised preflight/floor: {unsupervised_s / floor_s:.2f}")
    print(f"ratio relay floor/floor: {relay_s / floor_s:.2f}")
    print(f"ratio pinned preflight/floor: {pinned_s / floor_s:.2f} (target <= 1.3)")
    size = 512 * 1024
    print(
        f"sha256 of a {size // 1024} KiB file from its descriptor (a release probe's size, "
        f"median of 50): {_hash_cost(size, probe.parent) * 1e3:.3f} ms"
    )
    print(
        f"import rextio_device_cuda (median of 10 fresh interpreters): "
        f"{statistics.median(import_samples) * 1e3:.1f} ms"
    )


def _fast_probe(directory: Path) -> Path:
    source, probe = directory / "fast_probe.c", directory / "fast-probe"
    source.write_text(FAST_PROBE_C, encoding="utf-8")
    compiler = os.environ.get("CC", "cc")
    subprocess.run([compiler, "-O2", "-o", str(probe), str(source)], check=True, timeout=120)
    return probe


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="rextio-preflight-bench-") as scratch:
        main(_fast_probe(Path(scratch).resolve()))
