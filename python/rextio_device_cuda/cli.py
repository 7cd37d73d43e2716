"""python -m rextio_device_cuda: explain, preflight, runtime-source, pin-probe, probe,
build-probe, reproduce, validate, manifest.

The command line sits above the provider: a preflight runs through Core and
the provider (``_standalone``), and every text about a reason code comes from
``_explain``. Every argument is checked once, by its type below, while the
command line is parsed and before any work: unusable input is one ``error:``
line and exit 2. 0 success / ready, 1 not ready or refused. Never a
traceback: a closed or full standard output is one line on stderr and exit 1.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.resources
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, NamedTuple, NoReturn

from rextio.devices import ResolvedDevicePlan

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

from rextio_device_cuda import _build_probe, _refusal_text, _validate
from rextio_device_cuda._errors import CudaProbeError
from rextio_device_cuda._explain import (
    OPTION_FLAGS,
    code_named,
    explain_lines,
    nearest_code,
    refusal_record,
)
from rextio_device_cuda._pin_text import PathNotTomlError, binary_lines, pin_lines, toml_string
from rextio_device_cuda._preflight_checks import Refusal
from rextio_device_cuda._provider_spec import CAPABILITIES, PROVIDER_SPEC, CapabilitySpec
from rextio_device_cuda._refusal_text import Refused
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
    Resolved,
    standalone_preflight,
)
from rextio_device_cuda.config import device_ordinal, is_probe_sha256, is_sm_name
from rextio_device_cuda.runtime_source import (
    INSTALL_PARENT,
    RuntimeSourceError,
    install_runtime_source,
)

EXIT_READY: Final = 0
EXIT_NOT_READY: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130
PROG: Final = "python -m rextio_device_cuda"
# The shipped manifest JSON (docs/interfaces.md), in the package beside this module.
MANIFEST_RESOURCE: Final = "manifest.json"

_RESULT_TEXT: Final = re.compile(r"-?[0-9]{1,10}", re.ASCII)
_OBSERVATION: Final = PROVIDER_SPEC.observation_keys
_SHOWN_CHARS: Final = 60


class _UsageError(Exception):
    """Input the command cannot use; reported in one line with exit 2."""


class _OutputError(Exception):
    """Standard output could not be written (closed, full, a broken pipe)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        raise _UsageError(message)

    def print_help(self, file: SupportsWrite[str] | None = None) -> None:
        # argparse would drop a failed write silently; ours says so.
        if file is None:
            _out(self.format_help().rstrip("\n"))
        else:
            super().print_help(file)


