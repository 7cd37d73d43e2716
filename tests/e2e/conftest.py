"""End-to-end fixtures: the real probe, smoke and provider against the simulated driver.

Helpers live in sim_namespace (this directory is put on sys.path, as
tests/python does for its own helpers). Where private mount namespaces are
not permitted the tests fail, saying so; they never skip.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sim_namespace import (
    NamespaceTools,
    NativeBinaries,
    SimulatedHost,
    built_binaries,
    namespace_tools_or_fail,
)


@pytest.fixture(scope="session")
def native() -> NativeBinaries:
    """The binaries `cargo xtask setup` built."""
    return built_binaries()


@pytest.fixture(scope="session")
def namespace_tools() -> NamespaceTools:
    """Fails (never skips) when private mount namespaces are unavailable."""
    return namespace_tools_or_fail()


@pytest.fixture
def sim_host(
    native: NativeBinaries, namespace_tools: NamespaceTools, tmp_path: Path
) -> SimulatedHost:
    """A factory of fresh simulated-driver namespaces for one test."""
    return SimulatedHost(native, namespace_tools, tmp_path)
