"""The preflight check sequence, in order; the first failure wins.

``evaluate`` returns either a ``Refusal`` (one status, one reason code) or a
``Ready`` with the ready observations. It never raises for bad input: an
unexpected failure of an injected runner or inspector becomes a reason code.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from rextio.artifacts.models import ArtifactKind, DeviceRequirement
from rextio.devices import (
    DevicePreflightRequest,
    DevicePreflightStatus,
    normalize_device_id,
)

from rextio_device_cuda import _codes
from rextio_device_cuda._errors import CudaProbeError, is_path_free
from rextio_device_cuda._provider_spec import (
    CAPABILITIES,
    PROVIDER_SPEC,
    CapabilitySpec,
    FrameworkLaneSpec,
    LaneSpec,
    RawDriverLaneSpec,
)
from rextio_device_cuda._report import CudaProbeReport, ProbeTarget, expected_probe_target
from rextio_device_cuda._runner import SubprocessProbeRunner
from rextio_device_cuda._toolkit import (
    CudaToolkitReport,
    FilesystemToolkitInspector,
    expected_components,
    toolkit_version_parts,
)
from rextio_device_cuda.config import (
    CudaProviderConfig,
    device_ordinal,
    is_probe_sha256,
    is_sm_name,
)
from rextio_device_cuda.probe import ProbeRunner, ToolkitInspector

_OPTION = PROVIDER_SPEC.option_keys
_OBSERVATION = PROVIDER_SPEC.observation_keys
_PROVIDER_ID = PROVIDER_SPEC.manifest.provider_id
_BACKEND = PROVIDER_SPEC.manifest.backend
# The SM vocabulary with each architecture's CUDA releases.
_ARCHITECTURES = {item.sm: item for item in PROVIDER_SPEC.manifest.architectures}
# The probe's one option (docs/interfaces.md, "The loader seam"): look only in this directory.
_DRIVER_ROOT_ARGUMENT = "--driver-root"
_MAX_ARGUMENT_CHARS = PROVIDER_SPEC.probe_runner.max_argument_chars
# The longest runner or inspector facts a refusal line shows.
_MAX_FACTS_CHARS = 400


def _subprocess_runner(selection: Selection) -> SubprocessProbeRunner:
    """The runner of the selection's probe, given the driver root when one is set."""
    if selection.probe_path is None:
        raise _refused(_codes.PROBE_NOT_CONFIGURED)
    arguments = (
        () if selection.driver_root is None else (_DRIVER_ROOT_ARGUMENT, selection.driver_root)
    )
    return SubprocessProbeRunner(
        selection.probe_path, probe_sha256=selection.probe_sha256, arguments=arguments
    )


class Refusal(NamedTuple):
    """A failed preflight: exactly one reason code, no observations.

    ``facts``, ``cuda_result``, ``rule`` and ``loader_refused`` are for the
    human lines only (the log line, the ``preflight`` command), never for a
    record: what was observed that decided the refusal (path-free), the CUDA
    result the probe reported, the loader rule that refused the driver image,
    and whether the dynamic loader refused an image that passed review.
    """

    status: DevicePreflightStatus
    reason_code: str
    facts: str | None = None
    cuda_result: int | None = None
    rule: str | None = None
    loader_refused: bool = False


class Ready(NamedTuple):
    """A successful preflight and what it observed (never a path).

    ``device_name`` is for the human lines only (the ``preflight`` command),
    never for a record: the selected device's name, when path-free.
    """

    observations: tuple[tuple[str, str], ...]
    device_name: str | None = None


class _RefusedError(Exception):
    def __init__(
        self,
        code: str,
        status: DevicePreflightStatus,
        facts: str | None = None,
        cuda_result: int | None = None,
        *,
        rule: str | None = None,
        loader_refused: bool = False,
    ) -> None:
        super().__init__(code)
        self.refusal = Refusal(status, code, facts, cuda_result, rule, loader_refused)