class _Version(argparse.Action):
    """``--version``: the version on stdout, through ``_out`` like every answer."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str) -> None:
        super().__init__(option_strings, dest, nargs=0, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        distribution = PROVIDER_SPEC.distribution
        _out(f"{distribution.name} {distribution.version}")
        parser.exit()


# -- writing -------------------------------------------------------------------------


def _out(text: str) -> None:
    """One or more lines on standard output; a failed write is an ``_OutputError``."""
    if sys.stdout is None:
        raise _OutputError("standard output is closed")
    try:
        print(text)
    except OSError as error:
        raise _OutputError(error.strerror or type(error).__name__) from error


def _err(text: str) -> None:
    """Lines on stderr, where there is one (print() would take None for stdout)."""
    if sys.stderr is not None:
        with contextlib.suppress(OSError):
            print(text, file=sys.stderr)


# -- argument types: each input is checked here, once, before any work ----------------


def _shown(text: str) -> str:
    """A value the user gave, quoted, and cut where it is longer than any valid one."""
    return repr(text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "...")


def _sm(text: str) -> str:
    if not is_sm_name(text):
        raise argparse.ArgumentTypeError(f"must look like sm_80, not {_shown(text)}")
    return text


def _device(text: str) -> int:
    value = device_ordinal(text)
    if value is None:
        limit = PROVIDER_SPEC.policy.device_ordinal_max
        raise argparse.ArgumentTypeError(f"must be a number from 0 to {limit}, not {_shown(text)}")
    return value


def _sha256(text: str) -> str:
    if not is_probe_sha256(text):
        raise argparse.ArgumentTypeError(
            f"must be a SHA-256 in 64 lowercase hexadecimal digits, not {_shown(text)}"
        )
    return text


def _capability(text: str) -> CapabilitySpec:
    capability = CAPABILITIES.get(text)
    if capability is None:
        raise argparse.ArgumentTypeError(
            f"must be one of {', '.join(sorted(CAPABILITIES))}, not {_shown(text)}"
        )
    return capability


def _cuda_result(text: str) -> int:
    """A CUresult as the probe reports it: a decimal int32."""
    # Plain ASCII digits only (int() would also take spaces, "+" and "_").
    value = int(text) if _RESULT_TEXT.fullmatch(text) else None
    if value is None or not -(2**31) <= value < 2**31:
        raise argparse.ArgumentTypeError(
            f"must be a decimal CUDA result, e.g. 304, not {_shown(text)}"
        )
    return value


def _path(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def _new_or_existing_directory(text: str) -> Path:
    """A directory that exists or can be made: not an existing non-directory."""
    if os.path.lexists(_path(text)) and not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} exists and is not a directory")
    return Path(text)


def _existing_file(text: str) -> str:
    """A file that exists (relative to the working directory or absolute), not a directory."""
    if not os.path.lexists(_path(text)):
        raise argparse.ArgumentTypeError(f"{text!r} does not exist")
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is a directory, not a file")
    return text


def _absolute(text: str) -> str:
    if not os.path.isabs(_path(text)):
        raise argparse.ArgumentTypeError(f"must be an absolute path, not {text!r}")
    if not os.path.lexists(text):
        raise argparse.ArgumentTypeError(f"{text!r} does not exist")
    return text


def _absolute_file(text: str) -> str:
    if os.path.isdir(_absolute(text)):
        raise argparse.ArgumentTypeError(f"{text!r} is a directory, not a file")
    return text


def _absolute_directory(text: str) -> str:
    if not os.path.isdir(_absolute(text)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a directory")
    return text


def _directory(text: str) -> Path:
    if not os.path.isdir(_path(text)):
        why = "is not a directory" if os.path.lexists(text) else "does not exist"
        raise argparse.ArgumentTypeError(f"{text!r} {why}")
    return Path(text)


def _output_file(text: str) -> Path:
    if os.path.isdir(_path(text)):
        raise argparse.ArgumentTypeError(f"{text!r} is a directory; name a file in it")
    parent = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(parent):
        raise argparse.ArgumentTypeError(f"the directory of {text!r} does not exist")
    return Path(text)


# -- explain ---------------------------------------------------------------------------


def _explain(arguments: argparse.Namespace) -> int:
    if arguments.list:
        if arguments.code is not None:
            raise _UsageError("give either a reason code or --list, not both")
        _out(
            "\n".join(
                line
                for code in sorted(PROVIDER_SPEC.reason_codes)
                for line in _refusal_text.wrapped(f"{code}: ", PROVIDER_SPEC.reason_codes[code][0])
            )
        )
        return EXIT_READY
    if arguments.code is None:
        raise _UsageError("give a reason code to explain, or --list")
    code = code_named(arguments.code)
    if code is None:
        nearest = nearest_code(arguments.code)
        hint = f"; did you mean {nearest}?" if nearest else f"; {PROG} explain --list lists them"
        raise _UsageError(f"unknown reason code {_shown(arguments.code)}{hint}")
    result = arguments.cuda_result
    if result is not None and not _refusal_text.takes_cuda_result(code):
        raise _UsageError(f"--cuda-result does not apply to {code}: the probe reports none with it")
    _out("\n".join(explain_lines(Refused(code, cuda_result=result))))
    return EXIT_READY


def _add_explain(commands: argparse._SubParsersAction[_Parser]) -> None:
    explain = commands.add_parser(
        "explain",
        help="explain a reason code and say what to change",
        description="Print what a reason code means and what to change.",
    )
    explain.add_argument(
        "code", nargs="?", help="a reason code, e.g. CUDA_SM_MISMATCH (any case)"
    )
    explain.add_argument(
        "--list", action="store_true", help="list every reason code with its explanation"
    )
    explain.add_argument(
        "--cuda-result",
        type=_cuda_result,
        metavar="N",
        help="the CUDA result the probe reported with the code (its cuda_result), e.g. 304",
    )
    explain.set_defaults(handler=_explain)


# -- preflight -------------------------------------------------------------------------


def _print_refusal(refusal: Refusal, as_json: bool) -> None:
    status = refusal.status.value
    if as_json:
        record = refusal_record(refusal, status, flags=OPTION_FLAGS)
        _out(json.dumps(record, indent=2, sort_keys=True))
    else:
        _err(f"not ready ({status})")
        _err("\n".join(explain_lines(refusal, flags=OPTION_FLAGS)))


def _driver_text(version: str) -> str:
    if not version.isdigit():
        return version
    number = int(version)
    return f"{number // 1000}.{(number % 1000) // 10} ({number})"


def ready_lines(capability: CapabilitySpec, resolved: Resolved) -> list[str]:
    """What a ready ``preflight`` prints in text mode: a few lines a person reads."""
    observed = dict(resolved.plan.preflight.observations)
    device = observed.get(_OBSERVATION.selected_device, "?")
    sm = observed.get(_OBSERVATION.selected_sm, "?")
    named = f"{resolved.device_name}, " if resolved.device_name else ""
    pin = observed.get(_OBSERVATION.probe_sha256)
    lines = [
        f"ready: {capability.id}",
        f"device: {device} ({named}{sm})",
        f"driver: {_driver_text(observed.get(_OBSERVATION.driver_version, '?'))}",
        f"probe: pinned to SHA-256 {pin}"
        if pin
        else "probe: not pinned (--probe-sha256 DIGEST runs it only with that digest)",
    ]
    toolkit = observed.get(_OBSERVATION.toolkit_version)
    if toolkit is not None and toolkit != _OBSERVATION.toolkit_not_configured:
        lines.append(f"toolkit: {toolkit}")
    lines.append("(--json prints the whole plan)")
    return lines


def _error_lines(text: str) -> str:
    """``error: text``, wrapped to the terminal width every line keeps."""
    return "\n".join(_refusal_text.wrapped("error: ", text))


def _preflight_probe(arguments: argparse.Namespace) -> tuple[str, str | None]:
    """The probe this preflight runs and its pin: ``--probe`` as given, else the one this
    platform wheel ships, pinned to its recorded SHA-256 (``ShippedBinaryError`` where
    that one is not the recorded one)."""
    if arguments.probe is not None:
        return arguments.probe, arguments.probe_sha256
    if arguments.probe_sha256 is not None:
        raise _UsageError(
            "--probe-sha256 pins the probe given by --probe; the shipped one is pinned already"
        )
    try:
        shipped = shipped_binary(PROVIDER_SPEC.probe_report.probe)
    except NoShippedBinariesError as error:
        raise _UsageError(
            "--probe PATH is required: no probe ships with this installation (build-probe "
            "builds one and prints its path)"
        ) from error
    return str(shipped.path), shipped.sha256


def _preflight(arguments: argparse.Namespace) -> int:
    capability: CapabilitySpec = arguments.capability
    try:
        probe, probe_sha256 = _preflight_probe(arguments)
    except ShippedBinaryError as error:
        _err(_error_lines(str(error)))
        return EXIT_NOT_READY
    try:
        outcome = standalone_preflight(
            capability,
            probe=probe,
            device=arguments.device,
            sm=arguments.sm,
            toolkit_root=arguments.toolkit_root,
            probe_sha256=probe_sha256,
            driver_root=arguments.driver_root,
        )
    except OptionsRejectedError as error:
        raise _UsageError(str(error)) from error
    if isinstance(outcome, Refusal):
        _print_refusal(outcome, arguments.json)
        return EXIT_NOT_READY
    if isinstance(outcome, NotRun):
        _err(_error_lines(outcome.why))
        return EXIT_NOT_READY
    if arguments.json:
        _out(json.dumps(_plan_record(outcome.plan), indent=2, sort_keys=True))
    else:
        _out("\n".join(ready_lines(capability, outcome)))
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


def _add_preflight(commands: argparse._SubParsersAction[_Parser]) -> None:
    preflight = commands.add_parser(
        "preflight",
        help="run one provider preflight through Rextio Core",
        description=(
            "Resolve a standalone device plan through Core's resolve_device_plan: "
            "print a few lines (or, with --json, the redacted plan) when ready, else the "
            "reason code and its remedy."
        ),
    )
    preflight.add_argument(
        "--capability",
        required=True,
        type=_capability,
        metavar="ID",
        help=f"capability id, one of: {', '.join(sorted(CAPABILITIES))}",
    )
    _add_selection(
        preflight,
        _SelectionHelp(
            device="CUDA device ordinal, e.g. 0",
            toolkit_root="absolute CUDA toolkit root to validate (raw-driver capabilities only)",
            driver_root="absolute directory whose libcuda.so.1 is the only driver the probe tries",
            probe="absolute path of a built probe (default: the one this platform wheel ships)",
            probe_sha256="run the probe only if its SHA-256 is DIGEST (64 lowercase hex digits)",
        ),
        device_default=None,
    )
    preflight.add_argument(
        "--json", action="store_true", help="print the whole plan or the refusal as JSON"
    )
    preflight.set_defaults(handler=_preflight)


class _SelectionHelp(NamedTuple):
    """The help texts of the options ``preflight`` and ``validate`` share, per command."""

    device: str
    toolkit_root: str
    driver_root: str
    probe: str
    probe_sha256: str


def _add_selection(parser: _Parser, helps: _SelectionHelp, *, device_default: int | None) -> None:
    """The options ``preflight`` and ``validate`` share: the device and its
    architecture, the toolkit and driver roots, the probe and its pin.
    ``device_default`` None: ``--device`` is required."""
    parser.add_argument(
        "--sm",
        required=True,
        type=_sm,
        metavar="sm_NN",
        help="the device's architecture, e.g. sm_80",
    )
    parser.add_argument(
        "--device",
        required=device_default is None,
        default=device_default,
        type=_device,
        metavar="N",
        help=helps.device,
    )
    parser.add_argument(
        "--toolkit-root", type=_absolute_directory, metavar="DIR", help=helps.toolkit_root
    )
    parser.add_argument(
        "--driver-root", type=_absolute_directory, metavar="DIR", help=helps.driver_root
    )
    parser.add_argument("--probe", type=_absolute_file, metavar="PATH", help=helps.probe)
    parser.add_argument(
        "--probe-sha256", type=_sha256, metavar="DIGEST", help=helps.probe_sha256
    )


# -- runtime-source, pin-probe, probe, build-probe --------------------------------------


def _runtime_source(arguments: argparse.Namespace) -> int:
    try:
        installed = install_runtime_source(arguments.into)
    except RuntimeSourceError as error:
        _err(_error_lines(str(error)))
        return EXIT_NOT_READY
    _out(
        "\n".join(
            f"{'installed' if crate.written else 'already current'}: {crate.install_dir}"
            for crate in installed
        )
    )
    return EXIT_READY


def _add_runtime_source(commands: argparse._SubParsersAction[_Parser]) -> None:
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
        type=_directory,
        metavar="PROJECT_DIR",
        help="an existing project directory to install into",
    )
    runtime.set_defaults(handler=_runtime_source)


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
        # The probe this command reads is its PATH argument.
        flags = {PROVIDER_SPEC.option_keys.probe: "PATH"}
        _err("\n".join(explain_lines(Refused(error.reason_code, error.facts), flags=flags)))
        return EXIT_NOT_READY
    _out("\n".join([digest, *pin_lines(path, digest)]))
    return EXIT_READY


def _add_pin_probe(commands: argparse._SubParsersAction[_Parser]) -> None:
    pin = commands.add_parser(
        "pin-probe",
        help="print a probe's SHA-256 and the rextio.toml lines that pin it",
        description=(
            "Read the probe at PATH (a built one, e.g. what build-probe wrote), and print its "
            "SHA-256 and the [target.device_options] lines that run only that probe."
        ),
    )
    pin.add_argument("path", type=_existing_file, metavar="PATH", help="the probe executable")
    pin.set_defaults(handler=_pin_probe)


def _probe(arguments: argparse.Namespace) -> int:
    try:
        shipped = shipped_binary(PROVIDER_SPEC.probe_report.probe)
    except NoShippedBinariesError:
        _err(_error_lines(NO_SHIPPED_PROBE))
        return EXIT_NOT_READY
    except ShippedBinaryError as error:
        _err(_error_lines(str(error)))
        return EXIT_NOT_READY
    path = str(shipped.path)
    try:
        # The digest a pinned preflight computes, which also checks the file
        # is a regular executable.
        digest = probe_file_sha256(path)
    except CudaProbeError as error:
        _err("\n".join(explain_lines(Refused(error.reason_code, error.facts))))
        return EXIT_NOT_READY
    if digest != shipped.sha256:
        _err("error: the installed probe changed while it was read; run again")
        return EXIT_NOT_READY
    try:
        pinned = pin_lines(path, digest)
    except PathNotTomlError as error:
        _err(f"error: {error}")
        return EXIT_NOT_READY
    recorded = binary_lines("probe", path, digest, "the SHA-256 this wheel recorded")
    _out("\n".join([*recorded, *pinned]))
    return EXIT_READY


def _add_probe(commands: argparse._SubParsersAction[_Parser]) -> None:
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


def _default_build_directory() -> Path | None:
    """build-probe's default directory, or None where it cannot be known (no home)."""
    try:
        return _build_probe.default_directory()
    except (RuntimeError, KeyError, _build_probe.BuildProbeError):
        return None


