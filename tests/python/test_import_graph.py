"""Importing the provider, as Core's entry point does, loads no command-line code
and nothing only a refusal needs.

The command line, the runtime source and what they need (argparse, tarfile)
sit above the provider; the refusal line's texts and ``logging`` load only
when a preflight refuses. A fresh interpreter shows what importing loads.
"""

from __future__ import annotations

import json
import subprocess
import sys

_CHILD = """
import json, sys
before = set(sys.modules)
from rextio_device_cuda.provider import provider
provider()
print(json.dumps(sorted(set(sys.modules) - before)))
"""

_NOT_FOR_THE_PROVIDER = {
    "rextio_device_cuda.__main__",
    "rextio_device_cuda.cli",
    "rextio_device_cuda.runtime_source",
    "argparse",
    "tarfile",
}

# What only a refused preflight (its log line) or the command line loads.
_ONLY_FOR_A_REFUSAL = {
    "rextio_device_cuda._refusal_text",
    "rextio_device_cuda._cuda_results",
    "rextio_device_cuda._explain",
    "logging",
    "traceback",
}

_REFUSED_CHILD = """
import json, sys
from rextio.devices import (
    DevicePreflightRequest, DeviceProviderSelection,
)
from rextio.artifacts.profiles import rust_crate_profile
from rextio_device_cuda.provider import provider
request = DevicePreflightRequest(
    selection=DeviceProviderSelection("rextio-device-cuda", "no-such-capability"),
    artifact_profile=rust_crate_profile("x86_64-unknown-linux-gnu"),
)
before = set(sys.modules)
result = provider().preflight(request)
print(json.dumps([result.reason_codes, sorted(set(sys.modules) - before)]))
"""


def test_importing_the_provider_loads_no_command_line_or_runtime_source() -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-c", _CHILD], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = set(json.loads(done.stdout))
    assert "rextio_device_cuda.provider" in loaded
    assert loaded & _NOT_FOR_THE_PROVIDER == set()


def test_importing_the_provider_loads_nothing_only_a_refusal_needs() -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-c", _CHILD], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = set(json.loads(done.stdout))
    assert "rextio_device_cuda.provider" in loaded
    assert loaded & _ONLY_FOR_A_REFUSAL == set()


def test_a_refusal_loads_its_line_texts_and_logging() -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-c", _REFUSED_CHILD],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    reason_codes, loaded = json.loads(done.stdout)
    assert reason_codes == ["CAPABILITY_UNKNOWN"]
    assert {"rextio_device_cuda._refusal_text", "logging"} <= set(loaded)
