"""Importing the provider, as Core's entry point does, loads no command-line code.

The command line, the runtime source and what they need (argparse, tarfile)
sit above the provider; a fresh interpreter shows what importing it loads.
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


def test_importing_the_provider_loads_no_command_line_or_runtime_source() -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-c", _CHILD], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = set(json.loads(done.stdout))
    assert "rextio_device_cuda.provider" in loaded
    assert loaded & _NOT_FOR_THE_PROVIDER == set()
