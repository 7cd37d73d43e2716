"""Helpers shared by the tests: probe scripts, reports, profiles and requests."""

from __future__ import annotations

import functools
import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rextio.artifacts.models import ArtifactProfile, DeviceRequirement, RuntimeRequirement
from rextio.artifacts.profiles import host_extension_profile, rust_crate_profile
from rextio.devices import DevicePreflightRequest, DeviceProviderOptions, DeviceProviderSelection

# The tests read the spec's source, independent of the generated records.
SPEC: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[2] / "templates" / "provider-spec.json").read_text("utf-8")
)
CAPABILITIES: dict[str, dict[str, Any]] = {item["id"]: item for item in SPEC["capabilities"]}
# Each lane's record, without the kind it is written under (raw_driver or framework_reuse).
LANES: dict[str, dict[str, Any]] = {
    name: record for name, kinds in SPEC["lanes"].items() for record in kinds.values()
}


def _release(pair: list[int]) -> str:
    return f"{pair[0]}.{pair[1]}"


def _architecture_texts() -> dict[str, str]:
    """The SM-fact placeholders of the spec's reason texts, written out."""
    items = SPEC["manifest"]["architectures"]
    first: dict[tuple[int, ...], list[str]] = {}
    ranges: dict[tuple[tuple[int, ...], bool, tuple[int, ...]], list[str]] = {}
    for item in items:
        first.setdefault(tuple(item["first"]), []).append(item["sm"])
        last = item["last"]
        # Sorted as the generator sorts: an open range before a closed one.
        key = (tuple(item["first"]), last is not None, tuple(last or ()))
        ranges.setdefault(key, []).append(item["sm"])
    return {
        "{architectures}": ", ".join(item["sm"] for item in items),
        "{architecture_first_releases}": "; ".join(
            f"{_release(list(release))}: {', '.join(sms)}" for release, sms in sorted(first.items())
        ),
        "{architecture_compile_releases}": "; ".join(
            f"{_release(list(start))} to {_release(list(end))}: {', '.join(sms)}"
            if closed
            else f"{_release(list(start))} or newer: {', '.join(sms)}"
            for (start, closed, end), sms in sorted(ranges.items())
        ),
    }


def _loader_texts() -> dict[str, str]:
    """The loader-fact placeholders of the spec's reason texts, written out."""
    loader = SPEC["loader"]
    return {
        "{linux_candidate_dirs}": "; ".join(
            f"on Linux {item['arch']} {', '.join(item['dirs'])}"
            for item in loader["linux_candidate_dirs"]
        ),
        "{loader_rules}": ", ".join(
            rule["name"] if rule["requires"] is None else f"{rule['name']} ({rule['requires']})"
            for rule in loader["rules"]
        ),
    }


# The spec's source as written, and its reason texts with the placeholders filled.
RAW_REASON_CODES: dict[str, list[str]] = {
    code: list(texts) for code, texts in SPEC["reason_codes"].items()
}
_PLACEHOLDERS: dict[str, str] = {**_architecture_texts(), **_loader_texts()}
for _texts in SPEC["reason_codes"].values():
    for _index, _text in enumerate(_texts):
        for _name, _value in _PLACEHOLDERS.items():
            _text = _text.replace(_name, _value)
        _texts[_index] = _text


def report(
    *,
    target: tuple[str, str, str] = ("linux", "x86_64", "gnu"),
    sms: tuple[str, ...] = ("sm_80",),
    driver_version: int | None = 12080,
    **overrides: Any,
) -> dict[str, Any]:
    """A valid probe-complete report (schema 1), with optional overrides."""
    devices = [
        {
            "ordinal": index,
            "name": f"Fixture GPU {index}",
            "compute_major": int(sm[3:-1]),
            "compute_minor": int(sm[-1]),
            "sm": sm,
        }
        for index, sm in enumerate(sms)
    ]
    value: dict[str, Any] = {
        "schema_version": "1",
        "probe": "rextio-cuda-driver-probe",
        "support_claim": False,
        "target": {"os": target[0], "arch": target[1], "environment": target[2]},
        "platform_supported": True,
        "status": "probe-complete",
        "reason_code": None,
        "driver_loaded": True,
        "driver_version": driver_version,
        "device_count": len(devices),
        "cuda_result": 0,
        "devices": devices,
    }
    value.update(overrides)
    return value


def unavailable_report(
    code: str, target: tuple[str, str, str] = ("linux", "x86_64", "gnu")
) -> dict[str, Any]:
    """An incomplete report carrying the probe's own reason code."""
    return report(
        target=target,
        sms=(),
        status="unavailable",
        reason_code=code,
        driver_loaded=False,
        driver_version=None,
        device_count=None,
        cuda_result=None,
    )


