"""python -m rextio_device_cuda: explain, preflight, runtime-source, pin-probe, probe, validate.

Bad input gets a message and a non-zero exit, never a traceback: 0 success /
ready, 1 not ready or refused, 2 unusable input.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final, NamedTuple, NoReturn

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

from rextio_device_cuda import _codes, _refusal_text
from rextio_device_cuda._declarations import frozen_requirement
from rextio_device_cuda._errors import CudaProbeError
from rextio_device_cuda._preflight_checks import Refusal
from rextio_device_cuda._provider_spec import (
    CAPABILITIES,
    PROVIDER_SPEC,
    CapabilitySpec,
    RawDriverLaneSpec,
)
from rextio_device_cuda._runner import probe_file_sha256
from rextio_device_cuda._shipped import NoShippedBinariesError, ShippedBinaryError, shipped_binary
from rextio_device_cuda.provider import CudaDeviceProvider, refusal_logger
from rextio_device_cuda.runtime_source import RuntimeSourceError, install_runtime_source

EXIT_READY: Final = 0
EXIT_NOT_READY: Final = 1
EXIT_USAGE: Final = 2
# Raw lanes preflight the manual-validation profile of contract section 8.
# The contract §8 standalone requirement for raw-driver lanes.
_VALIDATION: Final = PROVIDER_SPEC.validation_requirement
_PROVIDER_ID: Final = PROVIDER_SPEC.manifest.provider_id
_BACKEND: Final = PROVIDER_SPEC.manifest.backend
_ARCHITECTURES: Final = tuple(item.sm for item in PROVIDER_SPEC.manifest.architectures)


_RESULT_TEXT: Final = re.compile(r"-?[0-9]{1,10}", re.ASCII)


class _UsageError(Exception):
    """Input the command cannot use; reported in one line with exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        raise _UsageError(message)


class Refused(NamedTuple):
    """A refused standalone preflight: Core's result, and what decided it."""

    result: DevicePreflightResult
    # This package's own refusal (its observed facts); None for another provider.
    decided_by: Refusal | None


class _RecordingProvider:
    """Delegates to the loaded provider and keeps its last preflight result."""

    def __init__(self, inner: DeviceProvider) -> None:
        self._inner = inner
        self.last_preflight: DevicePreflightResult | None = None
        # What decided the last refusal, when the provider is this package's own.
        self.last_refusal: Refusal | None = None

    def manifest(self) -> DeviceProviderManifest:
        return self._inner.manifest()

    def preflight(self, request: DevicePreflightRequest) -> DevicePreflightResult:
        if isinstance(self._inner, CudaDeviceProvider):
            self.last_preflight, self.last_refusal = self._inner._preflight_outcome(request)
        else:
            self.last_preflight = self._inner.preflight(request)
        return self.last_preflight

    def build_contribution(self, request: DevicePreflightRequest) -> DeviceBuildContribution:
        return self._inner.build_contribution(request)


def explain_lines(
    code: str, facts: str | None = None, cuda_result: int | None = None
) -> list[str]:
    """A code's explanation, the observed facts that decided it, and its remedy, as printed."""
    text = _refusal_text.explanation(code, cuda_result)
    if text is None:
        lines = [f"{code}: not a reason code of {_PROVIDER_ID}"]
    else:
        lines = [f"{code}: {text[0]}"]
    if facts:
        lines.append(f"observed: {facts}")
    if text is not None:
        lines.append(f"remedy: {text[1]}")
    return lines


def _cuda_result(text: str | None) -> int | None:
    """A CUresult as the probe reports it: a decimal int32."""
    if text is None:
        return None
    # Plain ASCII digits only (int() would also take spaces, "+" and "_").
    value = int(text) if _RESULT_TEXT.fullmatch(text) else None
    if value is None or not -(2**31) <= value < 2**31:
        raise _UsageError("--cuda-result takes a decimal CUDA result, e.g. 304")
    return value


def _explain(arguments: argparse.Namespace) -> int:
    code = arguments.code
    if arguments.list:
        if code is not None:
            raise _UsageError("give either a reason code or --list, not both")
        for listed in sorted(PROVIDER_SPEC.reason_codes):
            print(f"{listed}: {PROVIDER_SPEC.reason_codes[listed][0]}")
        return EXIT_READY
    if code is None:
        raise _UsageError("give a reason code to explain, or --list")
    if _codes.reason_text(code) is None:
        print(f"unknown reason code: {code[:80]!r}", file=sys.stderr)
        return EXIT_USAGE
    result = _cuda_result(arguments.cuda_result)
    if result is not None and not _refusal_text.takes_cuda_result(code):
        raise _UsageError(
            "--cuda-result applies only to codes the probe reports with a CUDA result: "
            + ", ".join(sorted(_refusal_text.RESULT_CODES))
        )
    print("\n".join(explain_lines(code, cuda_result=result)))
    return EXIT_READY


