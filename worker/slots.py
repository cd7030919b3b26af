"""A worker's step slots: at most DURABLE_WORKER_CONCURRENCY steps at once, and fewer while
its event loop is saturated (DURABLE_WORKER_ADAPTIVE_CONCURRENCY, on by default).

Why fewer: a worker's steps share one event loop. Once the loop is busy all the time, one
step more in flight adds no throughput, only waiting: each commit's reply waits for the
other steps' Python before its own task runs again (with N steps in flight, about N-1
steps' CPU). Taking fewer leaves the rest on the stream, where another worker can take
them and the queue depth shows, rather than queued unseen inside this worker. Steps that
wait on a model leave the loop idle, so they keep every slot. The same idea as Temporal's
resource-based slot suppliers and the adaptive concurrency limits of Netflix and Envoy.
"""

from __future__ import annotations

import asyncio
from collections import deque

# The loop's busy share (worker/loop_load.py) over one pacing period, at or above which it
# is saturated, and below which it has room (more steps, if all slots are in use).
SATURATED = 0.97
ROOMY = 0.90
PACE_S = 0.02  # how often the limit is revised
# On a saturated loop a commit's reply waits for the other steps in flight (about n-1 steps'
# busy time with n in flight): the limit comes down until that is within this budget. More
# in flight than that adds only waiting; fewer would give up the batching of replies that
# arrive together (more loop turns and system calls per step).
WAIT_BUDGET_S = 0.0005
# The fewest slots pacing leaves: one step's commit round trip overlaps another's Python.
# A pacing worker also starts there and grows while its loop has room (a slow start):
# starting at the ceiling would queue its first steps behind each other.
FLOOR = 2


def fitting(step_busy_s: float) -> int:
    """How many steps in flight keep a commit's wait on a saturated loop in the budget."""
    if step_busy_s <= 0:
        return FLOOR
    return max(FLOOR, 1 + int(WAIT_BUDGET_S / step_busy_s))


def next_limit(limit: int, ceiling: int, used: int, busy: float, step_busy_s: float) -> int:
    """The slot limit for the next period, from the loop's busy share and its busy time
    per step over the last one. Saturated: one fewer than in use while that is more than
    fit the wait budget. Room left while every slot is in use: up by half (at least 1), to
    the ceiling. Otherwise it holds (so between the thresholds it settles)."""
    if busy >= SATURATED:
        in_use = min(limit, used)
        fits = fitting(step_busy_s)
        return min(limit, max(fits, in_use - 1)) if in_use > fits else limit
    if busy < ROOMY and used >= limit:
        return min(ceiling, limit + max(1, limit // 2))
    return limit


class Slots:
    """Counted slots under a limit that can move (asyncio.Semaphore's cannot)."""

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self.limit = ceiling
        self.used = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    def free(self) -> int:
        return max(0, self.limit - self.used)

    async def take_free(self, most: int | None = None) -> int:
        """Wait for a free slot; take every free one (at most `most`), and return how many."""
        await self.take_one()
        return 1 + self.take_now(None if most is None else most - 1)

    def take_now(self, most: int | None = None) -> int:
        """Take every free slot (at most `most`) without waiting; how many (0 when none is
        free, or when others wait for one: they come first)."""
        if self._waiters:
            return 0
        taken = self.free() if most is None else min(self.free(), max(0, most))
        self.used += taken
        return taken

    async def take_one(self) -> None:
        """Take one slot, in turn: while others wait, behind them, even if one is free
        now (a read loop whose wait ended empty would otherwise take its slot straight
        back, and with more shards than slots some shards would never be read)."""
        if self.free() and not self._waiters:
            self.used += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # _wake hands the slot over: counted in `used` already
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give_back()  # handed a slot as it was cancelled: the next in line
            elif waiter in self._waiters:
                self._waiters.remove(waiter)
            raise

    def give_back(self, count: int = 1) -> None:
        self.used -= count
        self._wake()

    def keeps_slot(self) -> bool:
        """Whether a step ending now may run the next entry in its slot (no: the limit
        came down below what is in use)."""
        return self.used <= self.limit

    def hold(self, count: int) -> SlotHold:
        return SlotHold(self, count)

    def set_limit(self, limit: int) -> None:
        self.limit = max(1, min(self.ceiling, limit))
        self._wake()

    def _wake(self) -> None:
        """Hand each free slot to the next waiter, first come first served."""
        while self._waiters and self.free():
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.used += 1
                waiter.set_result(None)


class SlotHold:
    """The slots a read loop took for what it is about to start: it may give some back
    before it waits, and take more that came free meanwhile."""

    def __init__(self, slots: Slots, count: int) -> None:
        self._slots = slots
        self.count = count

    def keep(self, count: int) -> None:
        """Give back all but `count`."""
        if count < self.count:
            self._slots.give_back(self.count - count)
            self.count = count

    def add_free(self, most: int | None = None) -> int:
        """Add every slot free now (at most `most`); how many."""
        more = self._slots.take_now(most)
        self.count += more
        return more

    def release_unused(self, used: int) -> None:
        """The slots that nothing started in go back (the others, as their steps end)."""
        self._slots.give_back(self.count - used)
        self.count = used
