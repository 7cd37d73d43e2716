"""Commands run beside NVIDIA's real libcuda in the simulated-driver namespace
(tests/e2e/sim_namespace.py) with a private ``/dev``: run as root, libcuda
creates ``/dev/nvidiactl``, which must appear there and never on the host.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from platform_layouts import host_state
from real_libcuda import RealDriver
from sim_namespace import DriverLayout, NamespaceRun, SimulatedHost

# Runs the command, then lists the namespace's /dev into the file named by
# its first argument, keeping the command's status.
LIST_DEV_AFTER = 'list=$1; shift; "$@"; status=$?; ls -A /dev >"$list"; exit "$status"'


@dataclass(frozen=True)
class RealRun:
    """What the command printed, and the namespace's /dev after it."""

    run: NamespaceRun
    dev: frozenset[str]


def installed(driver: RealDriver, image_mode: int = 0o644) -> DriverLayout:
    """``driver`` as NVIDIA's installers lay it out at the reviewed
    ``/usr/local/nvidia/lib64`` (``libcuda.so.<version>`` and the link)."""
    return DriverLayout(
        image=driver.image,
        image_version=driver.image_version,
        image_mode=image_mode,
        private_dev=True,
    )


def run_beside(host: SimulatedHost, layout: DriverLayout, argv: Sequence[str]) -> RealRun:
    """Runs ``argv`` in ``layout``; the host's /dev and mounts must not change."""
    shell = shutil.which("sh")
    assert shell is not None
    before = host_state()
    with tempfile.TemporaryDirectory(prefix="rextio-dev-") as scratch:
        dev_list = Path(scratch) / "dev.txt"
        run = host.run(layout, [shell, "-c", LIST_DEV_AFTER, shell, str(dev_list), *argv])
        dev = frozenset(dev_list.read_text(encoding="utf-8").split())
    assert host_state() == before, "the real driver changed the host"
    return RealRun(run, dev)