def _profile(capability: CapabilitySpec, ordinal: str, sm: str) -> ArtifactProfile:
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


def _print_refusal(code: str, as_json: bool, status: str, refusal: Refusal | None) -> None:
    # The observed facts come only from this package's own provider's refusal.
    same = refusal is not None and refusal.reason_code == code
    facts = refusal.facts if same and refusal is not None else None
    result = refusal.cuda_result if same and refusal is not None else None
    text = _refusal_text.explanation(code, result)
    if as_json:
        print(
            json.dumps(
                {
                    "status": status,
                    "reason_code": code,
                    "explanation": text[0] if text else None,
                    "remedy": text[1] if text else None,
                    "observed": facts,
                    "cuda_result": result,
                    "cuda_result_name": (
                        _refusal_text.result_name(result) if result is not None else None
                    ),
                    "support_claim": False,
                },
                indent=2,
                sort_keys=True,
            )
        )
    else:
        print(f"not ready ({status})", file=sys.stderr)
        print("\n".join(explain_lines(code, facts, result)), file=sys.stderr)


def _preflight(arguments: argparse.Namespace) -> int:
    capability = CAPABILITIES.get(arguments.capability)
    if capability is None:
        raise _UsageError(
            f"unknown capability; choose one of: {', '.join(sorted(CAPABILITIES))}"
        )
    plan, refused, error = standalone_preflight(
        capability,
        arguments.probe,
        arguments.device,
        arguments.sm,
        toolkit_root=arguments.toolkit_root,
        probe_sha256=arguments.probe_sha256,
        driver_root=arguments.driver_root,
    )
    if refused is not None:
        result = refused.result
        _print_refusal(
            result.reason_codes[0], arguments.json, result.status.value, refused.decided_by
        )
        return EXIT_NOT_READY
    if plan is None:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_NOT_READY
    print(json.dumps(_plan_record(plan), indent=2, sort_keys=True))
    return EXIT_READY


def standalone_preflight(
    capability: CapabilitySpec,
    probe: str,
    device: str,
    sm: str,
    *,
    toolkit_root: str | None = None,
    probe_sha256: str | None = None,
    driver_root: str | None = None,
) -> tuple[ResolvedDevicePlan | None, Refused | None, str | None]:
    """One standalone plan resolved through Core's ``resolve_device_plan``.

    Returns (plan, None, None) when ready, (None, refusal, None) when the
    provider refused, and (None, None, why) when Core failed otherwise.
    Options Core rejects raise ``_UsageError``.
    """
    keys = PROVIDER_SPEC.option_keys
    option_pairs = [(keys.probe, probe), (keys.device, device), (keys.sm, sm)]
    if toolkit_root is not None:
        option_pairs.append((keys.toolkit, toolkit_root))
    if probe_sha256 is not None:
        option_pairs.append((keys.probe_sha256, probe_sha256))
    if driver_root is not None:
        option_pairs.append((keys.driver_root, driver_root))
    try:
        options = DeviceProviderOptions(tuple(option_pairs))
        selection = DeviceProviderSelection(_PROVIDER_ID, capability.id)
    except ValueError as error:
        raise _UsageError(str(error)) from error
    # Core composes only a valid requirement; bad ordinals and SMs reach the
    # provider through the options and come back as reason codes.
    plain = device.isascii() and device.isdigit() and len(device) <= 4
    ordinal = str(int(device)) if plain else "0"
    profile = _profile(capability, ordinal, sm if sm in _ARCHITECTURES else _ARCHITECTURES[0])
    try:
        loaded, source = load_selected_device_provider(selection)
    except DeviceProviderError as error:
        return None, None, str(error)
    recording = _RecordingProvider(loaded)
    try:
        with _provider_warnings_silenced():
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
            return None, Refused(result, recording.last_refusal), None
        return None, None, str(error)
    if plan is None:
        return None, None, "no plan was resolved"
    return plan, None, None


@contextlib.contextmanager
def _provider_warnings_silenced() -> Iterator[None]:
    """This command prints a refusal itself, with its remedy; the log line would repeat it."""
    logger = refusal_logger()
    previous = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = previous