# A pinned probe must be a binary (a `#!` script is refused), so pinned tests
# use this one: it reads its own image (/proc/self/exe, which for a sealed
# run is the memfd), takes the trailer after the last MAGIC line (a marker
# path, a newline, the output), appends "ran" to the marker and prints the
# output. What it prints is therefore decided by the bytes that really ran.
PRINTER_MAGIC = b"\n#REXTIO-FIXTURE-TRAILER#\n"
_PRINTER_C = r"""
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
static char image[4 << 20];
int main(void) {
    int fd = open("/proc/self/exe", O_RDONLY);
    size_t size = 0;
    ssize_t got;
    if (fd < 0) return 3;
    while ((got = read(fd, image + size, sizeof image - size)) > 0) size += (size_t)got;
    const char *magic = "MAGIC";
    size_t length = strlen(magic);
    char *trailer = NULL;
    for (size_t at = 0; at + length <= size; at++)
        if (memcmp(image + at, magic, length) == 0) trailer = image + at + length;
    if (trailer == NULL) return 4;
    char *newline = memchr(trailer, '\n', (size_t)(image + size - trailer));
    if (newline == NULL) return 5;
    *newline = 0;
    int marker = open(trailer, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (marker < 0 || write(marker, "ran\n", 4) != 4) return 6;
    close(marker);
    char *output = newline + 1;
    return write(1, output, (size_t)(image + size - output)) < 0 ? 7 : 0;
}
"""


@functools.cache
def printer_image() -> bytes:
    """The compiled printer (built once per test process with $CC or cc)."""
    with tempfile.TemporaryDirectory(prefix="rextio-printer-") as directory:
        source = Path(directory) / "printer.c"
        # The image holds the magic once itself: the trailer is after the last one.
        magic = PRINTER_MAGIC.decode().replace("\n", "\\n")
        source.write_text(_PRINTER_C.replace("MAGIC", magic), encoding="utf-8")
        binary = Path(directory) / "printer"
        compiler = os.environ.get("CC") or shutil.which("cc") or "cc"
        subprocess.run([compiler, "-O1", "-o", str(binary), str(source)], check=True)
        return binary.read_bytes()


def python_shebang() -> str:
    """The first line(s) of a script that this interpreter runs. A ``#!`` line
    ends the interpreter's path at the first blank, so where the path holds one
    (a clone under "/tmp/a b") sh starts it: a line sh runs and Python reads as
    one string expression."""
    if not any(blank in sys.executable for blank in " \t"):
        return f"#!{sys.executable}\n"
    return f"#!/bin/sh\n'exec' {shlex.quote(sys.executable)} \"$0\" \"$@\"\n"


@dataclass
class ProbeFactory:
    """Writes executable probe scripts; each touches a marker when it runs."""

    directory: Path
    marker_tag: str = field(default_factory=lambda: uuid.uuid4().hex)

    def python(self, body: str, name: str = "probe") -> Path:
        """A Python probe (absolute shebang to this interpreter)."""
        return self.write(name, f"{python_shebang()}{body}")

    def shell(self, body: str, name: str = "probe") -> Path:
        """A /bin/sh probe."""
        return self.write(name, f"#!/bin/sh\n{body}")

    def printing(self, value: object, name: str = "probe") -> Path:
        """A probe that records that it ran, then prints ``value`` as JSON."""
        text = value if isinstance(value, str) else json.dumps(value)
        marker = self.marker(name)
        return self.python(f"open({str(marker)!r}, 'a').write('ran\\n')\nprint({text!r})\n", name)

    def binary(self, value: object, name: str = "probe", marker: str | None = None) -> Path:
        """A compiled probe (no ``#!``, so it can be pinned) that appends to the
        marker of ``marker`` (default ``name``) and prints ``value`` as JSON."""
        text = value if isinstance(value, str) else json.dumps(value)
        return self.write_bytes(name, self.binary_bytes(text, marker or name))

    def binary_bytes(self, text: str, marker: str) -> bytes:
        """The bytes of a ``binary`` probe printing ``text`` (no newline added)."""
        trailer = f"{self.marker(marker)}\n{text}\n".encode()
        return printer_image() + PRINTER_MAGIC + trailer

    def marker(self, name: str = "probe") -> Path:
        """The file a ``printing`` probe appends to each time it runs."""
        return self.directory / f"{name}.ran"

    def write(self, name: str, text: str) -> Path:
        """An executable file with exactly ``text``."""
        return self.write_bytes(name, text.encode("utf-8"))

    def write_bytes(self, name: str, data: bytes) -> Path:
        """An executable file with exactly ``data``."""
        path = self.directory / name
        path.write_bytes(data)
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return path


def raw_requirement(
    ordinal: int = 0, sm: str | None = "sm_80", **changes: Any
) -> DeviceRequirement:
    """A raw-driver lane's requirement."""
    fields: dict[str, Any] = {
        "logical_device": f"cuda:{ordinal}",
        "backend": "cuda",
        "runtime": "cuda-driver",
        "features": ("driver-api",),
        "memory_spaces": ("device",),
        "architectures": (sm,) if sm is not None else (),
    }
    fields.update(changes)
    return DeviceRequirement(**fields)