def _refused(
    code: str, facts: str | None = None, cuda_result: int | None = None
) -> _RefusedError:
    """The refusal for ``code``; the spec says its status: ``incompatible``
    for the codes of ``incompatible_reason_codes``, else ``unavailable``."""
    if code in PROVIDER_SPEC.incompatible_reason_codes:
        return _RefusedError(code, DevicePreflightStatus.INCOMPATIBLE, facts, cuda_result)
    return _RefusedError(code, DevicePreflightStatus.UNAVAILABLE, facts, cuda_result)


def _error_facts(error: CudaProbeError) -> str | None:
    """The facts a runner or inspector error carries, if they are plain path-free text.

    An injected runner or inspector may raise ``CudaProbeError`` with any
    text; facts with a path separator, a control character or over a line's
    length are dropped rather than shown.
    """
    return _shown(getattr(error, "facts", None))


def _shown(facts: object) -> str | None:
    """``facts`` when a refusal line may show them: short, printable, path-free."""
    if (
        not isinstance(facts, str)
        or not 0 < len(facts) <= _MAX_FACTS_CHARS
        or not is_path_free(facts)
        or not facts.isprintable()
    ):
        return None
    return facts


def _release(release: tuple[int, int]) -> str:
    return f"{release[0]}.{release[1]}"


def _driver_release(version: int) -> tuple[int, int]:
    """The CUDA release a driver version names: 12040 is 12.4."""
    return version // 1000, (version % 1000) // 10


def _target_text(target: ProbeTarget) -> str:
    return f"({target.os}, {target.arch}, {target.environment})"


def _device_name(ordinal: int, report: CudaProbeReport) -> str | None:
    """The driver's name of the device; one that looks like it holds a path is left out."""
    name = report.devices[ordinal].name
    return name if is_path_free(name) else None


def _device_text(ordinal: int, report: CudaProbeReport) -> str:
    name = _device_name(ordinal, report)
    return f"device {ordinal} is {report.devices[ordinal].sm}" + (f" ({name})" if name else "")


class Selection(NamedTuple):
    """The effective device choice after options and constructor are merged."""

    capability: CapabilitySpec
    ordinal: int
    sm: str
    probe_path: str | None
    toolkit_root: str | None
    probe_sha256: str | None
    driver_root: str | None = None


def _lane(capability: CapabilitySpec) -> LaneSpec:
    return PROVIDER_SPEC.lanes[capability.lane]


# -- steps 1-4: identity and shape (incompatible) ------------------------------


def _capability(request: DevicePreflightRequest) -> CapabilitySpec:
    if request.selection.provider_id != _PROVIDER_ID:
        raise _refused(_codes.PROVIDER_ID_MISMATCH)
    capability = CAPABILITIES.get(request.selection.capability_id)
    if capability is None:
        raise _refused(_codes.CAPABILITY_UNKNOWN)
    profile = request.artifact_profile
    if profile.target_triple != capability.target_triple:
        raise _refused(_codes.TARGET_MISMATCH)
    lane = _lane(capability)
    if isinstance(lane, FrameworkLaneSpec) and profile.kind is not ArtifactKind.HOST_EXTENSION:
        raise _refused(lane.reason_codes.artifact_kind_unsupported)
    return capability


# -- steps 5-6: options --------------------------------------------------------


def _options(request: DevicePreflightRequest, capability: CapabilitySpec) -> dict[str, str]:
    lane = _lane(capability)
    try:
        keys = request.options.keys
        values = {key: request.options.get(key) for key in keys} if isinstance(keys, tuple) else {}
    except Exception as error:  # a forged options object must not escape as a traceback
        raise _refused(_codes.PROVIDER_OPTIONS_INVALID) from error
    if not isinstance(keys, tuple) or not all(
        isinstance(key, str) and isinstance(values[key], str) for key in keys
    ):
        raise _refused(_codes.PROVIDER_OPTIONS_INVALID)
    unknown = [key for key in keys if key not in lane.option_allowlist]
    if unknown:
        # The key is the user's own (Core allows only bounded lowercase
        # identifiers); its value is never shown.
        raise _refused(
            _codes.PROVIDER_OPTION_UNKNOWN,
            _shown(f"{unknown[0]} is not an option of {capability.id}"),
        )
    pin = values.get(_OPTION.probe_sha256)
    if pin is not None and not is_probe_sha256(pin):
        raise _refused(_codes.PROBE_SHA256_INVALID)
    driver_root = values.get(_OPTION.driver_root)
    if driver_root is not None and not _is_absolute_directory_argument(driver_root):
        raise _refused(_codes.DRIVER_ROOT_NOT_ABSOLUTE)
    return {key: value for key, value in values.items() if value is not None}


