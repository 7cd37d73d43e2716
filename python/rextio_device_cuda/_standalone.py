"""One standalone preflight through Rextio Core, as ``preflight`` and ``validate`` run it.

The request is the one docs/interfaces.md describes for manual validation: a
raw-driver capability gets a rust-crate profile with one requirement
``cuda:N`` (backend cuda, runtime cuda-driver, feature driver-api, memory
device, architectures ``(sm,)``); a framework capability gets its lane's
host-extension profile. Core's ``resolve_device_plan`` loads the provider
through its entry point and asks it for a preflight. What decided a refusal
(the observed facts and the CUDA result) comes back as the checks' own
``Refusal`` record, returned by the provider beside Core's result; nothing is
logged, and the commands print it themselves, with its remedy.

The caller has checked every value (the ordinal, the SM's spelling, the
paths and the digest).
"""

from __future__ import annotations

from typing import Final, NamedTuple

from rextio.artifacts.models import ArtifactProfile, DeviceRequirement, RuntimeRequirement
from rextio.artifacts.profiles import host_extension_profile, rust_crate_profile
from rextio.devices import (
    DeviceBuildContribution,
    DevicePreflightRequest,
    DevicePreflightResult,
    DevicePreflightStatus,
    DeviceProvider,
    DeviceProviderError,
    DeviceProviderManifest,
    DeviceProviderOptions,
    DeviceProviderSelection,
    ResolvedDevicePlan,
    load_selected_device_provider,
    resolve_device_plan,
)

from rextio_device_cuda._declarations import frozen_requirement
from rextio_device_cuda._preflight_checks import Ready, Refusal, architecture_refusal
from rextio_device_cuda._provider_spec import PROVIDER_SPEC, CapabilitySpec, RawDriverLaneSpec
from rextio_device_cuda.provider import CudaDeviceProvider

_PROVIDER_ID: Final = PROVIDER_SPEC.manifest.provider_id
_BACKEND: Final = PROVIDER_SPEC.manifest.backend
_VALIDATION: Final = PROVIDER_SPEC.validation_requirement


class OptionsRejectedError(ValueError):
    """Core refused the device options or the selection before any preflight."""


class Resolved(NamedTuple):
    """The provider was ready: Core's resolved plan, and the selected device's name
    (for the human lines only; None when the provider did not say)."""

    plan: ResolvedDevicePlan
    device_name: str | None


class NotRun(NamedTuple):
    """Core failed otherwise (the provider could not be loaded, or no plan)."""

    why: str


Outcome = Resolved | Refusal | NotRun


class _RecordingProvider:
    """Delegates to the loaded provider and keeps its last preflight's outcome.

    Our own provider returns the checks' record beside Core's result; any
    other object answering for this provider id gives only its result.
    """

    def __init__(self, inner: DeviceProvider) -> None:
        self._inner = inner
        self.last: tuple[DevicePreflightResult, Refusal | Ready | None] | None = None

    def manifest(self) -> DeviceProviderManifest:
        return self._inner.manifest()

    def preflight(self, request: DevicePreflightRequest) -> DevicePreflightResult:
        if isinstance(self._inner, CudaDeviceProvider):
            self.last = self._inner._preflight_outcome(request)
        else:
            self.last = (self._inner.preflight(request), None)
        return self.last[0]

    def build_contribution(self, request: DevicePreflightRequest) -> DeviceBuildContribution:
        return self._inner.build_contribution(request)

    def refusal(self) -> Refusal | None:
        """The last preflight's refusal, when it was not ready."""
        if self.last is None:
            return None
        result, outcome = self.last
        if result.status is DevicePreflightStatus.READY or not result.reason_codes:
            return None
        if isinstance(outcome, Refusal):
            return outcome
        return Refusal(result.status, result.reason_codes[0])

    def device_name(self) -> str | None:
        outcome = None if self.last is None else self.last[1]
        return outcome.device_name if isinstance(outcome, Ready) else None


def validation_profile(capability: CapabilitySpec, ordinal: int, sm: str) -> ArtifactProfile:
    """The profile a standalone preflight of ``capability`` on device ``ordinal`` requests."""
    lane = PROVIDER_SPEC.lanes[capability.lane]
    if isinstance(lane, RawDriverLaneSpec):
        requirement = DeviceRequirement(
            logical_device=f"{_BACKEND}:{ordinal}",
            backend=_BACKEND,
            runtime=_VALIDATION.runtime,
            features=_VALIDATION.features,
            memory_spaces=_VALIDATION.memory_spaces,
            architectures=(sm,),
        )
        return rust_crate_profile(capability.target_triple, device_requirements=(requirement,))
    requirement = frozen_requirement(lane.requirement, (sm,))
    return host_extension_profile(
        capability.target_triple,
        runtime_requirements=tuple(
            RuntimeRequirement(pin.name, pin.version, pin.features) for pin in lane.runtime_pins
        ),
        device_requirements=(requirement,),
    )


def _options(
    probe: str,
    device: int,
    sm: str,
    toolkit_root: str | None,
    probe_sha256: str | None,
    driver_root: str | None,
) -> DeviceProviderOptions:
    keys = PROVIDER_SPEC.option_keys
    pairs = [(keys.probe, probe), (keys.device, str(device)), (keys.sm, sm)]
    if toolkit_root is not None:
        pairs.append((keys.toolkit, toolkit_root))
    if probe_sha256 is not None:
        pairs.append((keys.probe_sha256, probe_sha256))
    if driver_root is not None:
        pairs.append((keys.driver_root, driver_root))
    return DeviceProviderOptions(tuple(pairs))


def standalone_preflight(
    capability: CapabilitySpec,
    *,
    probe: str,
    device: int,
    sm: str,
    toolkit_root: str | None = None,
    probe_sha256: str | None = None,
    driver_root: str | None = None,
) -> Outcome:
    """One standalone plan resolved through Core's ``resolve_device_plan``.

    Options Core rejects raise ``OptionsRejectedError``.
    """
    try:
        options = _options(probe, device, sm, toolkit_root, probe_sha256, driver_root)
        selection = DeviceProviderSelection(_PROVIDER_ID, capability.id)
    except ValueError as error:
        raise OptionsRejectedError(str(error)) from error
    # Core refuses a profile naming an SM the capability does not declare
    # before it asks any provider, so no profile can carry one: the provider's
    # check answers for it, with the refusal its preflight would return.
    refusal = architecture_refusal(sm)
    if refusal is not None:
        return refusal
    profile = validation_profile(capability, device, sm)
    try:
        loaded, source = load_selected_device_provider(selection)
    except DeviceProviderError as error:
        return NotRun(str(error))
    recording = _RecordingProvider(loaded)
    try:
        plan = resolve_device_plan(
            artifact_profile=profile,
            selection=selection,
            providers={_PROVIDER_ID: recording},
            provider_sources={_PROVIDER_ID: source},
            options=options,
        )
    except DeviceProviderError as error:
        refusal = recording.refusal()
        return NotRun(str(error)) if refusal is None else refusal
    if plan is None:
        return NotRun("no plan was resolved")
    return Resolved(plan, recording.device_name())
