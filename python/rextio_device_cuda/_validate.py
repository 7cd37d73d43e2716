"""``python -m rextio_device_cuda validate``: the manual-validation evidence on an NVIDIA host.

The probe and the lifetime smoke are what this installation ships (the
package's ``_bin/``: platform wheels carry them with their recorded SHA-256,
the pure wheel does not; ``_shipped`` checks them) or the ones ``build-probe``
printed (``--probe`` and ``--smoke``). Both run through the provider's own
runner (empty environment, own process group, bounded time and output), each
pinned: a shipped one to its recorded SHA-256, a given one to
``--probe-sha256`` and ``--smoke-sha256`` or else to the digest of what is
read here, so the evidence names exactly which binary answered. Each binary
is read once, into its sealed copy (``_runner.sealed_copies``), and that
copy runs for every record: the probe's report, the preflight (in this
process through Core's ``resolve_device_plan``, pinned to the same probe
digest) and the smoke, so the evidence never mixes two binaries. It says
``validated`` only when every record is ready or complete. The evidence
holds no path and always says ``support_claim``, ``kernel_executed`` and
``certification_ready`` are false: it shows this host works, it certifies
nothing. docs/interfaces.md describes the record.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Final, NamedTuple

from rextio_device_cuda import _codes, _user_files
from rextio_device_cuda._errors import CudaProbeError
from rextio_device_cuda._explain import OPTION_FLAGS, explain_lines
from rextio_device_cuda._preflight_checks import Refusal
from rextio_device_cuda._provider_spec import PROVIDER_SPEC, CapabilitySpec, RawDriverLaneSpec
from rextio_device_cuda._refusal_text import Refused, wrapped
from rextio_device_cuda._runner import MAX_TIMEOUT_SECONDS, SubprocessProbeRunner, sealed_copies
from rextio_device_cuda._shipped import shipped_binary
from rextio_device_cuda._standalone import NotRun, Resolved, standalone_preflight

EVIDENCE_NAME: Final = "rextio-device-cuda-nvidia-validation"
EVIDENCE_SCHEMA_VERSION: Final = "1"
# platform.machine() spellings of the architectures the spec names.
_ARCHITECTURE: Final = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64"}
_HOST_OS: Final = "windows" if sys.platform == "win32" else sys.platform
# This host as the error for an undeclared target names it.
HOST_TEXT: Final = f"{_HOST_OS} {platform.machine()}"
# The probe's one option: look only in this directory.
_DRIVER_ROOT_ARGUMENT: Final = "--driver-root"


def _error(text: str) -> str:
    """``error: text`` in lines of at most 100 columns."""
    return "\n".join(wrapped("error: ", text))


def host_capability() -> CapabilitySpec | None:
    """The raw-driver capability whose target is this host, if one is declared."""
    arch = _ARCHITECTURE.get(platform.machine().lower())
    for capability in PROVIDER_SPEC.capabilities:
        target = PROVIDER_SPEC.probe_targets.get(capability.target_triple)
        raw = isinstance(PROVIDER_SPEC.lanes[capability.lane], RawDriverLaneSpec)
        if raw and target is not None and (target.os, target.arch) == (_HOST_OS, arch):
            return capability
    return None


class PinnedBinary(NamedTuple):
    """A probe or smoke, and the SHA-256 it is run under (the runner refuses
    other bytes); None: the digest of its sealed copy, read once by ``run``."""

    path: Path
    sha256: str | None


def shipped_binaries() -> tuple[PinnedBinary, PinnedBinary]:
    """The probe and smoke this installation ships, each pinned to its recorded digest.

    Raises ``NoShippedBinariesError`` where none ships (the pure wheel),
    ``ShippedBinaryError`` where one is not the recorded one.
    """
    probe = shipped_binary(PROVIDER_SPEC.probe_report.probe)
    smoke = shipped_binary(PROVIDER_SPEC.smoke.probe)
    return PinnedBinary(probe.path, probe.sha256), PinnedBinary(smoke.path, smoke.sha256)


def given_binaries(
    probe: str, smoke: str, probe_sha256: str | None, smoke_sha256: str | None
) -> tuple[PinnedBinary, PinnedBinary]:
    """The probe and smoke the user named, each pinned to the digest given
    (both or neither, the caller checked) or else to what ``run`` reads once."""
    return PinnedBinary(Path(probe), probe_sha256), PinnedBinary(Path(smoke), smoke_sha256)


def _run_recorded(runner: SubprocessProbeRunner) -> tuple[dict[str, object], int | None]:
    """A binary's one JSON record and exit status; a runner failure becomes a
    record holding its reason code (status ``error``, no exit status)."""
    try:
        output, status = runner.read_output_and_status()
    except CudaProbeError as error:
        return {"status": "error", "reason_code": error.reason_code}, None
    try:
        record = json.loads(output)
    except ValueError:
        record = None
    if not isinstance(record, dict):
        return {"status": "error", "reason_code": _codes.PROBE_OUTPUT_INVALID}, status
    return record, status


def _preflight(
    capability: CapabilitySpec,
    probe: Path,
    digest: str,
    device: int,
    sm: str,
    toolkit_root: str | None,
    driver_root: str | None,
) -> tuple[dict[str, object], Refusal | None]:
    """The preflight's part of the evidence, and its refusal (for the lines a person reads)."""
    outcome = standalone_preflight(
        capability,
        probe=str(probe),
        device=device,
        sm=sm,
        toolkit_root=toolkit_root,
        probe_sha256=digest,
        driver_root=driver_root,
    )
    if isinstance(outcome, Resolved):
        ready = outcome.plan.preflight
        observations = dict(ready.observations)
        return {
            "status": ready.status.value,
            "reason_code": None,
            "observations": observations,
        }, None
    if isinstance(outcome, NotRun):
        # Core's own message may name a path: it goes to stderr, never into the evidence.
        print(_error(f"the preflight did not run: {outcome.why}"), file=sys.stderr)
        return {"status": "error", "reason_code": None, "observations": {}}, None
    record = {"status": outcome.status.value, "reason_code": outcome.reason_code}
    return {**record, "observations": {}}, outcome


