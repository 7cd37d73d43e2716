"""python -m rextio_device_cuda: explain, preflight, runtime-source, pin-probe, probe,
build-probe, validate, manifest.

The command line sits above the provider: a preflight runs through Core and
the provider's public ``preflight()`` (``_standalone``), and every text about
a reason code comes from ``_explain``. Bad input gets a message and a
non-zero exit, never a traceback: 0 success / ready, 1 not ready or refused,
2 unusable input.
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final, NoReturn

from rextio.devices import ResolvedDevicePlan

from rextio_device_cuda import _build_probe, _codes, _refusal_text, _validate
from rextio_device_cuda._errors import CudaProbeError
from rextio_device_cuda._explain import explain_lines, refusal_record
from rextio_device_cuda._pin_text import PathNotTomlError, binary_lines, pin_lines, toml_string
from rextio_device_cuda._provider_spec import CAPABILITIES, PROVIDER_SPEC
from rextio_device_cuda._runner import probe_file_sha256
from rextio_device_cuda._shipped import (
    NO_SHIPPED_PROBE,
    NoShippedBinariesError,
    ShippedBinaryError,
    shipped_binary,
)
from rextio_device_cuda._standalone import (
    NotRun,
    OptionsRejectedError,
    Refused,
    standalone_preflight,
)
from rextio_device_cuda.runtime_source import (
    INSTALL_PARENT,
    RuntimeSourceError,
    install_runtime_source,
)

EXIT_READY: Final = 0
EXIT_NOT_READY: Final = 1
EXIT_USAGE: Final = 2
# The shipped manifest JSON (contract section 2), in the package beside this module.
MANIFEST_RESOURCE: Final = "manifest.json"

_RESULT_TEXT: Final = re.compile(r"-?[0-9]{1,10}", re.ASCII)


class _UsageError(Exception):
    """Input the command cannot use; reported in one line with exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        raise _UsageError(message)


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
    _print_lines(explain_lines(code, cuda_result=result))
    return EXIT_READY


def _print_refusal(refused: Refused, as_json: bool) -> None:
    code, status = refused.reason_code, refused.result.status.value
    if as_json:
        record = refusal_record(code, status, refused.facts, refused.cuda_result)
        print(json.dumps(record, indent=2, sort_keys=True))
    else:
        print(f"not ready ({status})", file=sys.stderr)
        print("\n".join(explain_lines(code, refused.facts, refused.cuda_result)), file=sys.stderr)


def _preflight(arguments: argparse.Namespace) -> int:
    capability = CAPABILITIES.get(arguments.capability)
    if capability is None:
        raise _UsageError(f"unknown capability; choose one of: {', '.join(sorted(CAPABILITIES))}")
    try:
        outcome = standalone_preflight(
            capability,
            probe=arguments.probe,
            device=arguments.device,
            sm=arguments.sm,
            toolkit_root=arguments.toolkit_root,
            probe_sha256=arguments.probe_sha256,
            driver_root=arguments.driver_root,
        )
    except OptionsRejectedError as error:
        raise _UsageError(str(error)) from error
    if isinstance(outcome, Refused):
        _print_refusal(outcome, arguments.json)
        return EXIT_NOT_READY
    if isinstance(outcome, NotRun):
        print(f"error: {outcome.why}", file=sys.stderr)
        return EXIT_NOT_READY
    print(json.dumps(_plan_record(outcome.plan), indent=2, sort_keys=True))
    return EXIT_READY


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
        installed = install_runtime_source(Path(arguments.into))
    except RuntimeSourceError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_NOT_READY
    for crate in installed:
        print(f"{'installed' if crate.written else 'already current'}: {crate.install_dir}")
    return EXIT_READY


def _print_lines(lines: list[str]) -> None:
    print("\n".join(lines))


