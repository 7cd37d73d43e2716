"""The host stays small: what one `rextio generate` loads through the entry point.

Each check runs in a fresh interpreter with Core already imported (as when
Core loads the entry point) and compares ``sys.modules`` before and after.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from cuda_support import ProbeFactory, report, unavailable_report

# Imports Core, then ours; prints what each step added to sys.modules.
_CHILD = """
import json, sys
from rextio.artifacts.models import DeviceRequirement
from rextio.artifacts.profiles import rust_crate_profile
from rextio.devices import DevicePreflightRequest, DeviceProviderOptions, DeviceProviderSelection

options = {"device_ordinal": "0", "probe_executable": sys.argv[1], "sm": "sm_80"}
request = DevicePreflightRequest(
    artifact_profile=rust_crate_profile(
        "x86_64-unknown-linux-gnu",
        device_requirements=(
            DeviceRequirement(
                "cuda:0", "cuda", "cuda-driver", ("driver-api",), (), ("device",), ("sm_80",)
            ),
        ),
    ),
    selection=DeviceProviderSelection("rextio-device-cuda", "cuda-linux-x86_64"),
    options=DeviceProviderOptions(tuple(sorted(options.items()))),
)
seen = set(sys.modules)
steps = {}

def step(name):
    global seen
    steps[name] = sorted(set(sys.modules) - seen)
    seen = set(sys.modules)

import rextio_device_cuda
from rextio_device_cuda.provider import provider
step("import")
status = provider().preflight(request).status.value
step("preflight")
print(json.dumps({"status": status, **steps}))
"""

# Modules no preflight of a raw lane without a toolkit uses: the command line,
# the runtime source, the public probe module (protocols for injected
# runners), the toolkit inspector, the manifest's records, the public report
# records and the configuration (frozen dataclasses: a preflight parses into
# plain records and reads the defaults), the sealed pin (an unpinned run),
# logging (only a refusal logs), and what those modules need.
_UNUSED_BY_A_READY_PREFLIGHT = frozenset(
    {
        "rextio_device_cuda.__main__",
        "rextio_device_cuda.cli",
        "rextio_device_cuda.runtime_source",
        "rextio_device_cuda.probe",
        "rextio_device_cuda._generated",
        "rextio_device_cuda._toolkit",
        "rextio_device_cuda._declarations",
        "rextio_device_cuda._report",
        "rextio_device_cuda.config",
        "rextio_device_cuda._sealed",
        "argparse",
        "logging",
        "tarfile",
    }
)


def _loaded(probe: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-I", "-c", _CHILD, str(probe)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded: dict[str, Any] = json.loads(done.stdout)
    return loaded


def test_import_and_a_ready_preflight_load_only_what_they_use(probes: ProbeFactory) -> None:
    loaded = _loaded(probes.printing(report()))
    assert loaded["status"] == "ready"
    assert "rextio_device_cuda.provider" in loaded["import"]
    assert not _UNUSED_BY_A_READY_PREFLIGHT & {*loaded["import"], *loaded["preflight"]}


def test_a_refusal_loads_logging_for_its_line(probes: ProbeFactory) -> None:
    # The other side: the refusal line is the first use of logging.
    loaded = _loaded(probes.printing(unavailable_report("NO_CUDA_DEVICES")))
    assert loaded["status"] == "unavailable"
    assert "logging" not in loaded["import"]
    assert "logging" in loaded["preflight"]


# 0.1.0's names that now load on first use (contract section 1), imported
# the ways 0.1.0 code does.
_LAZY_NAMES_CHILD = """
from rextio_device_cuda.provider import FilesystemToolkitInspector, ProbeRunner, ToolkitInspector
from rextio_device_cuda.probe import CudaToolkitReport
from rextio_device_cuda import _toolkit, probe
assert FilesystemToolkitInspector is probe.FilesystemToolkitInspector
assert FilesystemToolkitInspector is _toolkit.FilesystemToolkitInspector
assert CudaToolkitReport is _toolkit.CudaToolkitReport
assert (ProbeRunner, ToolkitInspector) == (probe.ProbeRunner, probe.ToolkitInspector)
try:
    probe.NoSuchName
except AttributeError:
    print("ok")
"""


def test_the_lazy_names_of_0_1_0_still_import() -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-c", _LAZY_NAMES_CHILD],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "ok\n", "")