def _is_absolute_directory_argument(text: str) -> bool:
    # Checked before anything runs, like the pin: a relative directory would
    # be resolved against whatever the probe's working directory is. A NUL
    # or an overlong value cannot be an absolute path the probe can be given.
    return (
        "\0" not in text
        and len(text) <= _MAX_ARGUMENT_CHARS
        and Path(text).is_absolute()
    )


# -- step 7-8: the device requirement ----------------------------------------------


def _is_cuda_gpu(requirement: DeviceRequirement) -> bool | None:
    """True/False for a gpu/cuda requirement; None when Core cannot normalize it."""
    try:
        device = normalize_device_id(requirement.logical_device, backend=requirement.backend)
    except ValueError:
        return None
    return bool(device.kind == "gpu" and device.backend == _BACKEND)


def _raw_requirement(
    request: DevicePreflightRequest, lane: RawDriverLaneSpec
) -> DeviceRequirement:
    policy = lane.requirement_policy
    cuda_requirements = [
        requirement
        for requirement in request.artifact_profile.device_requirements
        if _is_cuda_gpu(requirement)
    ]
    for requirement in cuda_requirements:
        if len(requirement.architectures) != 1:
            raise _refused(_codes.EXPLICIT_SM_REQUIRED)
        if not is_sm_name(requirement.architectures[0]):
            raise _refused(_codes.INVALID_SM)
    if len(cuda_requirements) != 1:
        raise _refused(_codes.EXACTLY_ONE_CUDA_DEVICE_REQUIRED)
    requirement = cuda_requirements[0]
    if requirement.reuse_domain_runtime:
        raise _refused(_codes.FRAMEWORK_RUNTIME_REUSE_UNSUPPORTED)
    if requirement.runtime not in policy.allowed_runtimes:
        raise _refused(_codes.CUDA_RUNTIME_INCOMPATIBLE)
    if not set(requirement.features) <= policy.allowed_features:
        raise _refused(_codes.CUDA_FEATURE_UNSUPPORTED)
    if not set(requirement.memory_spaces) <= policy.allowed_memory_spaces:
        raise _refused(_codes.CUDA_MEMORY_SPACE_UNSUPPORTED)
    if not set(requirement.layouts) <= policy.allowed_layouts:
        raise _refused(_codes.CUDA_LAYOUT_UNSUPPORTED)
    return requirement


def _pins_present(request: DevicePreflightRequest, lane: FrameworkLaneSpec) -> bool:
    by_name = {item.name: item for item in request.artifact_profile.runtime_requirements}
    for pin in lane.runtime_pins:
        present = by_name.get(pin.name)
        if (
            present is None
            or present.version != pin.version
            or set(present.features) != set(pin.features)
        ):
            return False
    return True


