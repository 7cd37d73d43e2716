"""The Device Provider API 1 object Rextio Core loads through the entry point."""

from __future__ import annotations

from typing import Final

from rextio.devices import (
    DeviceBuildContribution,
    DevicePreflightRequest,
    DevicePreflightResult,
    DevicePreflightStatus,
    DeviceProviderError,
    DeviceProviderManifest,
)

from rextio_device_cuda import _declarations, _preflight_checks
from rextio_device_cuda._errors import CudaProbeError
from rextio_device_cuda._provider_spec import CAPABILITIES, PROVIDER_SPEC, FrameworkLaneSpec
from rextio_device_cuda._ready_state import ReadyState, request_fingerprint
from rextio_device_cuda._report import expected_probe_target
from rextio_device_cuda._runner import SubprocessProbeRunner
from rextio_device_cuda.config import CUDA_DRIVER_VERSION_FLOOR, CudaProviderConfig
from rextio_device_cuda.probe import FilesystemToolkitInspector, ProbeRunner, ToolkitInspector

# 0.1.0's public names, then this version's additions.
__all__ = [
    "CAPABILITY_IDS",
    "CAPABILITY_LIBTORCH_LINUX_X86_64",
    "CAPABILITY_LINUX_AARCH64",
    "CAPABILITY_LINUX_X86_64",
    "CAPABILITY_TENSORFLOW_TFE_LINUX_X86_64",
    "CAPABILITY_WINDOWS_X86_64",
    "CPYTHON_VERSION",
    "CUDA_DRIVER_VERSION_FLOOR",
    "LIBTORCH_RUNTIME",
    "LIBTORCH_VERSION",
    "PROVIDER_ID",
    "TCH_VERSION",
    "TENSORFLOW_TFE_RUNTIME",
    "TENSORFLOW_VERSION",
    "CudaDeviceProvider",
    "CudaProbeError",
    "CudaProviderConfig",
    "FilesystemToolkitInspector",
    "ProbeRunner",
    "SubprocessProbeRunner",
    "ToolkitInspector",
    "__version__",
    "expected_probe_target",
    "provider",
]

__version__: Final[str] = PROVIDER_SPEC.distribution.version
PROVIDER_ID: Final[str] = PROVIDER_SPEC.manifest.provider_id


def _capability_id(capability_id: str) -> str:
    if capability_id not in CAPABILITIES:
        raise KeyError(f"capability {capability_id} is not in the provider spec")
    return capability_id


CAPABILITY_LINUX_X86_64: Final = _capability_id("cuda-linux-x86_64")
CAPABILITY_LINUX_AARCH64: Final = _capability_id("cuda-linux-aarch64")
CAPABILITY_WINDOWS_X86_64: Final = _capability_id("cuda-windows-x86_64")
CAPABILITY_LIBTORCH_LINUX_X86_64: Final = _capability_id("cuda-libtorch-linux-x86_64")
CAPABILITY_TENSORFLOW_TFE_LINUX_X86_64: Final = _capability_id(
    "cuda-tensorflow-tfe-linux-x86_64"
)
CAPABILITY_IDS: Final[tuple[str, ...]] = tuple(sorted(CAPABILITIES))


def _framework_lane(capability_id: str) -> FrameworkLaneSpec:
    lane = PROVIDER_SPEC.lanes[CAPABILITIES[capability_id].lane]
    if not isinstance(lane, FrameworkLaneSpec):
        raise KeyError(f"capability {capability_id} declares no framework requirement")
    return lane


def _lane_runtime(capability_id: str) -> str:
    return _framework_lane(capability_id).requirement.runtime


def _pin_version(capability_id: str, name: str) -> str:
    for pin in _framework_lane(capability_id).runtime_pins:
        if pin.name == name:
            return pin.version
    raise KeyError(f"capability {capability_id} pins no {name}")


# The framework lanes' pins, as 0.1.0 named them; the values live in the spec.
LIBTORCH_RUNTIME: Final[str] = _lane_runtime(CAPABILITY_LIBTORCH_LINUX_X86_64)
LIBTORCH_VERSION: Final[str] = _pin_version(CAPABILITY_LIBTORCH_LINUX_X86_64, "libtorch")
TCH_VERSION: Final[str] = _pin_version(CAPABILITY_LIBTORCH_LINUX_X86_64, "tch")
TENSORFLOW_TFE_RUNTIME: Final[str] = _lane_runtime(CAPABILITY_TENSORFLOW_TFE_LINUX_X86_64)
TENSORFLOW_VERSION: Final[str] = _pin_version(
    CAPABILITY_TENSORFLOW_TFE_LINUX_X86_64, "tensorflow"
)
CPYTHON_VERSION: Final[str] = _pin_version(CAPABILITY_TENSORFLOW_TFE_LINUX_X86_64, "cpython")