def collect(
    capability: CapabilitySpec,
    probe: PinnedBinary,
    smoke: PinnedBinary,
    *,
    sm: str,
    device: int,
    toolkit_root: str | None,
    driver_root: str | None = None,
) -> tuple[dict[str, object], Refusal | None]:
    """Runs the probe, the preflight and the smoke; the evidence record, and the
    preflight's refusal where it refused.

    Both binaries carry their digest (``run`` filled in what was read).
    """
    probe_sha256, smoke_sha256 = probe.sha256, smoke.sha256
    if probe_sha256 is None or smoke_sha256 is None:
        raise ValueError("collect runs pinned binaries only")
    root = () if driver_root is None else (_DRIVER_ROOT_ARGUMENT, driver_root)
    probe_report, _ = _run_recorded(
        SubprocessProbeRunner(probe.path, probe_sha256=probe_sha256, arguments=root)
    )
    preflight, refusal = _preflight(
        capability, probe.path, probe_sha256, device, sm, toolkit_root, driver_root
    )
    # The smoke creates a context and allocates: it gets the runner's longest bound.
    smoke_runner = SubprocessProbeRunner(
        smoke.path,
        arguments=("--device", str(device), *root),
        timeout_seconds=MAX_TIMEOUT_SECONDS,
        probe_sha256=smoke_sha256,
    )
    smoke_record, smoke_status = _run_recorded(smoke_runner)
    # Every record the evidence rests on: a refusing one is never beside validated.
    reported = probe_report.get("status") == PROVIDER_SPEC.probe_report.statuses.complete
    ready = preflight["status"] == "ready"
    complete = smoke_record.get("status") == PROVIDER_SPEC.smoke.complete_status
    complete = complete and smoke_status == 0
    return {
        "evidence": EVIDENCE_NAME,
        "schema_version": EVIDENCE_SCHEMA_VERSION,
        "support_claim": False,
        "kernel_executed": False,
        "certification_ready": False,
        "provider_version": PROVIDER_SPEC.distribution.version,
        "capability": capability.id,
        "selected_device": device,
        "selected_sm": sm,
        "toolkit_root_configured": toolkit_root is not None,
        "probe_sha256": probe_sha256,
        "smoke_sha256": smoke_sha256,
        "validated": reported and ready and complete,
        # The smoke's pattern came back from the device byte for byte.
        "round_trip": smoke_record.get("round_trip") is True,
        "reason_code": (
            None
            if reported and ready and complete
            else preflight["reason_code"]
            if not ready
            else probe_report.get("reason_code")
            if not reported
            else smoke_record.get("reason_code")
        ),
        "probe_report": probe_report,
        "preflight": preflight,
        "smoke": smoke_record,
    }, refusal


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for key, item in value.items() for text in [*_strings(key), *_strings(item)]]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