def _build_probe_command(arguments: argparse.Namespace) -> int:
    try:
        into: Path = (
            _build_probe.default_directory() if arguments.into is None else arguments.into
        )
        # Checked before building: a path rextio.toml cannot hold is no use.
        for path in _build_probe.binary_paths(into):
            toml_string(str(path))
        # None: the default directory, as the build resolved the cache.
        built = _build_probe.build_probe(arguments.into)
        probe, smoke = built
        pinned = pin_lines(str(probe.path), probe.sha256)
    except (_build_probe.BuildProbeUsageError, PathNotTomlError) as error:
        raise _UsageError(str(error)) from error
    except _build_probe.BuildProbeError as error:
        _err(_error_lines(str(error)))
        return EXIT_NOT_READY
    note = "built here from the sources this package carries"
    lines: list[str] = []
    for name, binary in zip(("probe", "smoke"), built, strict=True):
        lines.extend(binary_lines(name, str(binary.path), binary.sha256, note))
    validate = _validate_words(
        ["--sm", "sm_NN"], (str(probe.path), probe.sha256), (str(smoke.path), smoke.sha256)
    )
    _out(
        "\n".join(
            [
                *lines,
                *pinned,
                "# validate an NVIDIA host with them (sm_NN: its GPU's, e.g. sm_80):",
                *_continued(validate),
            ]
        )
    )
    return EXIT_READY


