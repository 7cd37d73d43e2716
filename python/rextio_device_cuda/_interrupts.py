"""Holding back signal handlers while a probe run owns processes and descriptors.

Python runs a signal's handler (``KeyboardInterrupt`` for SIGINT) in the main
thread between two bytecodes: anywhere. Raised between the spawn call's
return and the line that keeps the child's pid, it would leave the probe
running, unreaped, with its descriptors open. So a run holds back every
Python-level handler while it starts the probe and while it ends it: a
signal that arrives then is recorded, and its handler runs once the run has
ended (``__exit__``). While the run only waits for the probe (``wait``), a
signal's handler runs at once, as it would anywhere; the exception it raises
unwinds into the run's cleanup, which runs held back again.

Handlers are replaced, not blocked with ``pthread_sigmask``: a blocked mask
would be inherited by the probe through fork and exec. Handlers run only in
the main thread, and only the main thread may set them: a run in another
thread has nothing to hold back.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Sequence
from types import FrameType, TracebackType
from typing import Any, Final, TypeVar

_Result = TypeVar("_Result")
_Handler = Callable[[int, FrameType | None], Any]
# Blocked only for the few instructions that swap handlers, so that no
# handler runs while only some of them are swapped.
_CAN_MASK: Final[bool] = hasattr(signal, "pthread_sigmask")


class HeldSignals:
    """A context that holds back Python's signal handlers (see the module)."""

    def __init__(self) -> None:
        self._originals: dict[int, _Handler] = {}
        self._pending: list[int] = []
        self._handle_now = False

    def __enter__(self) -> HeldSignals:
        if threading.current_thread() is not threading.main_thread():
            return self
        handled = [
            number
            for number in signal.valid_signals()
            if callable(signal.getsignal(number))
        ]
        previous_mask = _block(handled)
        try:
            for number in handled:
                handler = signal.getsignal(number)
                if callable(handler):
                    signal.signal(number, self._hold)
                    self._originals[number] = handler
        except BaseException:
            self._restore()
            raise
        finally:
            _unblock(previous_mask)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        previous_mask = _block(list(self._originals))
        try:
            self._restore()
        finally:
            _unblock(previous_mask)
        pending, self._pending = self._pending, []
        for number in pending:
            handler = signal.getsignal(number)
            if callable(handler):
                handler(number, None)

    def wait(self, blocking_call: Callable[[], _Result]) -> _Result:
        """Run ``blocking_call`` (a wait) with signal handlers running as usual,
        after the handlers of the signals held back until now."""
        self._handle_now = True
        try:
            while self._pending:
                self._run_handler(self._pending.pop(0), None)
            return blocking_call()
        finally:
            self._handle_now = False

    def _hold(self, number: int, frame: FrameType | None) -> None:
        if self._handle_now:
            self._run_handler(number, frame)
        else:
            self._pending.append(number)

    def _run_handler(self, number: int, frame: FrameType | None) -> None:
        # Cleared before the handler runs: if it raises, the cleanup it
        # unwinds into holds signals back again from its first instruction.
        self._handle_now = False
        self._originals[number](number, frame)
        self._handle_now = True

    def _restore(self) -> None:
        originals, self._originals = self._originals, {}
        for number, handler in originals.items():
            signal.signal(number, handler)


def _block(numbers: Sequence[int]) -> set[int] | None:
    if not _CAN_MASK or not numbers:
        return None
    return set(signal.pthread_sigmask(signal.SIG_BLOCK, numbers))


def _unblock(previous_mask: set[int] | None) -> None:
    if previous_mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
