"""Runs the probe again and again while another process swaps the reviewed
image with a refused file (``renameat2(RENAME_EXCHANGE)`` in a loop).

Run inside the simulated-driver namespace:
``python rename_race.py PROBE SWAPPED RUNS``. Prints one JSON object: how
many runs ended with each reason code (``null`` for a complete report),
how many hung past the timeout, how many printed something unparsable, and
how many swaps happened.
"""

from __future__ import annotations

import ctypes
import json
import signal
import subprocess
import sys
from collections import Counter

REVIEWED_IMAGE = b"/usr/local/nvidia/lib64/libcuda.so.1"
AT_FDCWD = -100
RENAME_EXCHANGE = 2
PROBE_TIMEOUT_SECONDS = 20
SWAPPER_STOP_TIMEOUT_SECONDS = 30


def swap_forever(swapped: bytes) -> None:
    """The swapper: exchanges the two names until SIGTERM, then prints the count."""
    libc = ctypes.CDLL(None, use_errno=True)
    running = True

    def stop(_signal: int, _frame: object) -> None:
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, stop)
    swaps = 0
    while running:
        if libc.renameat2(AT_FDCWD, REVIEWED_IMAGE, AT_FDCWD, swapped, RENAME_EXCHANGE) != 0:
            print(json.dumps({"error": ctypes.get_errno()}), flush=True)
            return
        swaps += 1
    print(json.dumps({"swaps": swaps}), flush=True)


def race(probe: str, swapped: str, runs: int) -> dict[str, object]:
    swapper = subprocess.Popen(
        [sys.executable, __file__, "--swap", swapped], stdout=subprocess.PIPE, text=True
    )
    outcomes: Counter[str] = Counter()
    hangs = unparsable = 0
    try:
        for _ in range(runs):
            try:
                completed = subprocess.run(
                    [probe], capture_output=True, text=True, timeout=PROBE_TIMEOUT_SECONDS
                )
            except subprocess.TimeoutExpired:
                hangs += 1
                continue
            try:
                report = json.loads(completed.stdout)
                outcomes[str(report["reason_code"])] += 1
            except (ValueError, KeyError, TypeError):
                unparsable += 1
    finally:
        swapper.send_signal(signal.SIGTERM)
        output, _ = swapper.communicate(timeout=SWAPPER_STOP_TIMEOUT_SECONDS)
    swapper_report = json.loads(output.strip().splitlines()[-1]) if output.strip() else {}
    return {
        "outcomes": dict(outcomes),
        "hangs": hangs,
        "unparsable": unparsable,
        "swapper": swapper_report,
    }


def main() -> int:
    if sys.argv[1:2] == ["--swap"]:
        swap_forever(sys.argv[2].encode())
        return 0
    probe, swapped, runs = sys.argv[1:4]
    print(json.dumps(race(probe, swapped, int(runs))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
