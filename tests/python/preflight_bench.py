"""Preflight latency through the provider versus the bare probe spawn (run by xtask bench).

Usage: python preflight_bench.py /abs/path/to/fast-probe
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from rextio.artifacts.models import DeviceRequirement
from rextio.artifacts.profiles import rust_crate_profile
from rextio.devices import DevicePreflightRequest, DeviceProviderOptions, DeviceProviderSelection

ROUNDS = 400


def _interleaved_medians(
    first: Callable[[], object], second: Callable[[], object], rounds: int = ROUNDS
) -> tuple[float, float]:
    """Median seconds of each action, sampled alternately so load drift hits both."""
    first_samples = []
    second_samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        first()
        first_samples.append(time.perf_counter() - started)
        started = time.perf_counter()
        second()
        second_samples.append(time.perf_counter() - started)
    return statistics.median(first_samples), statistics.median(second_samples)


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

    request = DevicePreflightRequest(
        artifact_profile=rust_crate_profile(
            "x86_64-unknown-linux-gnu",
            device_requirements=(
                DeviceRequirement(
                    "cuda:0", "cuda", "cuda-driver", ("driver-api",), (), ("device",), ("sm_80",)
                ),
            ),
        ),
        selection=DeviceProviderSelection("rextio-device-cuda", "cuda-linux-x86_64"),
        options=DeviceProviderOptions(
            (("device_ordinal", "0"), ("probe_executable", str(probe)), ("sm", "sm_80"))
        ),
    )
    provider = CudaDeviceProvider()
    assert provider.preflight(request).status.value == "ready"

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

    floor_s, preflight_s = _interleaved_medians(floor, lambda: provider.preflight(request))
    print(
        f"probe spawn+read floor (median of {ROUNDS}, interleaved; runner's isolation flags: "
        f"start_new_session, env={{}}, close_fds, stdin/stderr DEVNULL): {floor_s * 1e3:.3f} ms"
    )
    print(f"provider preflight     (median of {ROUNDS}): {preflight_s * 1e3:.3f} ms")
    print(f"ratio preflight/floor: {preflight_s / floor_s:.2f} (target <= 1.3)")
    print(
        f"import rextio_device_cuda (median of 10 fresh interpreters): "
        f"{statistics.median(import_samples) * 1e3:.1f} ms"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