def _plan_record(plan: ResolvedDevicePlan) -> dict[str, object]:
    """The redacted plan; Core 0.1.6 authorizes lowering only for gpu:0.

    A ready preflight of another device is still valid evidence, so every
    record but the lowering authorization is shown, and why it is absent.
    """
    try:
        return plan.to_dict()
    except ValueError as error:
        return {
            "selection": plan.selection.to_dict(),
            "artifact_profile": plan.artifact_profile.to_dict(),
            "manifest": plan.manifest.to_dict(),
            "capability": plan.capability.to_dict(),
            "preflight": plan.preflight.to_dict(),
            "contribution": plan.contribution.to_dict(),
            "source": plan.source.to_dict() if plan.source is not None else None,
            "options": plan.options.public_dict(),
            "lock": plan.lock_record().to_dict(),
            "report": plan.report_record().to_dict(),
            "lowering_authorization": None,
            "lowering_authorization_refused": str(error),
        }


def _runtime_source(arguments: argparse.Namespace) -> int:
    try:
        written = install_runtime_source(Path(arguments.into))
    except RuntimeSourceError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_NOT_READY
    install_dir = PROVIDER_SPEC.runtime_package.install_dir
    print(f"{'installed' if written else 'already current'}: {install_dir}")
    return EXIT_READY


def _pin_probe(arguments: argparse.Namespace) -> int:
    path = os.path.abspath(arguments.path)
    try:
        digest = probe_file_sha256(path)
    except CudaProbeError as error:
        print("\n".join(explain_lines(error.reason_code, error.facts)), file=sys.stderr)
        return EXIT_NOT_READY
    print(digest)
    _print_pin(path, digest)
    return EXIT_READY


def _print_pin(path: str, digest: str) -> None:
    keys = PROVIDER_SPEC.option_keys
    print("# rextio.toml, under [target.device_options]:")
    print(f"{keys.probe} = {json.dumps(path)}")
    print(f'{keys.probe_sha256} = "{digest}"')


NO_SHIPPED_PROBE: Final = (
    "no probe ships for this platform: this installation carries none (the pure "
    "py3-none-any wheel; the manylinux_2_17 x86_64 and aarch64 wheels carry one). "
    "Build it from the source repository with "
    "`cargo build --release --locked -p rextio-cuda-probe`, then print its pin with "
    "`python -m rextio_device_cuda pin-probe target/release/rextio-cuda-driver-probe`."
)


def _probe(arguments: argparse.Namespace) -> int:
    try:
        shipped = shipped_binary(PROVIDER_SPEC.probe_report.probe)
    except NoShippedBinariesError:
        print(f"error: {NO_SHIPPED_PROBE}", file=sys.stderr)
        return EXIT_NOT_READY
    except ShippedBinaryError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_NOT_READY
    path = str(shipped.path)
    try:
        # The digest a pinned preflight computes, which also checks the file
        # is a regular executable.
        digest = probe_file_sha256(path)
    except CudaProbeError as error:
        print("\n".join(explain_lines(error.reason_code, error.facts)), file=sys.stderr)
        return EXIT_NOT_READY
    if digest != shipped.sha256:
        print("error: the installed probe changed while it was read; run again", file=sys.stderr)
        return EXIT_NOT_READY
    print(f"probe: {path}")
    print(f"sha256: {digest} (the SHA-256 this wheel recorded)")
    _print_pin(path, digest)
    return EXIT_READY


def _sm_argument(text: str) -> str:
    if re.fullmatch(PROVIDER_SPEC.policy.sm_pattern, text) is None:
        raise argparse.ArgumentTypeError(f"must look like sm_80, not {text[:20]!r}")
    return text


def _device_argument(text: str) -> int:
    limit = PROVIDER_SPEC.policy.device_ordinal_max
    if not (text.isascii() and text.isdigit() and len(text) <= 4 and int(text) <= limit):
        raise argparse.ArgumentTypeError(f"must be a number from 0 to {limit}, not {text[:20]!r}")
    return int(text)


def _validate_command(arguments: argparse.Namespace) -> int:
    # Imported here: only this command needs it, and it imports this module.
    from rextio_device_cuda import _validate

    return _validate.run(arguments)