def path_free_text(evidence: dict[str, object], local_paths: list[str]) -> str:
    """The evidence as JSON; ValueError when any string is a path or names a local one."""
    for text in _strings(evidence):
        if PurePosixPath(text).is_absolute() or PureWindowsPath(text).is_absolute():
            raise ValueError("the evidence would hold a path-like value")
    rendered = json.dumps(evidence, indent=2, sort_keys=True)
    if any(path in rendered for path in local_paths if len(path) > 1):
        raise ValueError("the evidence would name a local path")
    return rendered


def run(
    capability: CapabilitySpec,
    binaries: tuple[PinnedBinary, PinnedBinary],
    *,
    sm: str,
    device: int,
    toolkit_root: str | None,
    driver_root: str | None,
    output: Path | None,
    out: Callable[[str], None],
) -> bool:
    """The ``validate`` command (every value checked by the caller): True when validated.

    Reads each binary once into its sealed copy, which then runs for every
    record. Prints the evidence through ``out`` and writes it to ``output``,
    or says on stderr why none was made. The evidence is printed before it
    is written, so a write that fails loses nothing. Raises ``CudaProbeError``
    for a binary that cannot be read (nothing ran).
    """
    with sealed_copies([binary.path for binary in binaries]) as digests:
        probe, smoke = (
            binary if binary.sha256 is not None else binary._replace(sha256=digests[binary.path])
            for binary in binaries
        )
        evidence, refusal = collect(
            capability,
            probe,
            smoke,
            sm=sm,
            device=device,
            toolkit_root=toolkit_root,
            driver_root=driver_root,
        )
    local = [
        *(str(binary.path.parent) for binary in binaries),
        *(str(binary.path.parent.parent) for binary in binaries),
        os.environ.get("HOME", ""),
        toolkit_root or "",
        driver_root or "",
    ]
    try:
        text = path_free_text(evidence, local)
    except ValueError as error:
        print(f"error: no evidence made: {error}", file=sys.stderr)
        return False
    out(text)
    written = True
    if output is not None:
        try:
            _user_files.write_file(output, (text + "\n").encode("utf-8"))
        except OSError as error:
            # Said without the temporary file's name: the error's text may hold it.
            why = error.strerror or type(error).__name__
            print(_error(f"the evidence was not written to {output}: {why}"), file=sys.stderr)
            written = False
    if evidence["validated"] is True:
        # Two lines, each within 100 columns.
        print(
            f"validated: preflight ready and lifetime smoke complete on device {device} ({sm})\n"
            "(no kernel ran and nothing is certified)",
            file=sys.stderr,
        )
        return written
    code = evidence["reason_code"]
    print("this host is not validated.", file=sys.stderr)
    if isinstance(code, str):
        # The preflight's refusal says what it observed, as `preflight` does.
        shown = refusal if refusal is not None and refusal.reason_code == code else Refused(code)
        print("\n".join(explain_lines(shown, flags=OPTION_FLAGS)), file=sys.stderr)
    return False
