"""tests/e2e/demo.py (`cargo xtask demo`) runs its five steps to the end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sim_namespace import NamespaceTools, NativeBinaries


def test_the_demo_shows_every_step_and_ends_done(
    native: NativeBinaries, namespace_tools: NamespaceTools
) -> None:
    demo = Path(__file__).resolve().with_name("demo.py")
    run = subprocess.run(
        [sys.executable, demo], capture_output=True, text=True, timeout=600, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr
    headings = [line for line in run.stdout.splitlines() if line.startswith("== ")]
    assert [heading.split(".")[0] for heading in headings] == [f"== {n}" for n in range(1, 6)]
    assert '"reason_code": "LIBCUDA_SO_NOT_FOUND"' in run.stdout
    assert '"device_count": 2' in run.stdout
    assert "preflight status: ready (support_claim: False)" in run.stdout
    assert '"status": "smoke-complete"' in run.stdout
    assert '"round_trip": true' in run.stdout
    assert "     cuCtxDestroy_v2" in run.stdout
    assert "sample built against the packaged rextio-cuda-runtime" in run.stdout
    assert run.stdout.endswith("(and still certifies nothing).\n")
    wide = [line for line in run.stdout.splitlines() if len(line) > 100]
    assert wide == [], wide
