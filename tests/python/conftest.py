"""Fixtures; helpers live in cuda_support (this directory is put on sys.path)
and in tests/e2e's sim_namespace (what `cargo xtask setup` built).

Only test directories are added: the package itself must come from the
installed wheel, never from the source tree under python/.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from cuda_support import ProbeFactory


@pytest.fixture
def probes(tmp_path: Path) -> ProbeFactory:
    """Probe executables in a fresh directory."""
    directory = tmp_path / "probes"
    directory.mkdir()
    return ProbeFactory(directory)


@pytest.fixture
def make_toolkit(tmp_path: Path) -> Callable[..., Path]:
    """Writes a fake CUDA toolkit tree with a version and the Linux components."""

    def build(version: str = "12.4.1", name: str = "cuda", components: bool = True) -> Path:
        root = tmp_path / name
        (root / "include").mkdir(parents=True)
        (root / "version.json").write_text(json.dumps({"cuda": {"version": version}}))
        if components:
            (root / "include" / "cuda.h").write_text("/* header */\n")
            (root / "lib64").mkdir()
            (root / "lib64" / "libcudart.so").write_bytes(b"\x7fELF")
        return root

    return build