def _framework_requirement(
    request: DevicePreflightRequest, lane: FrameworkLaneSpec
) -> DeviceRequirement:
    expected = lane.requirement
    codes = lane.reason_codes
    profile = request.artifact_profile
    fallback = lane.required_python_fallback
    if fallback is not None and profile.python_fallback_backend != fallback.backend:
        raise _refused(fallback.reason_code)
    if len(profile.device_requirements) != 1:
        raise _refused(_codes.EXACTLY_ONE_CUDA_DEVICE_REQUIRED)
    requirement = profile.device_requirements[0]
    try:
        device = normalize_device_id(requirement.logical_device, backend=requirement.backend)
    except ValueError as error:
        raise _refused(_codes.CUDA_DEVICE_REQUIREMENT_INVALID) from error
    wanted = normalize_device_id(expected.logical_device, backend=expected.backend)
    if device != wanted:
        raise _refused(codes.cuda_device_unsupported)
    if requirement.runtime != expected.runtime:
        raise _refused(codes.runtime_required)
    if requirement.reuse_domain_runtime is not expected.reuse_domain_runtime:
        raise _refused(codes.runtime_reuse_required)
    if len(requirement.architectures) > 1:
        raise _refused(_codes.AT_MOST_ONE_SM_ALLOWED)
    if not all(is_sm_name(sm) for sm in requirement.architectures):
        raise _refused(_codes.INVALID_SM)
    if set(requirement.features) != expected.features:
        raise _refused(codes.features_incompatible)
    if set(requirement.layouts) != expected.layouts:
        raise _refused(codes.layout_incompatible)
    if set(requirement.memory_spaces) != expected.memory_spaces:
        raise _refused(codes.memory_space_incompatible)
    if not _pins_present(request, lane):
        raise _refused(codes.runtime_pins_required)
    return requirement


# -- steps 9-12: the effective selection ------------------------------------------


def _merged(
    option: str | None, constructor: object | None, conflict_code: str
) -> str | None:
    constructed = None if constructor is None else str(constructor)
    if option is not None and constructed is not None and option != constructed:
        raise _refused(conflict_code)
    return option if option is not None else constructed


def _ordinal(text: str | None) -> int:
    if text is None:
        raise _refused(_codes.DEVICE_ORDINAL_NOT_CONFIGURED)
    value = device_ordinal(text)
    if value is None:
        raise _refused(_codes.DEVICE_ORDINAL_INVALID)
    return value


def _sm(text: str | None) -> str:
    if text is None:
        raise _refused(_codes.SM_NOT_CONFIGURED)
    if not is_sm_name(text):
        raise _refused(_codes.INVALID_SM)
    if text not in _ARCHITECTURES:
        raise _refused(
            _codes.CUDA_ARCHITECTURE_UNSUPPORTED, f"{text} was selected"
        )
    return text


def _selection(
    request: DevicePreflightRequest,
    config: CudaProviderConfig,
    capability: CapabilitySpec,
) -> Selection:
    lane = _lane(capability)
    options = _options(request, capability)
    if isinstance(lane, FrameworkLaneSpec) and config.toolkit_root is not None:
        raise _refused(lane.reason_codes.toolkit_root_unsupported)
    requirement = (
        _framework_requirement(request, lane)
        if isinstance(lane, FrameworkLaneSpec)
        else _raw_requirement(request, lane)
    )
    unknown = [sm for sm in requirement.architectures if sm not in _ARCHITECTURES]
    if unknown:
        # Step 7 checked the spelling: sm_ and digits, nothing else.
        raise _refused(
            _codes.CUDA_ARCHITECTURE_UNSUPPORTED, f"the artifact requires {unknown[0]}"
        )
    probe = _merged(
        options.get(_OPTION.probe), config.probe_path, _codes.PROBE_CONFIGURATION_CONFLICT
    )
    pin = _merged(
        options.get(_OPTION.probe_sha256),
        config.probe_sha256,
        _codes.PROBE_CONFIGURATION_CONFLICT,
    )
    toolkit = (
        None
        if isinstance(lane, FrameworkLaneSpec)
        else _merged(
            options.get(_OPTION.toolkit),
            config.toolkit_root,
            _codes.TOOLKIT_CONFIGURATION_CONFLICT,
        )
    )
    device_text = _merged(
        options.get(_OPTION.device), config.device_ordinal, _codes.DEVICE_CONFIGURATION_CONFLICT
    )
    sm_text = _merged(options.get(_OPTION.sm), config.sm, _codes.SM_CONFIGURATION_CONFLICT)
    ordinal = _ordinal(device_text)
    sm = _sm(sm_text)
    device = normalize_device_id(requirement.logical_device, backend=requirement.backend)
    if device.index != ordinal or any(item != sm for item in requirement.architectures):
        index = "no device index" if device.index is None else f"device {device.index}"
        required = ", ".join((index, *requirement.architectures))
        raise _refused(
            _codes.DEVICE_REQUIREMENT_MISMATCH,
            f"the artifact requires {required}; device {ordinal}, {sm} was selected",
        )
    return Selection(
        capability=capability,
        ordinal=ordinal,
        sm=sm,
        probe_path=probe,
        toolkit_root=toolkit,
        probe_sha256=pin,
        driver_root=options.get(_OPTION.driver_root),
    )