def _add_build_probe(commands: argparse._SubParsersAction[_Parser]) -> None:
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
        type=_new_or_existing_directory,
        metavar="DIR",
        help=(
            "the directory the binaries are written to (created when missing; default: a "
            "folder named after this version in your cache directory, $XDG_CACHE_HOME or "
            "~/.cache, %%LOCALAPPDATA%% on Windows)"
        ),
    )
    build_probe.set_defaults(handler=_build_probe_command)


def _reproduce_command(arguments: argparse.Namespace) -> int:
    # Imported here: only this command needs the rebuild's machinery.
    from rextio_device_cuda import _reproduce

    wheel = None if arguments.wheel is None else Path(arguments.wheel)
    # The wheel by its file name: the name says which wheel, the rest is the user's.
    what = "this installation" if wheel is None else wheel.name
    try:
        outcomes = _reproduce.reproduce(wheel)
    except _reproduce.ReproduceUsageError as error:
        raise _UsageError(f"{what}: {error}") from error
    except _build_probe.BuildProbeUsageError as error:
        raise _UsageError(str(error)) from error
    except _build_probe.BuildProbeError as error:
        _err(_error_lines(str(error)))
        return EXIT_NOT_READY
    _out("\n".join(_reproduce.outcome_lines(outcomes)))
    return EXIT_READY if all(outcome.reproduced for outcome in outcomes) else EXIT_NOT_READY


