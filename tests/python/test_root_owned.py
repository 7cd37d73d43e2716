"""The ownership rules the pinned interpreter check shares with the driver loader.

One table of cases (probe/tests/ownership_cases.json) is run here through
``_root_owned.review`` and by the loader's own tests
(probe/tests/loader_ownership_cases.rs) through its reviewed walk: both must give
every case its verdict. The layouts are built as root on a tmpfs in a
private mount namespace (ownership_layouts.py), never on the host's /tmp.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TABLE = Path(__file__).resolve().parents[2] / "probe" / "tests" / "ownership_cases.json"
LAYOUTS = Path(__file__).resolve().parent / "ownership_layouts.py"


def test_every_shared_ownership_case_gets_its_verdict(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.fail("these cases give files to another user: run them as root")
    unshare = shutil.which("unshare")
    assert unshare is not None, "util-linux's unshare is needed"
    mount_point = tmp_path / "mount"
    mount_point.mkdir()
    command = [unshare, "-m", "--propagation", "private", sys.executable, str(LAYOUTS)]
    done = subprocess.run(
        [*command, str(TABLE), str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    verdicts = json.loads(done.stdout)
    cases = json.loads(TABLE.read_text(encoding="utf-8"))["cases"]
    assert len(cases) == len({case["name"] for case in cases})
    expected = {case["name"]: case["verdict"] for case in cases}
    assert verdicts == expected
    # Every rule the two share is exercised, and every verdict kind.
    assert set(expected.values()) == {
        "accepted",
        "absent",
        "owner",
        "mode",
        "writable-directory",
        "links",
        "regular-file",
        "resolution",
    }


def test_the_walk_never_enters_a_refused_directory() -> None:
    from rextio_device_cuda import _root_owned

    # /proc/self/root names / by its text, but the kernel follows the link
    # itself (into whatever root that process has): the interpreter check
    # refuses any walk that enters /proc or /dev.
    refused = ("/proc", "/dev")
    path = "/proc/self/root/bin/sh"
    finding = _root_owned.review(path, refused_directories=refused)
    assert finding is not None
    assert finding.rule == "location"