def framework_requirement(lane: str, sm: str | None = "sm_80", **changes: Any) -> DeviceRequirement:
    """The frozen requirement of a framework lane, with an optional SM."""
    frozen = dict(LANES[lane]["requirement"])
    for key in ("features", "layouts", "memory_spaces"):
        frozen[key] = tuple(frozen[key])
    frozen["architectures"] = (sm,) if sm is not None else ()
    frozen.update(changes)
    return DeviceRequirement(**frozen)


def lane_pins(lane: str) -> tuple[RuntimeRequirement, ...]:
    """The frozen runtime pins of a framework lane."""
    return tuple(
        RuntimeRequirement(pin["name"], pin["version"], tuple(pin["features"]))
        for pin in LANES[lane]["runtime_pins"]
    )


def profile_for(
    capability_id: str,
    *,
    requirements: tuple[DeviceRequirement, ...] | None = None,
    runtime_requirements: tuple[RuntimeRequirement, ...] | None = None,
    kind: str | None = None,
    triple: str | None = None,
    python_fallback_backend: str = "cpython",
) -> ArtifactProfile:
    """A profile that passes every static check of the capability by default."""
    capability = CAPABILITIES[capability_id]
    lane = capability["lane"]
    target = triple or capability["target_triple"]
    if lane == "raw-driver":
        requirements = requirements if requirements is not None else (raw_requirement(),)
        if kind == "host-extension":
            return host_extension_profile(target, device_requirements=requirements)
        return rust_crate_profile(target, device_requirements=requirements)
    requirements = requirements if requirements is not None else (framework_requirement(lane),)
    pins = runtime_requirements if runtime_requirements is not None else lane_pins(lane)
    if kind == "rust-crate":
        return rust_crate_profile(
            target, runtime_requirements=pins, device_requirements=requirements
        )
    return host_extension_profile(
        target,
        python_fallback_backend=python_fallback_backend,
        runtime_requirements=pins,
        device_requirements=requirements,
    )


def request_for(
    capability_id: str,
    options: dict[str, str] | None = None,
    *,
    provider_id: str = "rextio-device-cuda",
    profile: ArtifactProfile | None = None,
) -> DevicePreflightRequest:
    """A preflight request with string options."""
    return DevicePreflightRequest(
        artifact_profile=profile if profile is not None else profile_for(capability_id),
        selection=DeviceProviderSelection(provider_id, capability_id),
        options=DeviceProviderOptions(tuple(sorted((options or {}).items()))),
    )


def ready_options(probe: Path, **extra: str) -> dict[str, str]:
    """Options selecting device 0, sm_80 and ``probe``."""
    return {"probe_executable": str(probe), "device_ordinal": "0", "sm": "sm_80", **extra}


def processes_with(tag: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains ``tag``."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if tag.encode() in cmdline and state != "Z":
            found.append(int(entry))
    return found


def json_values(node: Any, key: str) -> list[Any]:
    """Every value stored under ``key`` anywhere in a JSON document."""
    found: list[Any] = []
    if isinstance(node, dict):
        for name, value in node.items():
            if name == key:
                found.append(value)
            found.extend(json_values(value, key))
    elif isinstance(node, list):
        for item in node:
            found.extend(json_values(item, key))
    return found


def json_strings(node: Any) -> list[str]:
    """Every string (keys included) in a JSON document."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [text for name, value in node.items() for text in (name, *json_strings(value))]
    if isinstance(node, list):
        return [text for item in node for text in json_strings(item)]
    return []


def run_cli(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m rextio_device_cuda ARGUMENTS`` in ``cwd``, output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "rextio_device_cuda", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        check=False,
    )


def run_with_memfd_noexec_2(
    child_source: str, *arguments: str, timeout: float
) -> subprocess.CompletedProcess[str]:
    """``python -c child_source ARGUMENTS`` in a new PID namespace whose
    ``vm.memfd_noexec`` is 2 (the setting belongs to a PID namespace); the
    host's own setting is asserted unchanged afterwards."""
    setting = Path("/proc/sys/vm/memfd_noexec")
    before = setting.read_text()
    unshare = shutil.which("unshare")
    assert unshare is not None, "util-linux unshare is needed"
    done = subprocess.run(
        [
            unshare,
            "--pid",
            "--fork",
            "--mount-proc",
            "sh",
            "-c",
            'echo 2 > /proc/sys/vm/memfd_noexec && exec "$@"',
            "sh",
            sys.executable,
            "-c",
            child_source,
            *arguments,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert setting.read_text() == before
    return done


def unwrapped(text: str) -> str:
    """Printed refusal text with each wrapped line joined back to the one before (the
    package continues a line with two spaces), after checking every line fits 100
    columns: what a test compares whole sentences against."""
    assert all(len(line) <= 100 for line in text.splitlines()), text
    return text.replace("\n  ", " ")