def _add_reproduce(commands: argparse._SubParsersAction[_Parser]) -> None:
    reproduce = commands.add_parser(
        "reproduce",
        help="rebuild the shipped probe and smoke from the sources the wheel carries and compare",
        description=(
            "Rebuild the probe and smoke of this installation, or of a platform wheel given "
            "with --wheel, from the sources that wheel carries with its build recipe (Rust's "
            "pinned toolchain, zig and cargo-zigbuild fetched from PyPI by hash into your "
            "cache), and compare them with the binaries it ships and its SHA256SUMS. Exit "
            "status 0 when every binary is reproduced, 1 when any differs."
        ),
    )
    reproduce.add_argument(
        "--wheel",
        type=_path,
        metavar="FILE",
        help="a manylinux x86_64 or aarch64 wheel of this package (default: this installation)",
    )
    reproduce.set_defaults(handler=_reproduce_command)


# -- validate --------------------------------------------------------------------------


def _command_line(words: list[str]) -> str:
    """``words`` as the reader's shell takes them."""
    if sys.platform == "win32":
        return subprocess.list2cmdline(words)
    return shlex.join(words)


def _validate_options(arguments: argparse.Namespace) -> list[str]:
    """The options of this ``validate`` other than the binaries, as given."""
    words = ["--sm", arguments.sm, "--device", str(arguments.device)]
    for flag, value in (
        ("--toolkit-root", arguments.toolkit_root),
        ("--driver-root", arguments.driver_root),
        ("--output", arguments.output),
    ):
        if value is not None:
            words += [flag, str(value)]
    return words