# -- steps 13-19: the probe and the toolkit ------------------------------------------


def _no_work() -> None:
    return None


def _probe_report(
    selection: Selection, runner: ProbeRunner | None, on_probe_start: Callable[[], None]
) -> CudaProbeReport:
    if runner is None:
        runner = _subprocess_runner(selection)
    elif selection.probe_sha256 is not None or selection.driver_root is not None:
        # An injected runner decides itself what runs and where it looks:
        # neither a pin nor a driver root can bind it.
        raise _refused(_codes.PROBE_CONFIGURATION_CONFLICT)
    on_probe_start()
    try:
        report = runner.run()
    except CudaProbeError as error:
        raise _refused(error.reason_code, _error_facts(error)) from error
    except Exception as error:  # an injected runner's bug is a failed execution
        raise _refused(
            _codes.PROBE_EXECUTION_FAILED,
            _shown(f"the injected probe runner raised {type(error).__name__}"),
        ) from error
    if not isinstance(report, CudaProbeReport):
        raise _refused(
            _codes.PROBE_SCHEMA_INVALID,
            _shown(
                f"the injected probe runner returned {type(report).__name__}, "
                "not a CudaProbeReport"
            ),
        )
    return report


def _check_report(
    selection: Selection, report: CudaProbeReport, config: CudaProviderConfig
) -> None:
    expected = expected_probe_target(selection.capability.target_triple)
    if report.target != expected:
        raise _refused(
            _codes.PROBE_TARGET_MISMATCH,
            f"the probe reports {_target_text(report.target)}; "
            f"{selection.capability.id} targets {_target_text(expected)}",
        )
    version = report.driver_version
    if report.status != PROVIDER_SPEC.probe_report.statuses.complete:
        # Step 16: the report's own code passes through, whatever schema-valid
        # code it is (another or a newer probe may say more than ours does).
        # The probe only ever reports the driver unavailable.
        code = report.reason_code or _codes.PROBE_NOT_READY
        load_failed = code == _codes.LIBCUDA_SO_LOAD_FAILED
        raise _RefusedError(
            code,
            DevicePreflightStatus.UNAVAILABLE,
            _incomplete_facts(selection, report),
            report.cuda_result,
            rule=report.refusing_rule if load_failed else None,
            loader_refused=load_failed and report.loader_reason is not None,
        )
    if version is None:
        raise _refused(_codes.DRIVER_VERSION_UNAVAILABLE)
    driver = _driver_release(version)
    floor = config.minimum_driver_version
    if version < floor:
        raise _refused(
            _codes.DRIVER_VERSION_TOO_OLD,
            f"driver {_release(driver)} ({version}) is older than the floor "
            f"{_release(_driver_release(floor))} ({floor})",
        )
    first = _ARCHITECTURES[selection.sm].first
    if driver < first:
        raise _refused(
            _codes.CUDA_ARCHITECTURE_DRIVER_TOO_OLD,
            f"driver {_release(driver)} is older than {_release(first)}, "
            f"the first CUDA release that knows {selection.sm}",
        )
    if selection.ordinal >= len(report.devices):
        raise _refused(
            _codes.CUDA_DEVICE_NOT_FOUND,
            f"device {selection.ordinal} was selected; the probe found "
            f"{len(report.devices)} device{'s' if len(report.devices) != 1 else ''}",
        )
    if report.devices[selection.ordinal].sm != selection.sm:
        raise _refused(
            _codes.CUDA_SM_MISMATCH,
            f"{_device_text(selection.ordinal, report)}; {selection.sm} was selected",
        )


