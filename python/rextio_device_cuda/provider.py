"""The Device Provider API 1 object Rextio Core loads through the entry point."""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import TYPE_CHECKING, Final

from rextio.devices import (
    DeviceBuildContribution,
    DevicePreflightRequest,
    DevicePreflightResult,
    DevicePreflightStatus,
    DeviceProviderError,
    DeviceProviderManifest,
)

from rextio_device_cuda import _preflight_checks
from rextio_device_cuda._errors import CudaProbeError
from rextio_device_cuda._provider_spec import CAPABILITIES, PROVIDER_SPEC, FrameworkLaneSpec
from rextio_device_cuda._ready_state import ReadyState, request_fingerprint
from rextio_device_cuda._runner import SubprocessProbeRunner

if TYPE_CHECKING:
    import logging
    from pathlib import Path

    from rextio_device_cuda._report import expected_probe_target
    from rextio_device_cuda.config import CUDA_DRIVER_VERSION_FLOOR, CudaProviderConfig
    from rextio_device_cuda.probe import FilesystemToolkitInspector, ProbeRunner, ToolkitInspector

# 0.1.0's public names (contract section 1), then this version's additions.
__all__ = [
    "CAPABILITY_IDS",
    "CAPABILITY_LIBTORCH_LINUX_X86_64",
    "CAPABILITY_LINUX_AARCH64",
    "CAPABILITY_LINUX_X86_64",
    "CAPABILITY_TENSORFLOW_TFE_LINUX_X86_64",
    "CAPABILITY_WINDOWS_X86_64",
    "CPYTHON_VERSION",
    "CUDA_DRIVER_VERSION_FLOOR",
    "CUDA_LIBTORCH_LINUX_X86_64",
    "CUDA_LINUX_AARCH64",
    "CUDA_LINUX_X86_64",
    "CUDA_TENSORFLOW_TFE_LINUX_X86_64",
    "CUDA_WINDOWS_X86_64",
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
_PROVIDER_ID: Final = PROVIDER_ID


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
# Earlier names of this rewrite, kept so no import breaks.
CUDA_LINUX_X86_64: Final = CAPABILITY_LINUX_X86_64
CUDA_LINUX_AARCH64: Final = CAPABILITY_LINUX_AARCH64
CUDA_WINDOWS_X86_64: Final = CAPABILITY_WINDOWS_X86_64
CUDA_LIBTORCH_LINUX_X86_64: Final = CAPABILITY_LIBTORCH_LINUX_X86_64
CUDA_TENSORFLOW_TFE_LINUX_X86_64: Final = CAPABILITY_TENSORFLOW_TFE_LINUX_X86_64


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


# 0.1.0's re-exports that a preflight through the entry point never uses
# load when one of them is first used: the public probe module (its
# protocols) and the toolkit inspector, the public report records and the
# configuration (frozen dataclasses, about 0.6 ms each to define).
_LAZY_NAMES: Final = {
    "FilesystemToolkitInspector": "rextio_device_cuda.probe",
    "ProbeRunner": "rextio_device_cuda.probe",
    "ToolkitInspector": "rextio_device_cuda.probe",
    "expected_probe_target": "rextio_device_cuda._report",
    "CudaProviderConfig": "rextio_device_cuda.config",
    "CUDA_DRIVER_VERSION_FLOOR": "rextio_device_cuda.config",
}


def __getattr__(name: str) -> object:
    module = _LAZY_NAMES.get(name)
    if module is not None:
        import importlib

        return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Defaults:
    """``CudaProviderConfig()``'s values, for a provider built without a
    configuration (the entry point's): a preflight reads only these."""

    __slots__ = ()
    probe_path: Final[Path | None] = None
    toolkit_root: Final[Path | None] = None
    device_ordinal: Final[int | None] = None
    sm: Final[str | None] = None
    minimum_driver_version: Final[int] = PROVIDER_SPEC.policy.driver_version_floor
    minimum_toolkit_version: Final[tuple[int, int]] = PROVIDER_SPEC.policy.toolkit_version_floor
    probe_sha256: Final[str | None] = None


_DEFAULTS: Final = _Defaults()
# Guards the one-time build of a default provider's ``config`` record.
_CONFIG_LOCK: Final = threading.Lock()


def refusal_logger() -> logging.Logger:
    """The logger of the refusal lines; ``logging`` loads at the first use."""
    import logging

    return logging.getLogger(__package__)


# Core reports a refusal only by its status; this line, path-free, tells the
# person running `rextio generate` which code it was and how to learn more.
def _log_refusal(refusal: _preflight_checks.Refusal) -> None:
    import logging  # loaded by refusal_logger() anyway

    logger = refusal_logger()
    if not logger.isEnabledFor(logging.WARNING):
        return
    # Imported here: the texts and CUDA result names serve refusals only.
    from rextio_device_cuda import _refusal_text

    logger.warning(
        "%s",
        _refusal_text.refusal_line(refusal.reason_code, refusal.facts, refusal.cuda_result),
    )


# Core validates and canonicalizes every DevicePreflightResult it is handed
# (a path parse per observation); the records are frozen, so an outcome seen
# before reuses its already validated record. Bounded: outcomes vary only in
# a few probe facts.
_RESULT_CACHE_SIZE: Final[int] = 256
# Requests whose steps 1-12 a provider keeps (CudaDeviceProvider._prepared_checks).
_PREPARED_SIZE: Final[int] = 64


@lru_cache(maxsize=_RESULT_CACHE_SIZE)
def _refusal_result(status: DevicePreflightStatus, reason_code: str) -> DevicePreflightResult:
    return DevicePreflightResult(
        provider_id=_PROVIDER_ID, status=status, reason_codes=(reason_code,)
    )


@lru_cache(maxsize=_RESULT_CACHE_SIZE)
def _ready_result(observations: tuple[tuple[str, str], ...]) -> DevicePreflightResult:
    return DevicePreflightResult(
        provider_id=_PROVIDER_ID,
        status=DevicePreflightStatus.READY,
        observations=observations,
    )


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
        if config is not None:
            from rextio_device_cuda.config import CudaProviderConfig

            if not isinstance(config, CudaProviderConfig):
                raise TypeError("config must be a CudaProviderConfig or None")
        if probe_runner is not None or toolkit_inspector is not None:
            from rextio_device_cuda.probe import ProbeRunner, ToolkitInspector

            if probe_runner is not None and not isinstance(probe_runner, ProbeRunner):
                raise TypeError("probe_runner must implement ProbeRunner.run()")
            if toolkit_inspector is not None and not isinstance(
                toolkit_inspector, ToolkitInspector
            ):
                raise TypeError("toolkit_inspector must implement ToolkitInspector.inspect()")
        self._config = config
        self._settings: CudaProviderConfig | _Defaults = _DEFAULTS if config is None else config
        self._probe_runner = probe_runner
        self._toolkit_inspector = toolkit_inspector
        self._ready = ReadyState()
        # Steps 1-12 of requests seen before (see _prepared).
        self._prepared: dict[
            tuple[str, object], _preflight_checks.Refusal | _preflight_checks.Selection
        ] = {}

    @property
    def config(self) -> CudaProviderConfig:
        """The constructor configuration (``CudaProviderConfig()`` when none was given)."""
        config = self._config
        if config is None:
            from rextio_device_cuda.config import CudaProviderConfig

            with _CONFIG_LOCK:
                config = self._config
                if config is None:  # built once: every read returns the same record
                    config = self._config = CudaProviderConfig()
        return config

    def manifest(self) -> DeviceProviderManifest:
        """Passive identity and capabilities; never probes the host."""
        from rextio_device_cuda import _declarations

        return _declarations.provider_manifest()

    def preflight(self, request: DevicePreflightRequest) -> DevicePreflightResult:
        """Check compatibility in contract order; ready only with a fresh probe."""
        result, refusal = self._preflight_outcome(request)
        if refusal is not None:
            _log_refusal(refusal)
        return result

    def _preflight_outcome(
        self, request: DevicePreflightRequest
    ) -> tuple[DevicePreflightResult, _preflight_checks.Refusal | None]:
        """The preflight result and, when refused, what decided it (nothing logged)."""
        if not isinstance(request, DevicePreflightRequest):
            raise DeviceProviderError("preflight requires a DevicePreflightRequest")
        fingerprint = request_fingerprint(request)
        claim = _Claim(self._ready, fingerprint)
        outcome: _preflight_checks.Refusal | _preflight_checks.Ready | None = None
        try:
            outcome = _preflight_checks.evaluate(
                request,
                self._settings,
                self._probe_runner,
                self._toolkit_inspector,
                on_probe_start=claim.begin,
                prepared=self._prepared_checks(request, fingerprint),
            )
        finally:
            # Refused before any probe ran: the claim starts (and revokes) here.
            claim.begin()
            claim.finish(ready=isinstance(outcome, _preflight_checks.Ready))
        if isinstance(outcome, _preflight_checks.Refusal):
            return _refusal_result(outcome.status, outcome.reason_code), outcome
        return _ready_result(outcome.observations), None

    def _prepared_checks(
        self, request: DevicePreflightRequest, fingerprint: str
    ) -> _preflight_checks.Refusal | _preflight_checks.Selection:
        """Steps 1-12 (``_preflight_checks.prepare``), kept per request.

        They are a pure function of the request's values and this provider's
        configuration. The fingerprint is Core's canonical form of every
        field of the request (``to_dict``), binding the option values only by
        their digest, so the key adds the values themselves: the same key is
        the same request, and the kept result is the one a new evaluation
        would give. Bounded: cleared when full.
        """
        try:
            key = (fingerprint, request.options.values)
            kept = self._prepared.get(key)
        except Exception:  # a forged, unhashable options object: evaluate anew
            return _preflight_checks.prepare(request, self._settings)
        if kept is None:
            kept = _preflight_checks.prepare(request, self._settings)
            if len(self._prepared) >= _PREPARED_SIZE:
                self._prepared.clear()
            self._prepared[key] = kept
        return kept

    def build_contribution(self, request: DevicePreflightRequest) -> DeviceBuildContribution:
        """The lane's declarative inputs, only after this request's latest preflight passed."""
        if not isinstance(request, DevicePreflightRequest) or not self._ready.is_ready(
            request_fingerprint(request)
        ):
            raise DeviceProviderError(
                f"{_PROVIDER_ID} build_contribution requires successful preflight "
                "of this exact request"
            )
        from rextio_device_cuda import _declarations

        capability = CAPABILITIES[request.selection.capability_id]
        return _declarations.lane_contribution(capability.lane)


def provider() -> CudaDeviceProvider:
    """Entry-point factory: a provider configured only by request options."""
    return CudaDeviceProvider()

