"""The companion plugins' CUDA candidate builders, run unchanged against our wheel.

rextio-torch 0.1.3 (``scripts/build_cuda_candidate.py``) and
rextio-tensorflow 0.1.3 (``ci/build_cuda_candidate.py``) construct
``CudaProbeReport``/``CudaDeviceRecord``/``ProbeTarget`` with 0.1.0's keywords,
inject a runner into the real ``CudaDeviceProvider`` and run Core's real code
generation, then check the plan, the lowering authorization, the contribution
and the generated Rust themselves. ``generate_candidate`` raises on any
difference. Neither path imports torch or tensorflow; nothing is compiled.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from types import ModuleType

import pytest

BUILDERS = {
    "rextio-torch": (
        "rextio_torch-0.1.3.tar.gz",
        "rextio_torch-0.1.3/scripts/build_cuda_candidate.py",
    ),
    "rextio-tensorflow": (
        "rextio_tensorflow-0.1.3.tar.gz",
        "rextio_tensorflow-0.1.3/ci/build_cuda_candidate.py",
    ),
}


def test_this_environment_is_the_newest_core_with_both_plugins() -> None:
    core = tuple(int(part) for part in metadata.version("rextio").split("."))
    assert core >= (0, 1, 7)  # rextio-torch 0.1.3 requires it
    assert metadata.version("rextio-torch") == "0.1.3"
    assert metadata.version("rextio-tensorflow") == "0.1.3"


@pytest.mark.parametrize("plugin", sorted(BUILDERS))
def test_generate_candidate_succeeds(
    plugin: str, sdist_script: Callable[[str, str], ModuleType], tmp_path: Path
) -> None:
    builder = sdist_script(*BUILDERS[plugin])
    project = tmp_path / "candidate"
    rust_dir = builder.generate_candidate(project)
    assert isinstance(rust_dir, Path)
    assert (rust_dir / "Cargo.toml").is_file()
    assert (rust_dir / "src" / "lib.rs").is_file()
    assert rust_dir.is_relative_to(project)
    # The build-only paths never import the frameworks.
    assert not any(
        name in {"torch", "tensorflow"} or name.startswith(("torch.", "tensorflow."))
        for name in sys.modules
    )