# Core reports a refusal only by its status; these lines, path-free, tell the
# person running `rextio generate` which code it was and how to learn more.
# Only a refusal logs: a ready preflight never loads logging or the texts.
def _log_refusal(refusal: _preflight_checks.Refusal) -> None:
    import logging

    from rextio_device_cuda import _refusal_text

    logger = logging.getLogger(__package__)
    if not logger.isEnabledFor(logging.WARNING):
        return
    logger.warning("%s", _refusal_text.RefusalLine(refusal))


class _Claim:
    """One preflight's place in the ready state.

    It begins (taking a generation, revoking earlier successes of the same
    fingerprint) once a probe has started, or else when the checks refused
    without a probe; always before ``finish``.
    """

    def __init__(self, ready: ReadyState, fingerprint: str) -> None:
        self._ready = ready
        self._fingerprint = fingerprint
        self._begun: tuple[str, int] | None = None

    def begin(self) -> None:
        """Take a generation for the request's fingerprint (once)."""
        if self._begun is None:
            self._begun = (self._fingerprint, self._ready.begin(self._fingerprint))

    def finish(self, *, ready: bool) -> None:
        """Record the outcome under the generation taken by ``begin``."""
        if self._begun is None:
            raise RuntimeError("a preflight claim finished before it began")
        fingerprint, generation = self._begun
        self._ready.finish(fingerprint, generation, ready=ready)


class CudaDeviceProvider:
    """NVIDIA CUDA provider: passive manifest, explicit preflight, declarative inputs."""

    def __init__(
        self,
        config: CudaProviderConfig | None = None,
        *,
        probe_runner: ProbeRunner | None = None,
        toolkit_inspector: ToolkitInspector | None = None,
    ) -> None:
        if config is not None and not isinstance(config, CudaProviderConfig):
            raise TypeError("config must be a CudaProviderConfig or None")
        if probe_runner is not None and not isinstance(probe_runner, ProbeRunner):
            raise TypeError("probe_runner must implement ProbeRunner.run()")
        if toolkit_inspector is not None and not isinstance(toolkit_inspector, ToolkitInspector):
            raise TypeError("toolkit_inspector must implement ToolkitInspector.inspect()")
        self._config = CudaProviderConfig() if config is None else config
        self._probe_runner = probe_runner
        self._toolkit_inspector = toolkit_inspector
        self._ready = ReadyState()

    @property
    def config(self) -> CudaProviderConfig:
        """The constructor configuration (``CudaProviderConfig()`` when none was given)."""
        return self._config

    def manifest(self) -> DeviceProviderManifest:
        """Passive identity and capabilities; never probes the host."""
        return _declarations.provider_manifest()

    def preflight(self, request: DevicePreflightRequest) -> DevicePreflightResult:
        """Run the checks of ``_preflight_checks`` in order; ready only with a fresh probe."""
        result, outcome = self._preflight_outcome(request)
        if isinstance(outcome, _preflight_checks.Refusal):
            _log_refusal(outcome)
        return result

    def _preflight_outcome(
        self, request: DevicePreflightRequest
    ) -> tuple[DevicePreflightResult, _preflight_checks.Refusal | _preflight_checks.Ready]:
        """The preflight result and the checks' outcome behind it (nothing logged)."""
        if not isinstance(request, DevicePreflightRequest):
            raise DeviceProviderError("preflight requires a DevicePreflightRequest")
        fingerprint = request_fingerprint(request)
        claim = _Claim(self._ready, fingerprint)
        outcome: _preflight_checks.Refusal | _preflight_checks.Ready | None = None
        try:
            outcome = _preflight_checks.evaluate(
                request,
                self._config,
                self._probe_runner,
                self._toolkit_inspector,
                on_probe_start=claim.begin,
            )
        finally:
            # Refused before any probe ran: the claim starts (and revokes) here.
            claim.begin()
            claim.finish(ready=isinstance(outcome, _preflight_checks.Ready))
        if isinstance(outcome, _preflight_checks.Refusal):
            refused = DevicePreflightResult(
                provider_id=PROVIDER_ID, status=outcome.status, reason_codes=(outcome.reason_code,)
            )
            return refused, outcome
        ready = DevicePreflightResult(
            provider_id=PROVIDER_ID,
            status=DevicePreflightStatus.READY,
            observations=outcome.observations,
        )
        return ready, outcome

    def build_contribution(self, request: DevicePreflightRequest) -> DeviceBuildContribution:
        """The lane's declarative inputs, only after this request's latest preflight passed."""
        if not isinstance(request, DevicePreflightRequest) or not self._ready.is_ready(
            request_fingerprint(request)
        ):
            raise DeviceProviderError(
                f"{PROVIDER_ID} build_contribution requires successful preflight "
                "of this exact request"
            )
        capability = CAPABILITIES[request.selection.capability_id]
        return _declarations.lane_contribution(capability.lane)


def provider() -> CudaDeviceProvider:
    """Entry-point factory: a provider configured only by request options."""
    return CudaDeviceProvider()