def _incomplete_facts(selection: Selection, report: CudaProbeReport) -> str:
    """What an incomplete report says happened: the rule that refused the
    driver image, a driver root that is missing or empty, or how far the
    driver got."""
    if report.reason_code == _codes.LIBCUDA_SO_LOAD_FAILED and report.refusing_rule is not None:
        return (
            f"the loader's rule `{report.refusing_rule}` refused the libcuda.so.1 "
            "the probe found"
        )
    if report.reason_code == _codes.LIBCUDA_SO_LOAD_FAILED and report.loader_reason is not None:
        # Only on a refusal: the texts are imported when one is shown.
        from rextio_device_cuda._refusal_text import loader_facts

        return loader_facts(report.loader_reason)
    if report.reason_code == _codes.LIBCUDA_SO_NOT_FOUND and selection.driver_root is not None:
        # Only the probe's answer decided the refusal; this says which of the
        # two plain causes it was (the root was checked absolute before).
        if not os.path.exists(selection.driver_root):
            return "the configured driver_root does not exist"
        if not os.path.isdir(selection.driver_root):
            return "the configured driver_root is not a directory"
        return "the configured driver_root holds no libcuda.so.1"
    target = report.target
    searched_arches = {candidates.arch for candidates in PROVIDER_SPEC.loader.linux_candidate_dirs}
    if (
        report.reason_code == _codes.LIBCUDA_SO_NOT_FOUND
        and target.os == "linux"
        and target.arch in searched_arches
    ):
        # Only on a refusal: the texts are imported when one is shown.
        from rextio_device_cuda._refusal_text import searched_facts

        return searched_facts(target.arch)
    version = report.driver_version
    loaded = (
        f"the probe loaded driver {_release(_driver_release(version))} ({version})"
        if version is not None
        else "the probe loaded a driver"
        if report.driver_loaded
        else "the probe loaded no driver"
    )
    if report.device_count is not None:
        loaded += f"; the driver counted {report.device_count} devices"
    return loaded


def _toolkit_report(
    selection: Selection, inspector: ToolkitInspector | None
) -> CudaToolkitReport | None:
    if inspector is None:
        if selection.toolkit_root is None:
            return None
        inspector = FilesystemToolkitInspector(Path(selection.toolkit_root))
    triple = selection.capability.target_triple
    try:
        report = inspector.inspect(triple)
        components = tuple(expected_components(triple))
        if isinstance(report, CudaToolkitReport):
            # Validated again (the report's own checks, in order):
            # a frozen record can still be altered after construction.
            CudaToolkitReport(report.version, report.runtime_version, report.components)
    except CudaProbeError as error:
        raise _refused(error.reason_code, _error_facts(error)) from error
    except Exception as error:  # an injected inspector's bug fails closed
        raise _refused(
            _codes.TOOLKIT_COMPONENT_INVALID,
            _shown(f"the injected toolkit inspector raised {type(error).__name__}"),
        ) from error
    # The components must be exactly this target's.
    if not isinstance(report, CudaToolkitReport):
        raise _refused(
            _codes.TOOLKIT_COMPONENT_INVALID,
            _shown(
                f"the injected toolkit inspector returned {type(report).__name__}, "
                "not a CudaToolkitReport"
            ),
        )
    if report.components != components:
        raise _refused(
            _codes.TOOLKIT_COMPONENT_INVALID,
            f"the toolkit reports components {', '.join(report.components) or 'none'}; "
            f"{triple} needs {', '.join(components)}",
        )
    return report