def _validate_words(
    options: list[str], probe: tuple[str, str], smoke: tuple[str, str]
) -> list[str]:
    """``validate`` with ``options``, and each binary (path, SHA-256) given and pinned."""
    return [
        *PROG.split(), "validate", *options,
        "--probe", probe[0], "--probe-sha256", probe[1],
        "--smoke", smoke[0], "--smoke-sha256", smoke[1],
    ]  # fmt: skip


def _continued(words: list[str]) -> list[str]:
    """``words`` as one shell command over several lines: each option and its value
    on a line of its own (the digests alone are 64 columns)."""
    head = words.index("validate") + 1
    lines = [_command_line(words[:head])]
    rest = words[head:]
    for index in range(0, len(rest), 2):
        lines.append("  " + _command_line(rest[index : index + 2]))
    continuation = " ^" if sys.platform == "win32" else " \\"
    return [line + continuation for line in lines[:-1]] + lines[-1:]


def no_probe_lines(arguments: argparse.Namespace) -> list[str]:
    """Where no probe ships: the two commands that build one and validate with it
    (the digests are the ones build-probe prints; it prints this command with them)."""
    directory = _default_build_directory()
    if directory is None:
        into = "DIR"
        probe, smoke = (f"DIR/{path.name}" for path in _build_probe.binary_paths(Path("/")))
    else:
        into = str(directory)
        probe, smoke = (str(path) for path in _build_probe.binary_paths(directory))
    build = _command_line([*PROG.split(), "build-probe", "--into", into])
    validate = _validate_words(
        _validate_options(arguments), (probe, "PROBE_SHA256"), (smoke, "SMOKE_SHA256")
    )
    return [
        *_refusal_text.wrapped(
            "error: ",
            "no probe ships for this platform: this installation carries none (the pure "
            "py3-none-any wheel or the sdist; the manylinux_2_17 x86_64 and aarch64 wheels "
            "carry one). Build the reviewed probe and smoke from the sources this package "
            "carries, with Rust's cargo, then validate with them:",
        ),
        f"  {build}",
        *(f"  {line}" for line in _continued(validate)),
        "(PROBE_SHA256, SMOKE_SHA256: the digests build-probe prints, with this command)",
        *(
            ["(DIR: a directory of your own; there is no home directory for the default)"]
            if directory is None
            else []
        ),
    ]


