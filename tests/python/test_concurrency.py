"""Many threads: a contribution is never given for a request whose latest preflight failed."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable

from cuda_support import report, request_for
from rextio.devices import DevicePreflightRequest, DevicePreflightStatus, DeviceProviderError

from rextio_device_cuda import CudaDeviceProvider
from rextio_device_cuda.probe import CudaProbeError, CudaProbeReport, parse_probe_report

GOOD = parse_probe_report(json.dumps(report()).encode())


class FlippingRunner:
    """Succeeds or fails as the calling thread decided before its preflight."""

    def __init__(self) -> None:
        self.current = threading.local()

    def run(self) -> CudaProbeReport:
        if not self.current.healthy:
            raise CudaProbeError("PROBE_TIMEOUT")
        return GOOD


def test_no_contribution_after_a_failed_latest_preflight() -> None:
    runner = FlippingRunner()
    provider = CudaDeviceProvider(probe_runner=runner)
    requests = [
        request_for("cuda-linux-x86_64", {"device_ordinal": "0", "sm": "sm_80"}),
        request_for("cuda-libtorch-linux-x86_64", {"device_ordinal": "0", "sm": "sm_80"}),
        request_for("cuda-tensorflow-tfe-linux-x86_64", {"device_ordinal": "0", "sm": "sm_80"}),
    ]
    # Per request: the outcome of the most recently *started* preflight, and
    # a lock that orders "start preflight + record" against "read latest".
    latest: dict[int, bool] = {}
    order = [threading.Lock() for _ in requests]
    violations: list[str] = []
    contributions = [0]
    barrier = threading.Barrier(12)

    def worker(seed: int) -> Callable[[], None]:
        def loop() -> None:
            rng = random.Random(seed)
            barrier.wait()
            for _ in range(150):
                index = rng.randrange(len(requests))
                request: DevicePreflightRequest = requests[index]
                if rng.random() < 0.3:
                    healthy = rng.random() < 0.6
                    runner.current.healthy = healthy
                    with order[index]:
                        latest[index] = healthy
                        result = provider.preflight(request)
                    assert (result.status is DevicePreflightStatus.READY) is healthy
                else:
                    with order[index]:
                        expected_ready = latest.get(index, False)
                        try:
                            provider.build_contribution(request)
                            granted = True
                        except DeviceProviderError:
                            granted = False
                    if granted:
                        contributions[0] += 1
                    if granted and not expected_ready:
                        violations.append(f"request {index} got a contribution after a failure")
                    if expected_ready and not granted:
                        violations.append(f"request {index} lost a contribution it earned")

        return loop

    threads = [threading.Thread(target=worker(seed)) for seed in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert violations == []
    assert contributions[0] > 0


def test_a_newer_preflight_revokes_an_older_success_while_it_runs() -> None:
    started = threading.Event()
    release = threading.Event()

    class SlowFailingRunner:
        def run(self) -> CudaProbeReport:
            started.set()
            release.wait(5)
            raise CudaProbeError("PROBE_TIMEOUT")

    class QuickRunner:
        def __init__(self) -> None:
            self.slow = False

        def run(self) -> CudaProbeReport:
            if self.slow:
                return SlowFailingRunner().run()
            return GOOD

    runner = QuickRunner()
    provider = CudaDeviceProvider(probe_runner=runner)
    request = request_for("cuda-linux-x86_64", {"device_ordinal": "0", "sm": "sm_80"})
    assert provider.preflight(request).status is DevicePreflightStatus.READY
    provider.build_contribution(request)
    runner.slow = True
    thread = threading.Thread(target=provider.preflight, args=(request,))
    thread.start()
    assert started.wait(5)
    # The lock is not held while the probe runs, and the older success is revoked.
    try:
        provider.build_contribution(request)
        revoked = False
    except DeviceProviderError:
        revoked = True
    release.set()
    thread.join()
    assert revoked