def _check_toolkit(
    report: CudaToolkitReport, driver_version: int, config: CudaProviderConfig, sm: str
) -> None:
    toolkit = toolkit_version_parts(report.version)
    if toolkit < config.minimum_toolkit_version:
        raise _refused(
            _codes.TOOLKIT_VERSION_TOO_OLD,
            f"toolkit {report.version} is older than the floor "
            f"{_release(config.minimum_toolkit_version)}",
        )
    driver = _driver_release(driver_version)
    if driver < toolkit:
        raise _refused(
            _codes.DRIVER_TOOLKIT_INCOMPATIBLE,
            f"driver {_release(driver)} is older than toolkit {report.version}",
        )
    architecture = _ARCHITECTURES[sm]
    if toolkit < architecture.first:
        raise _refused(
            _codes.TOOLKIT_ARCHITECTURE_UNSUPPORTED,
            f"toolkit {report.version} cannot compile {sm}: "
            f"{_release(architecture.first)} is the first CUDA release that does",
        )
    if architecture.last is not None and toolkit > architecture.last:
        raise _refused(
            _codes.TOOLKIT_ARCHITECTURE_UNSUPPORTED,
            f"toolkit {report.version} cannot compile {sm}: "
            f"{_release(architecture.last)} is the last CUDA release that does",
        )


def _observations(
    selection: Selection,
    report: CudaProbeReport,
    toolkit: CudaToolkitReport | None,
    config: CudaProviderConfig,
) -> tuple[tuple[str, str], ...]:
    observed = {
        _OBSERVATION.device_count: str(len(report.devices)),
        _OBSERVATION.driver_version: str(report.driver_version),
        _OBSERVATION.minimum_driver_version: str(config.minimum_driver_version),
        _OBSERVATION.probe_schema: report.schema_version,
        _OBSERVATION.selected_device: str(selection.ordinal),
        _OBSERVATION.selected_sm: selection.sm,
        _OBSERVATION.target_arch: report.target.arch,
        _OBSERVATION.target_os: report.target.os,
    }
    lane = _lane(selection.capability)
    if lane.toolkit_inspection:
        major, minor = config.minimum_toolkit_version
        not_configured = _OBSERVATION.toolkit_not_configured
        observed[_OBSERVATION.minimum_toolkit_version] = f"{major}.{minor}"
        observed[_OBSERVATION.toolkit_runtime] = (
            toolkit.runtime_version if toolkit is not None else not_configured
        )
        observed[_OBSERVATION.toolkit_version] = (
            toolkit.version if toolkit is not None else not_configured
        )
    if selection.probe_sha256 is not None:
        observed[_OBSERVATION.probe_sha256] = selection.probe_sha256
    observed.update(lane.observations)
    return tuple(sorted(observed.items()))


def architecture_refusal(sm: str) -> Refusal | None:
    """The refusal of a selected SM outside the vocabulary; None for one in it."""
    try:
        _sm(sm)
    except _RefusedError as refused:
        return refused.refusal
    return None


def prepare(request: DevicePreflightRequest, config: CudaProviderConfig) -> Refusal | Selection:
    """Steps 1-12, which decide before anything runs: the refusal, or the
    effective selection a probe is run for.

    A function of the request's values and the configuration only: nothing
    is read from the host.
    """
    try:
        return _selection(request, config, _capability(request))
    except _RefusedError as refused:
        return refused.refusal


def evaluate(
    request: DevicePreflightRequest,
    config: CudaProviderConfig,
    runner: ProbeRunner | None,
    inspector: ToolkitInspector | None,
    on_probe_start: Callable[[], None] = _no_work,
) -> Refusal | Ready:
    """Run every check in order; the first failure wins.

    ``on_probe_start`` is called once, just before the probe runs (the
    injected runner or the configured probe); never when no probe runs.
    """
    prepared = prepare(request, config)
    if isinstance(prepared, Refusal):
        return prepared
    selection = prepared
    capability = selection.capability
    try:
        report = _probe_report(selection, runner, on_probe_start)
        _check_report(selection, report, config)
        toolkit = (
            _toolkit_report(selection, inspector)
            if _lane(capability).toolkit_inspection
            else None
        )
        if toolkit is not None and report.driver_version is not None:
            _check_toolkit(toolkit, report.driver_version, config, selection.sm)
        return Ready(
            observations=_observations(selection, report, toolkit, config),
            device_name=_device_name(selection.ordinal, report),
        )
    except _RefusedError as refused:
        return refused.refusal