def _parser() -> _Parser:
    parser = _Parser(
        prog="python -m rextio_device_cuda",
        description=(
            "Explain the provider's reason codes, run one preflight through Rextio Core, "
            "install the packaged runtime source into a project, or print the pin of the "
            "installed (or a built) probe. "
            "Exit status: 0 success or ready, 1 not ready or refused, 2 unusable input."
        ),
    )
    commands = parser.add_subparsers(
        dest="command",
        required=True,
        parser_class=_Parser,
        metavar="COMMAND",
        help="one of the commands below; COMMAND --help describes its arguments",
    )
    explain = commands.add_parser(
        "explain",
        help="explain a reason code and say what to change",
        description="Print what a reason code means and what to change.",
    )
    explain.add_argument(
        "code", nargs="?", help="a reason code, e.g. CUDA_SM_MISMATCH (case-sensitive)"
    )
    explain.add_argument(
        "--list", action="store_true", help="list every reason code with its explanation"
    )
    explain.add_argument(
        "--cuda-result",
        metavar="N",
        help="the CUDA result the probe reported with the code (its cuda_result), e.g. 304",
    )
    explain.set_defaults(handler=_explain)
    preflight = commands.add_parser(
        "preflight",
        help="run one provider preflight through Rextio Core",
        description=(
            "Resolve a standalone device plan through Core's resolve_device_plan: "
            "print the redacted plan when ready, else the reason code and its remedy."
        ),
    )
    preflight.add_argument(
        "--capability",
        required=True,
        metavar="ID",
        help=f"capability id, one of: {', '.join(sorted(CAPABILITIES))}",
    )
    preflight.add_argument(
        "--probe", required=True, metavar="PATH", help="absolute path of the built probe"
    )
    preflight.add_argument(
        "--device", required=True, metavar="N", help="CUDA device ordinal, e.g. 0"
    )
    preflight.add_argument(
        "--sm", required=True, metavar="sm_NN", help="the device's architecture, e.g. sm_80"
    )
    preflight.add_argument(
        "--toolkit-root",
        metavar="DIR",
        help="absolute CUDA toolkit root to validate (raw-driver capabilities only)",
    )
    preflight.add_argument(
        "--driver-root",
        metavar="DIR",
        help="absolute directory whose libcuda.so.1 is the only driver the probe tries",
    )
    preflight.add_argument(
        "--json", action="store_true", help="print the plan or the refusal as JSON"
    )
    preflight.add_argument(
        "--probe-sha256",
        metavar="DIGEST",
        help="run the probe only if its SHA-256 is DIGEST (64 lowercase hex digits)",
    )
    preflight.set_defaults(handler=_preflight)
    runtime = commands.add_parser(
        "runtime-source",
        help="install the packaged runtime source into a project",
        description=(
            "Extract the packaged rextio-cuda-runtime crate (SHA-256 checked) into "
            f"PROJECT_DIR/{PROVIDER_SPEC.runtime_package.install_dir}; a rerun over an "
            "identical install, build products included, changes nothing."
        ),
    )
    runtime.add_argument(
        "--into",
        required=True,
        metavar="PROJECT_DIR",
        help="an existing project directory to install into",
    )
    runtime.set_defaults(handler=_runtime_source)
    pin = commands.add_parser(
        "pin-probe", help="print a probe's SHA-256 and the rextio.toml lines that pin it"
    )
    pin.add_argument("path", metavar="PATH", help="the probe executable")
    pin.set_defaults(handler=_pin_probe)
    probe = commands.add_parser(
        "probe",
        help="print the installed probe's path, SHA-256 and the rextio.toml lines that pin it",
        description=(
            "Print the absolute path of the probe this platform wheel installed, its SHA-256 "
            "(checked against the wheel's record) and the [target.device_options] lines to "
            "paste. Nothing is selected by itself: the provider runs only the probe the "
            "configuration names."
        ),
    )
    probe.set_defaults(handler=_probe)
    validate = commands.add_parser(
        "validate",
        help="path-free evidence that this NVIDIA host works, with the shipped probe and smoke",
        description=(
            "On a trusted NVIDIA host: run the probe and the lifetime smoke this installation "
            "ships, and a standalone preflight through Core, and print path-free JSON evidence "
            "(support_claim, kernel_executed and certification_ready are always false). "
            "Exit 0 only when the preflight is ready and the smoke completes."
        ),
    )
    validate.add_argument(
        "--sm", required=True, type=_sm_argument, metavar="sm_NN", help="e.g. sm_80"
    )
    validate.add_argument(
        "--device", default=0, type=_device_argument, metavar="N", help="CUDA device (default 0)"
    )
    validate.add_argument(
        "--toolkit-root", metavar="DIR", help="absolute CUDA toolkit root to validate"
    )
    validate.add_argument("--output", metavar="FILE", help="also write the evidence to FILE")
    validate.set_defaults(handler=_validate_command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    try:
        arguments = _parser().parse_args(argv)
        status: int = arguments.handler(arguments)
        return status
    except _UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # A reader that stopped early (`| head`) is not an error worth a traceback;
        # stdout goes to /dev/null so the interpreter's final flush stays quiet.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_NOT_READY
