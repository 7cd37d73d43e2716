"""``python -m rextio_device_cuda validate``: contract §8's evidence on an NVIDIA host.

Only what this installation ships is used: the probe and the lifetime smoke
in the package's ``_bin/`` (contract §9.1: platform wheels carry them with
their recorded SHA-256, the pure wheel does not; ``_shipped`` checks them).
Both run through the provider's own runner (empty environment, own process
group, bounded time and output), each pinned to its recorded SHA-256, and
the preflight runs in this process through Core's ``resolve_device_plan``,
pinned to the same probe digest, so the evidence
names exactly which binary answered. The evidence holds no path and always
says ``support_claim``, ``kernel_executed`` and ``certification_ready`` are
false: it shows this host works, it certifies nothing.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Final

from rextio_device_cuda import _codes, _user_files
from rextio_device_cuda._errors import CudaProbeError
from rextio_device_cuda._explain import explain_lines
from rextio_device_cuda._provider_spec import PROVIDER_SPEC, CapabilitySpec, RawDriverLaneSpec
from rextio_device_cuda._runner import MAX_TIMEOUT_SECONDS, SubprocessProbeRunner
from rextio_device_cuda._shipped import (
    NO_SHIPPED_PROBE,
    NoShippedBinariesError,
    ShippedBinary,
    ShippedBinaryError,
    shipped_binary,
)
from rextio_device_cuda._standalone import NotRun, Ready, standalone_preflight

EVIDENCE_NAME: Final = "rextio-device-cuda-nvidia-validation"
EVIDENCE_SCHEMA_VERSION: Final = "1"
# platform.machine() spellings of the architectures the spec names.
_ARCHITECTURE: Final = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64"}
_HOST_OS: Final = "windows" if sys.platform == "win32" else sys.platform


def host_capability() -> CapabilitySpec | None:
    """The raw-driver capability whose target is this host, if one is declared."""
    arch = _ARCHITECTURE.get(platform.machine().lower())
    for capability in PROVIDER_SPEC.capabilities:
        target = PROVIDER_SPEC.probe_targets.get(capability.target_triple)
        raw = isinstance(PROVIDER_SPEC.lanes[capability.lane], RawDriverLaneSpec)
        if raw and target is not None and (target.os, target.arch) == (_HOST_OS, arch):
            return capability
    return None


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
) -> dict[str, object]:
    outcome = standalone_preflight(
        capability,
        probe=str(probe),
        device=str(device),
        sm=sm,
        toolkit_root=toolkit_root,
        probe_sha256=digest,
    )
    if isinstance(outcome, Ready):
        ready = outcome.plan.preflight
        observations = dict(ready.observations)
        return {"status": ready.status.value, "reason_code": None, "observations": observations}
    if isinstance(outcome, NotRun):
        # Core's own message may name a path: it goes to stderr, never into the evidence.
        print(f"error: the preflight did not run: {outcome.why}", file=sys.stderr)
        return {"status": "error", "reason_code": None, "observations": {}}
    status = outcome.result.status.value
    return {"status": status, "reason_code": outcome.reason_code, "observations": {}}


def collect(
    capability: CapabilitySpec,
    probe: ShippedBinary,
    smoke: ShippedBinary,
    *,
    sm: str,
    device: int,
    toolkit_root: str | None,
) -> dict[str, object]:
    """Runs the probe, the preflight and the smoke; the evidence record."""
    probe_sha256, smoke_sha256 = probe.sha256, smoke.sha256
    probe_report, _ = _run_recorded(SubprocessProbeRunner(probe.path, probe_sha256=probe_sha256))
    preflight = _preflight(capability, probe.path, probe_sha256, device, sm, toolkit_root)
    # The smoke creates a context and allocates: it gets the runner's longest bound.
    smoke_runner = SubprocessProbeRunner(
        smoke.path,
        arguments=("--device", str(device)),
        timeout_seconds=MAX_TIMEOUT_SECONDS,
        probe_sha256=smoke_sha256,
    )
    smoke_record, smoke_status = _run_recorded(smoke_runner)
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
        "validated": ready and complete,
        # The smoke's pattern came back from the device byte for byte.
        "round_trip": smoke_record.get("round_trip") is True,
        "reason_code": (
            None
            if ready and complete
            else preflight["reason_code"]
            if not ready
            else smoke_record.get("reason_code")
        ),
        "probe_report": probe_report,
        "preflight": preflight,
        "smoke": smoke_record,
    }


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


def run(*, sm: str, device: int, toolkit_root: str | None, output: Path | None) -> bool:
    """The ``validate`` command (values checked by the caller): True when validated.

    Prints the evidence (and writes it to ``output``), or says on stderr why none was made.
    """
    capability = host_capability()
    try:
        if capability is None:
            raise NoShippedBinariesError(f"{_HOST_OS} {platform.machine()} is no declared target")
        probe = shipped_binary(PROVIDER_SPEC.probe_report.probe)
        smoke = shipped_binary(PROVIDER_SPEC.smoke.probe)
    except NoShippedBinariesError:
        print(f"error: {NO_SHIPPED_PROBE}", file=sys.stderr)
        return False
    except ShippedBinaryError as error:
        print(f"error: {error}", file=sys.stderr)
        return False
    evidence = collect(capability, probe, smoke, sm=sm, device=device, toolkit_root=toolkit_root)
    package = probe.path.parent.parent
    local = [str(package), os.environ.get("HOME", ""), toolkit_root or ""]
    try:
        text = path_free_text(evidence, local)
        if output is not None:
            _user_files.write_file(output, (text + "\n").encode("utf-8"))
    except (OSError, ValueError) as error:
        print(f"error: no evidence written: {error}", file=sys.stderr)
        return False
    print(text)
    if evidence["validated"] is True:
        print(
            f"validated: preflight ready and lifetime smoke complete on device "
            f"{device} ({sm}); no kernel ran and nothing is certified",
            file=sys.stderr,
        )
        return True
    code = evidence["reason_code"]
    print("this host is not validated.", file=sys.stderr)
    if isinstance(code, str):
        print("\n".join(explain_lines(code)), file=sys.stderr)
    return False
