"""What the child processes of test_runtime_source.py run, and the install
they share with it.

The children are started with multiprocessing's spawn: a fresh interpreter
imports this module by name. Forking the test process instead would copy a
pytest-xdist worker, whose second thread may hold a lock the child then
waits on forever.
"""

from __future__ import annotations

import ctypes
import os
import signal
from pathlib import Path
from typing import Any

from rextio_device_cuda import runtime_source
from rextio_device_cuda.runtime_source import PackagedCrate

# Each worker of the concurrent test installs into this many projects.
ROUNDS = 60
RENAME_EXCHANGE = 2


def install_runtime_source(
    project: Path, *, crates: tuple[PackagedCrate, ...] | None = None
) -> bool:
    """Installs every packaged crate; True when this call wrote any."""
    installed = runtime_source.install_runtime_source(project, crates=crates)
    return any(crate.written for crate in installed)


def install_rounds(base: Path, barrier: Any, results: Any) -> None:
    """Installs into each round's project once the barrier lets every worker go."""
    for round_index in range(ROUNDS):
        barrier.wait(timeout=120)
        try:
            outcome: object = install_runtime_source(base / f"project-{round_index}")
        except Exception as error:  # reported to the parent as the failure
            outcome = f"{type(error).__name__}: {error}"
        results.put((round_index, outcome))


def swap_forever(generated: bytes, decoy: bytes, ready: Any) -> None:
    """Exchanges the two names, atomically, until killed."""
    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd = -100
    ready.set()
    while True:
        libc.renameat2(at_fdcwd, generated, at_fdcwd, decoy, RENAME_EXCHANGE)


def killed_mid_install(project: Path) -> None:
    """Installs, and is killed by SIGKILL after its third file."""
    original = runtime_source._write_file
    written = 0

    def write_then_die(dir_fd: int, name: str, mode: int, content: bytes) -> None:
        nonlocal written
        original(dir_fd, name, mode, content)
        written += 1
        if written == 3:
            os.kill(os.getpid(), signal.SIGKILL)

    runtime_source._write_file = write_then_die
    install_runtime_source(project)
