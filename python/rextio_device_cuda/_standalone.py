"""One standalone preflight through Rextio Core, as ``preflight`` and ``validate`` run it.

The request is the one contract section 8 describes: a raw-driver capability
gets a rust-crate profile with one requirement ``cuda:N`` (backend cuda,
runtime cuda-driver, feature driver-api, memory device, architectures
``(sm,)``); a framework capability gets its lane's host-extension profile.
Core's ``resolve_device_plan`` loads the provider through its entry point and
calls its public ``preflight()``. What decided a refusal (the observed facts
and the CUDA result) is read from the refusal line the provider logs, which
this module takes instead of letting it print: the commands print it
themselves, with its remedy.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

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
from rextio_device_cuda._provider_spec import PROVIDER_SPEC, CapabilitySpec, RawDriverLaneSpec
from rextio_device_cuda._refusal_text import RefusalLine

_PROVIDER_ID: Final = PROVIDER_SPEC.manifest.provider_id
_BACKEND: Final = PROVIDER_SPEC.manifest.backend
_VALIDATION: Final = PROVIDER_SPEC.validation_requirement
_ARCHITECTURES: Final = tuple(item.sm for item in PROVIDER_SPEC.manifest.architectures)


class OptionsRejectedError(ValueError):
    """Core refused the device options or the selection before any preflight."""


@dataclass(frozen=True)
class Ready:
    """The provider was ready: Core's resolved plan."""

    plan: ResolvedDevicePlan


@dataclass(frozen=True)
class Refused:
    """The provider refused: Core's result, and the provider's refusal line.

    ``line`` is None when the provider logged none (another provider answered).
    """

    result: DevicePreflightResult
    line: RefusalLine | None

    @property
    def reason_code(self) -> str:
        return self.result.reason_codes[0]

    @property
    def facts(self) -> str | None:
        """The observed facts that decided this refusal, when the line is for its code."""
        if self.line is None or self.line.reason_code != self.reason_code:
            return None
        return self.line.facts

    @property
    def cuda_result(self) -> int | None:
        """The CUDA result the probe reported with this refusal's code."""
        if self.line is None or self.line.reason_code != self.reason_code:
            return None
        return self.line.cuda_result


@dataclass(frozen=True)
class NotRun:
    """Core failed otherwise (the provider could not be loaded, or no plan)."""

    why: str


Outcome = Ready | Refused | NotRun


class _RefusalLines(logging.Handler):
    """Keeps the refusal lines the provider logs."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[RefusalLine] = []

    def emit(self, record: logging.LogRecord) -> None:
        arguments = record.args if isinstance(record.args, tuple) else ()
        self.lines.extend(each for each in arguments if isinstance(each, RefusalLine))


@contextlib.contextmanager
def _refusal_lines_taken() -> Iterator[_RefusalLines]:
    """The provider's refusal lines go to the returned handler, not to stderr."""
    # The provider logs its refusal lines on the package's logger.
    logger = logging.getLogger(__package__)
    handler = _RefusalLines()
    previous = (logger.level, logger.propagate)
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    logger.propagate = False
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous[0])
        logger.propagate = previous[1]


class _RecordingProvider:
    """Delegates to the loaded provider and keeps its last preflight result."""

    def __init__(self, inner: DeviceProvider) -> None:
        self._inner = inner
        self.last_preflight: DevicePreflightResult | None = None

    def manifest(self) -> DeviceProviderManifest:
        return self._inner.manifest()

    def preflight(self, request: DevicePreflightRequest) -> DevicePreflightResult:
        self.last_preflight = self._inner.preflight(request)
        return self.last_preflight

    def build_contribution(self, request: DevicePreflightRequest) -> DeviceBuildContribution:
        return self._inner.build_contribution(request)


def validation_profile(capability: CapabilitySpec, ordinal: str, sm: str) -> ArtifactProfile:
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
    device: str,
    sm: str,
    toolkit_root: str | None,
    probe_sha256: str | None,
    driver_root: str | None,
) -> DeviceProviderOptions:
    keys = PROVIDER_SPEC.option_keys
    pairs = [(keys.probe, probe), (keys.device, device), (keys.sm, sm)]
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
    device: str,
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
    # Core composes only a valid requirement; bad ordinals and SMs reach the
    # provider through the options and come back as reason codes.
    plain = device.isascii() and device.isdigit() and len(device) <= 4
    ordinal = str(int(device)) if plain else "0"
    profile = validation_profile(
        capability, ordinal, sm if sm in _ARCHITECTURES else _ARCHITECTURES[0]
    )
    try:
        loaded, source = load_selected_device_provider(selection)
    except DeviceProviderError as error:
        return NotRun(str(error))
    recording = _RecordingProvider(loaded)
    with _refusal_lines_taken() as taken:
        try:
            plan = resolve_device_plan(
                artifact_profile=profile,
                selection=selection,
                providers={_PROVIDER_ID: recording},
                provider_sources={_PROVIDER_ID: source},
                options=options,
            )
        except DeviceProviderError as error:
            result = recording.last_preflight
            if result is not None and result.status is not DevicePreflightStatus.READY:
                return Refused(result, taken.lines[-1] if taken.lines else None)
            return NotRun(str(error))
    if plan is None:
        return NotRun("no plan was resolved")
    return Ready(plan)
