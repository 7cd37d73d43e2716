"""What a user waits for: one ``rextio generate`` of the README's rextio-torch
project (run by ``cargo xtask bench``; nothing here is asserted by a test).

Usage: python generate_bench.py /abs/path/to/reference/python

This interpreter's environment holds Core, rextio-torch and our wheel; the
reference interpreter's the same Core and plugin with the published 0.1.0.
Inside one simulated-driver namespace (the shipped probe loads the simulated
driver, one A100; a fresh namespace each round), each kind runs ``rextio
generate`` of its own copy of the project in a fresh process, the kinds in
rotating order each round:

- ``ours``: the README's project as written, pinned (``probe_sha256``);
- ``ours unpinned``: the same without the pin line;
- ``0.1.0``: the same unpinned project (0.1.0 has no pin option), on the
  same shipped probe.

Each sample is the wall time of the whole ``rextio generate`` process, seen
from its parent; the namespace is made outside every sample.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from sim_namespace import DriverLayout, SimulatedHost, built_binaries, namespace_tools_or_fail
from test_user_path import ONE_A100, _installed_pin, _project

# Rounds of ~1.4 s each; at 21 the medians of one run moved by 5 to 10 % between
# runs on this 2-core machine, at 61 the ratio is steadier (about 1.5 min per 21).
ROUNDS = 61
KINDS = ("ours", "ours unpinned", "0.1.0")
GENERATE_TIMEOUT_SECONDS = 60


def _version(python: Path) -> str:
    which = "import sys, rextio_device_cuda as m; from importlib.metadata import version; "
    which += "print(m.__version__, 'on Core', version('rextio'), 'in', sys.prefix)"
    done = subprocess.run(
        [str(python), "-I", "-c", which], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def inside(arguments: list[str]) -> None:
    """In the namespace, one round: ``KIND REXTIO PROJECT`` triples run in the
    order given; prints one JSON object, each kind's wall time in seconds."""
    taken: dict[str, float] = {}
    for index in range(0, len(arguments), 3):
        kind, rextio, project = arguments[index : index + 3]
        started = time.perf_counter()
        done = subprocess.run(
            [rextio, "generate", "--format", "json", project],
            capture_output=True,
            text=True,
            timeout=GENERATE_TIMEOUT_SECONDS,
            check=False,
        )
        taken[kind] = time.perf_counter() - started
        summary = json.loads(done.stdout) if done.returncode == 0 else {}
        if summary.get("status") != "generated":
            raise SystemExit(f"{kind}: rextio generate failed: {done.stdout}{done.stderr}")
    print(json.dumps(taken))


def main(reference: Path) -> None:
    ours_rextio = Path(sys.executable).with_name("rextio")
    reference_rextio = reference.with_name("rextio")
    executable, digest = _installed_pin()
    labels = {"ours": _version(Path(sys.executable)), "0.1.0": _version(reference)}
    labels["ours unpinned"] = labels["ours"]
    if labels["ours"] == labels["0.1.0"]:
        raise SystemExit("ours and the reference are the same installation")
    with tempfile.TemporaryDirectory(prefix="rextio-generate-bench-") as scratch:
        root = Path(scratch)
        projects = {
            "ours": _project(root / "ours", (executable, digest)),
            "ours unpinned": _project(root / "ours-unpinned", (executable, "")),
            "0.1.0": _project(root / "reference", (executable, "")),
        }
        rextios = {"ours": ours_rextio, "ours unpinned": ours_rextio, "0.1.0": reference_rextio}
        host = SimulatedHost(built_binaries(), namespace_tools_or_fail(), root)
        samples: dict[str, list[float]] = {kind: [] for kind in KINDS}
        for round_index in range(ROUNDS):
            shift = round_index % len(KINDS)
            argv: list[str | Path] = [sys.executable, "-I", __file__, "--inside"]
            for kind in KINDS[shift:] + KINDS[:shift]:
                argv += [kind, rextios[kind], projects[kind]]
            # One namespace a round (each within the namespace's time limit).
            run = host.run(DriverLayout(config=ONE_A100), argv)
            if run.returncode != 0:
                raise SystemExit(f"the bench failed in the namespace: {run.stdout}{run.stderr}")
            for kind, seconds in json.loads(run.stdout).items():
                samples[kind].append(seconds)
    print(
        f"rextio generate of the README's rextio-torch project (simulated driver, one A100; "
        f"a fresh process each, {ROUNDS} rounds, the kinds interleaved in rotating order): "
        "median (least) wall time"
    )
    medians = {kind: statistics.median(samples[kind]) * 1e3 for kind in KINDS}
    for kind in KINDS:
        least = min(samples[kind]) * 1e3
        print(f"  {kind:<14} ({labels[kind]}): {medians[kind]:.1f} ({least:.1f}) ms")
    print(f"ratio ours/0.1.0: {medians['ours'] / medians['0.1.0']:.3f} (target <= 1)")
    unpinned = medians["ours unpinned"] / medians["0.1.0"]
    print(f"ratio ours unpinned/0.1.0: {unpinned:.3f} (like for like: the same probe, no pin)")


if __name__ == "__main__":
    if sys.argv[1] == "--inside":
        inside(sys.argv[2:])
    else:
        main(Path(sys.argv[1]))
