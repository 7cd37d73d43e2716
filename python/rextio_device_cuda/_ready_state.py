"""Which requests may receive a build contribution: the latest preflight of
each request fingerprint, and only when it succeeded.

Each preflight takes a generation number when it starts its probe, or when it
refuses without one (revoking any earlier success of the same fingerprint),
and records its outcome only if no newer preflight of that fingerprint has
taken one since. The lock is never held while a probe runs.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Final

from rextio.devices import DevicePreflightRequest

# Fingerprints remembered at once; the oldest are forgotten (fail closed: a
# forgotten request needs a new preflight).
_MAX_FINGERPRINTS: Final[int] = 4096


def request_fingerprint(request: DevicePreflightRequest) -> str:
    """The canonical fingerprint: ``request.to_dict()`` as sorted compact JSON."""
    return json.dumps(request.to_dict(), sort_keys=True, separators=(",", ":"))


class _Entry:
    # A plain class: a dataclass would cost its definition at import.
    __slots__ = ("latest_generation", "ready_generation")

    def __init__(self, latest_generation: int) -> None:
        self.latest_generation = latest_generation
        self.ready_generation: int | None = None


class ReadyState:
    """Thread-safe record of the latest preflight outcome per fingerprint."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generation = 0
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    def begin(self, fingerprint: str) -> int:
        """Start a preflight: a new generation that revokes any earlier success."""
        with self._lock:
            self._generation += 1
            self._entries[fingerprint] = _Entry(latest_generation=self._generation)
            self._entries.move_to_end(fingerprint)
            while len(self._entries) > _MAX_FINGERPRINTS:
                self._entries.popitem(last=False)
            return self._generation

    def finish(self, fingerprint: str, generation: int, *, ready: bool) -> None:
        """Record the outcome, unless a newer preflight has started since."""
        with self._lock:
            entry = self._entries.get(fingerprint)
            if entry is None or entry.latest_generation != generation:
                return
            entry.ready_generation = generation if ready else None

    def is_ready(self, fingerprint: str) -> bool:
        """Whether the latest preflight of ``fingerprint`` finished and succeeded."""
        with self._lock:
            entry = self._entries.get(fingerprint)
            return entry is not None and entry.ready_generation == entry.latest_generation
