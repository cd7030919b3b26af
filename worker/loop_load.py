"""How busy a worker's event loop is: the time it spent waiting for I/O with nothing to run.

asyncio keeps no such figure (Node's `eventLoopUtilization` is the model). A selector event
loop waits in one place, its selector's `select()`, and passes a timeout of 0 there while
callbacks are ready to run; so the time spent in `select()` with any other timeout is the
time the loop was idle. Loops without a selector (uvloop, Windows' proactor) give no
reading, and a worker on one keeps its fixed concurrency.
"""

from __future__ import annotations

import asyncio
import selectors
import time
import weakref
from collections.abc import Callable
from typing import Any

_WATCHED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopIdleClock] = (
    weakref.WeakKeyDictionary())


class LoopIdleClock:
    """Seconds the loop has spent idle since it was first watched (only ever grows)."""

    def __init__(self) -> None:
        self.idle_s = 0.0

    def timed(self, select: Callable[[float | None], Any]) -> Callable[[float | None], Any]:
        clock = time.monotonic

        def select_timed(timeout: float | None = None) -> Any:
            if timeout == 0:  # callbacks are ready: the loop is not waiting
                return select(timeout)
            began = clock()
            try:
                return select(timeout)
            finally:
                self.idle_s += clock() - began

        return select_timed


def watch_idle(loop: asyncio.AbstractEventLoop) -> LoopIdleClock | None:
    """The loop's idle clock, installed on its selector the first time (once per loop, for
    every consumer in it); None for a loop without a selector."""
    clock = _WATCHED.get(loop)
    if clock is not None:
        return clock
    # The loop's selector is not public API; every asyncio selector loop since 3.4 has it.
    selector = getattr(loop, "_selector", None)
    if not isinstance(selector, selectors.BaseSelector):
        return None
    clock = _WATCHED[loop] = LoopIdleClock()
    selector.select = clock.timed(selector.select)  # type: ignore[method-assign,assignment]
    return clock


class BusyGauge:
    """How busy the loop was between two `sample()` calls: its share of the wall time, and
    the seconds."""

    def __init__(self, clock: LoopIdleClock) -> None:
        self._clock = clock
        self._at = time.monotonic()
        self._idle = clock.idle_s

    def sample(self) -> tuple[float, float]:
        now, idle = time.monotonic(), self._clock.idle_s
        wall, idled = now - self._at, idle - self._idle
        self._at, self._idle = now, idle
        if wall <= 0:
            return 0.0, 0.0
        busy_s = min(wall, max(0.0, wall - idled))
        return busy_s / wall, busy_s
