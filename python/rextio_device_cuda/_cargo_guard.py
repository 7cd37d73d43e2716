"""The process between ``build-probe`` and cargo, so that no cargo or rustc outlives it.

``build-probe`` runs this file as a script (``python -I _cargo_guard.py CARGO
ARGS...``) in a session of its own (POSIX) or a process group of its own
(Windows): the terminal's Ctrl-C reaches ``build-probe`` only, never cargo.
The guard starts cargo in its own process group and holds the read end of a
pipe whose only write end ``build-probe`` holds. When that pipe ends, however
``build-probe`` ended (an exception, SIGTERM, SIGKILL), the guard kills the
whole group: itself, cargo and every rustc and build script cargo started.
Otherwise it exits with cargo's status, and ``build-probe`` kills whatever is
left in the group before it reaps the guard.

Standard library only: it runs isolated (``-I``), not as part of the package.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading


def _kill_everything_at_end_of_input(cargo: list[subprocess.Popen[bytes]]) -> None:
    """Blocks until ``build-probe``'s end of the pipe closes, then kills the group."""
    # Unbuffered reads: the interpreter may end while this thread waits.
    while os.read(0, 4096):
        pass
    if sys.platform == "win32":
        # A process group cannot be killed as one here: kill cargo's tree.
        for process in cargo:
            system = os.path.join(os.environ.get("SYSTEMROOT", r"C:\Windows"), "System32")
            subprocess.run(
                [os.path.join(system, "taskkill.exe"), "/F", "/T", "/PID", str(process.pid)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
            )
        os._exit(1)
    else:
        os.killpg(0, signal.SIGKILL)


def main() -> None:
    """Runs ``sys.argv[1:]`` (cargo and its arguments); exits with its status."""
    started: list[subprocess.Popen[bytes]] = []
    # Watching first: an end of input that came before cargo started still kills it.
    threading.Thread(target=_kill_everything_at_end_of_input, args=(started,), daemon=True).start()
    try:
        cargo = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL)
    except OSError as error:
        print(f"error: cargo could not be started: {error.strerror}", file=sys.stderr, flush=True)
        os._exit(127)
    started.append(cargo)
    status = cargo.wait()
    # Straight out: the watching thread still waits on its read.
    os._exit(status if status >= 0 else 128 - status)


if __name__ == "__main__":
    main()