def _validate_command(arguments: argparse.Namespace) -> int:
    if (arguments.probe is None) != (arguments.smoke is None):
        raise _UsageError(
            "--probe and --smoke go together: give both (build-probe prints both), or neither "
            "to use the ones this installation ships"
        )
    if (arguments.probe_sha256 is None) != (arguments.smoke_sha256 is None):
        raise _UsageError(
            "--probe-sha256 and --smoke-sha256 go together: a pin binds both binaries"
        )
    if arguments.probe_sha256 is not None and arguments.probe is None:
        raise _UsageError(
            "the digests pin --probe and --smoke; the shipped binaries carry recorded digests"
        )
    capability = _validate.host_capability()
    if capability is None:
        _err(f"error: {_validate.HOST_TEXT} is no target of {PROVIDER_SPEC.distribution.name}")
        return EXIT_NOT_READY
    binaries: tuple[_validate.ToPin, _validate.ToPin]
    try:
        if arguments.probe is None:
            binaries = _validate.shipped_binaries()
        else:
            binaries = _validate.given_binaries(
                arguments.probe, arguments.smoke, arguments.probe_sha256, arguments.smoke_sha256
            )
    except NoShippedBinariesError:
        _err("\n".join(no_probe_lines(arguments)))
        return EXIT_NOT_READY
    except ShippedBinaryError as error:
        _err(_error_lines(str(error)))
        return EXIT_NOT_READY
    try:
        validated = _validate.run(
            capability,
            binaries,
            sm=arguments.sm,
            device=arguments.device,
            toolkit_root=arguments.toolkit_root,
            driver_root=arguments.driver_root,
            output=arguments.output,
            out=_out,
        )
    except CudaProbeError as error:  # a binary that cannot be read: nothing ran
        _err("\n".join(explain_lines(Refused(error.reason_code, error.facts), flags=OPTION_FLAGS)))
        return EXIT_NOT_READY
    return EXIT_READY if validated else EXIT_NOT_READY


def _add_validate(commands: argparse._SubParsersAction[_Parser]) -> None:
    validate = commands.add_parser(
        "validate",
        help="path-free evidence that this NVIDIA host works, with the shipped or built probe",
        description=(
            "On a trusted NVIDIA host: run the probe and the lifetime smoke this installation "
            "ships (or the ones build-probe printed, with --probe and --smoke), and a "
            "standalone preflight through Core, and print path-free JSON evidence "
            "(support_claim, kernel_executed and certification_ready are always false). "
            "Exit 0 only when the preflight is ready and the smoke completes."
        ),
    )
    _add_selection(
        validate,
        _SelectionHelp(
            device="CUDA device (default 0)",
            toolkit_root="absolute CUDA toolkit root to validate",
            driver_root="absolute directory whose libcuda.so.1 is the only driver tried",
            probe="the probe build-probe printed (with --smoke), instead of the shipped one",
            probe_sha256="run the --probe only if its SHA-256 is DIGEST (with --smoke-sha256)",
        ),
        device_default=0,
    )
    validate.add_argument(
        "--smoke",
        type=_absolute_file,
        metavar="PATH",
        help="the smoke build-probe printed (with --probe), instead of the shipped one",
    )
    validate.add_argument(
        "--smoke-sha256",
        type=_sha256,
        metavar="DIGEST",
        help="run the --smoke only if its SHA-256 is DIGEST (with --probe-sha256)",
    )
    validate.add_argument(
        "--output",
        type=_output_file,
        metavar="FILE",
        help="also write the evidence to FILE (its directory must exist)",
    )
    validate.set_defaults(handler=_validate_command)


