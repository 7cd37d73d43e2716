"""Downstream checks: the companion plugins' own code against our installed wheel.

`cargo xtask test` runs this directory only in the newest-Core environment
(Core >= 0.1.7, which rextio-torch 0.1.3 needs), where rextio-torch 0.1.3 and
rextio-tensorflow 0.1.3 are installed with --no-deps from their PyPI sdists.
Their CUDA candidate build scripts ship only in the sdists, which `cargo xtask
setup` keeps (target/test-paths.json names their directory). Missing
prerequisites fail, saying so; nothing here skips.
"""

from __future__ import annotations

import importlib.util
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from sim_namespace import built_path


@pytest.fixture
def sdist_script(tmp_path: Path) -> Callable[[str, str], ModuleType]:
    """Loads one script from a plugin's sdist (``archive``, ``member``) as a module."""

    def load(archive: str, member: str) -> ModuleType:
        path = built_path("downstream_sdists") / archive
        if not path.is_file():
            pytest.fail(f"{path} is missing: `cargo xtask setup` downloads it")
        with tarfile.open(path, "r:gz") as sdist:
            extracted = sdist.extractfile(member)
            if extracted is None:
                pytest.fail(f"{archive} holds no file {member}")
            source = extracted.read()
        script = tmp_path / "scripts" / Path(member).name
        script.parent.mkdir()
        script.write_bytes(source)
        name = f"downstream_{script.stem}"
        spec = importlib.util.spec_from_file_location(name, script)
        if spec is None or spec.loader is None:
            pytest.fail(f"{member} cannot be loaded as a module")
        module = importlib.util.module_from_spec(spec)
        # Registered first: the script's dataclasses look their module up by name.
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        finally:
            del sys.modules[name]
        return module

    return load
