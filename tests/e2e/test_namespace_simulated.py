"""The simulated-driver namespace itself: it changes nothing on the host and
leaves nothing running."""

from __future__ import annotations

import os
from pathlib import Path

from sim_namespace import REVIEWED_IMAGE, SIM_TMPFS, DriverLayout, SimulatedHost

# An unusual duration marks the sleeper this test starts.
SLEEPER_SECONDS = "86397"


def _sleepers() -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", SLEEPER_SECONDS.encode()]:
            found.append(entry.name)
    return found


def test_namespace_leaves_no_process_and_no_file_behind(sim_host: SimulatedHost) -> None:
    host_entries = sorted(os.listdir(SIM_TMPFS))
    assert not os.path.lexists(REVIEWED_IMAGE)
    # A background process the command does not wait for: it must not
    # outlive the namespace.
    run = sim_host.run(
        DriverLayout(),
        ["/bin/sh", "-c", f"sleep {SLEEPER_SECONDS} & test -f {REVIEWED_IMAGE}"],
    )
    assert run.returncode == 0, run.stderr
    assert _sleepers() == []
    # The image existed inside; the host's directory is as it was.
    assert sorted(os.listdir(SIM_TMPFS)) == host_entries
    assert not os.path.lexists(REVIEWED_IMAGE)