def _pin_probe(arguments: argparse.Namespace) -> int:
    path = os.path.abspath(arguments.path)
    try:
        # Checked first: a path rextio.toml cannot hold is refused before the probe is read.
        toml_string(path)
    except PathNotTomlError as error:
        raise _UsageError(str(error)) from error
    try:
        digest = probe_file_sha256(path)
    except CudaProbeError as error:
        print("\n".join(explain_lines(error.reason_code, error.facts)), file=sys.stderr)
        return EXIT_NOT_READY
    _print_lines([digest, *pin_lines(path, digest)])
    return EXIT_READY


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
    try:
        pinned = pin_lines(path, digest)
    except PathNotTomlError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_NOT_READY
    _print_lines([*binary_lines("probe", path, digest, "the SHA-256 this wheel recorded"), *pinned])
    return EXIT_READY


def _build_probe_command(arguments: argparse.Namespace) -> int:
    try:
        into = _build_probe.destination(arguments.into)
        paths = _build_probe.binary_paths(into)
        # Checked before building: a path rextio.toml cannot hold is no use.
        for path in paths:
            toml_string(str(path))
        built = _build_probe.build_probe(into)
    except (_build_probe.BuildProbeUsageError, PathNotTomlError) as error:
        raise _UsageError(str(error)) from error
    except _build_probe.BuildProbeError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_NOT_READY
    note = "built here from the sources this package carries"
    lines: list[str] = []
    for name, binary in zip(("probe", "smoke"), built, strict=True):
        lines.extend(binary_lines(name, str(binary.path), binary.sha256, note))
    probe = built[0]
    _print_lines([*lines, *pin_lines(str(probe.path), probe.sha256)])
    return EXIT_READY


def _manifest(arguments: argparse.Namespace) -> int:
    resource = importlib.resources.files(__package__).joinpath(MANIFEST_RESOURCE)
    try:
        data = resource.read_bytes()
    except OSError as error:
        print(
            f"error: this installation carries no {MANIFEST_RESOURCE} ({error.strerror}); "
            "reinstall the package",
            file=sys.stderr,
        )
        return EXIT_NOT_READY
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
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
    output = None if arguments.output is None else Path(arguments.output)
    validated = _validate.run(
        sm=arguments.sm, device=arguments.device, toolkit_root=arguments.toolkit_root, output=output
    )
    return EXIT_READY if validated else EXIT_NOT_READY


def _parser() -> _Parser:
    parser = _Parser(
        prog="python -m rextio_device_cuda",
        description=(
            "Explain the provider's reason codes, run one preflight through Rextio Core, "
            "install the packaged runtime and loader crates into a project, print the pin of "
            "the installed (or a built) probe, build the probe from the packaged sources, "
            "validate an NVIDIA host, or print the provider manifest. "
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
        help="install the packaged runtime and loader crates into a project",
        description=(
            "Extract every packaged crate (SHA-256 checked), the runtime and the reviewed "
            f"loader, beside each other into PROJECT_DIR/{INSTALL_PARENT}/; a rerun over an "
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
    build_probe = commands.add_parser(
        "build-probe",
        help="build the probe and smoke from the packaged sources with cargo",
        description=(
            "Build the reviewed probe and lifetime smoke from the sources this package "
            "carries, with your cargo (release, --locked; rustup picks the pinned "
            "toolchain), and print their paths, SHA-256 and the [target.device_options] "
            "lines to paste, as the probe command does. For platforms where no binary ships. "
            "Nothing is built unless asked."
        ),
    )
    build_probe.add_argument(
        "--into",
        metavar="DIR",
        help=(
            "the directory the binaries are written to (created when missing; default: "
            f"{_build_probe.default_directory()})"
        ),
    )
    build_probe.set_defaults(handler=_build_probe_command)
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
    manifest = commands.add_parser(
        "manifest",
        help="print the provider manifest JSON this package ships",
        description=(
            "Print rextio_device_cuda/manifest.json byte for byte: the provider manifest as "
            "canonical JSON (manifest().to_dict(), keys sorted, two-space indent). A tool can "
            "read the same file from the installed package without importing it."
        ),
    )
    manifest.set_defaults(handler=_manifest)
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