# -- manifest --------------------------------------------------------------------------


def _manifest(arguments: argparse.Namespace) -> int:
    resource = importlib.resources.files(__package__).joinpath(MANIFEST_RESOURCE)
    try:
        data = resource.read_bytes()
    except OSError as error:
        _err(
            f"error: this installation carries no {MANIFEST_RESOURCE} ({error.strerror}); "
            "reinstall the package"
        )
        return EXIT_NOT_READY
    if sys.stdout is None:
        raise _OutputError("standard output is closed")
    try:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except OSError as error:
        raise _OutputError(error.strerror or type(error).__name__) from error
    return EXIT_READY


def _add_manifest(commands: argparse._SubParsersAction[_Parser]) -> None:
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


_COMMANDS: Final[tuple[Callable[[argparse._SubParsersAction[_Parser]], None], ...]] = (
    _add_explain,
    _add_preflight,
    _add_runtime_source,
    _add_pin_probe,
    _add_probe,
    _add_build_probe,
    _add_reproduce,
    _add_validate,
    _add_manifest,
)


def _parser() -> _Parser:
    parser = _Parser(
        prog=PROG,
        description=(
            "Explain the provider's reason codes, run one preflight through Rextio Core, "
            "install the packaged runtime and loader crates into a project, print the pin of "
            "the installed (or a built) probe, build the probe from the packaged sources, "
            "rebuild a wheel's probe and smoke to compare them with what it ships, "
            "validate an NVIDIA host, or print the provider manifest. "
            "Exit status: 0 success or ready, 1 not ready or refused, 2 unusable input."
        ),
    )
    parser.add_argument("-V", "--version", action=_Version, help="print the version and exit")
    commands = parser.add_subparsers(
        dest="command",
        required=True,
        parser_class=_Parser,
        metavar="COMMAND",
        help="one of the commands below; COMMAND --help describes its arguments",
    )
    for add in _COMMANDS:
        add(commands)
    return parser


def _quiet_stdout() -> None:
    """Standard output to the null device, so the interpreter's last flush stays quiet."""
    if sys.stdout is None:
        return  # descriptor 1 was closed at start; it may be another file's now
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)


def _flush() -> None:
    if sys.stdout is not None:
        try:
            sys.stdout.flush()
        except OSError as error:
            raise _OutputError(error.strerror or type(error).__name__) from error


def _run(argv: Sequence[str] | None) -> int:
    try:
        arguments = _parser().parse_args(argv)
    except SystemExit as done:  # --help and --version printed, then exit 0
        _flush()
        return done.code if isinstance(done.code, int) else EXIT_USAGE
    if sys.stdout is None:
        raise _OutputError("standard output is closed")
    status: int = arguments.handler(arguments)
    _flush()
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    try:
        return _run(argv)
    except _UsageError as error:
        _err(_error_lines(str(error)))
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except _OutputError as error:
        # A reader that stopped early (`| head`) wants no message, as CPython's
        # own tools do; a closed or full output is said once, on stderr.
        cause = error.__cause__
        if not isinstance(cause, BrokenPipeError):
            _err(f"error: cannot write to standard output: {error}")
        _quiet_stdout()
        return EXIT_NOT_READY
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_NOT_READY
