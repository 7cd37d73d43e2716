"""Probe run time, median of several runs (run by `cargo xtask bench`).

Usage: python probe_bench.py PROBE SIM_DRIVER (as root: private namespaces)

With no driver (this host) and beside the simulated driver with two devices
(in a namespace), each beside the cost of spawning ``true`` measured the same
way: a shell loop timing each run, so the namespace's setup is not counted.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sim_namespace import TWO_DEVICES, NativeBinaries, SimulatedHost, namespace_tools_or_fail

RUNS = 31
# Prints the wall time in nanoseconds of each of "$2" runs of "$1", one a line.
TIMING_LOOP = """
program="$1"; runs="$2"; i=0
while [ "$i" -lt "$runs" ]; do
  start=$(date +%s%N); "$program" >/dev/null 2>&1; end=$(date +%s%N)
  echo $((end - start)); i=$((i + 1))
done
"""


def median_ms(stdout: str) -> str:
    samples = [int(line) for line in stdout.split()]
    if len(samples) != RUNS:
        raise SystemExit(f"the timing loop printed {len(samples)} samples, not {RUNS}")
    return f"{statistics.median(samples) / 1e6:.2f} ms"


def main() -> int:
    probe, sim_driver = map(Path, sys.argv[1:3])
    loop = ["sh", "-c", TIMING_LOOP, "rextio-bench"]
    true = shutil.which("true") or "/bin/true"

    def here(program: str | Path) -> str:
        argv = [*loop, str(program), str(RUNS)]
        return median_ms(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)

    with tempfile.TemporaryDirectory(prefix="rextio-bench-") as scratch:
        binaries = NativeBinaries(probe=probe, smoke=probe, sim_driver=sim_driver)
        host = SimulatedHost(binaries, namespace_tools_or_fail(), Path(scratch))
        simulated = median_ms(host.run(TWO_DEVICES, [*loop, str(probe), str(RUNS)]).stdout)
    print(f"probe (median of {RUNS} runs, wall time including process spawn):")
    print(f"  spawn floor (`true`):          {here(true)}")
    print(f"  no driver on this host:        {here(probe)}")
    print(f"  simulated driver, two devices: {simulated}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
