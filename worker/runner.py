"""What `durable run` adds around its in-process consumer to be a durable runner: the
runner lock (store/runner_lock.py), taking over a dead runner's steps at once, and
Ctrl-C.

Ctrl-C once: the session is paused (nothing new starts), the steps running finish and
commit, and the run ends with the command that continues it. Ctrl-C again: it stops
now; the step that was running is handed back uncommitted and runs again on resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

from strands_durable.errors import DurableError, LockLost
from strands_durable.models import SessionStatus, StepResult
from strands_durable.sessions.control import pause
from strands_durable.store.outage import REDIS_DOWN_IN_LOOP
from strands_durable.store.runner_lock import RunnerLock
from strands_durable.store.store import SessionRecord, Store
from strands_durable.worker.session_consumer import SessionConsumer

log = logging.getLogger("durable.worker")

INTERRUPTED = "interrupted (Ctrl-C)"
DRAIN_S = 365 * 86_400.0  # the first Ctrl-C waits for running steps however long they take
TAKE_OVER_BATCH = 100


class RunnerConsumer(SessionConsumer):
    """The session consumer of a runner that holds the runner lock."""

    _stopped = False

    async def stop(self, grace_s: float | None = None) -> None:
        # Stopped once for good (the first Ctrl-C drains it): the final stop is a no-op.
        # A drain cut short by a second Ctrl-C never got here: that stop runs again.
        if not self._stopped:
            await super().stop(grace_s)
            self._stopped = True

    async def take_over(self) -> int:
        """The session's entries still pending under a dead runner, taken now rather
        than after claim_idle_ms: the lock says their consumer is gone. Only for the
        local store: with a fleet, a live worker may hold them, and the idle rule stays."""
        taken, cursor = 0, "-"
        while True:
            claimed = await self.store.claim_idle_entries(self.session_id, self.name, cursor,
                                                          TAKE_OVER_BATCH, 0)
            for entry_id, fields in claimed.entries:
                await self._slots.take_one()  # given back when the step ends (_run_one)
                if await self._take_over(self.shard, entry_id, fields):
                    taken += 1
                else:
                    self._slots.give_back()
            cursor = claimed.cursor
            if claimed.at_end or not claimed.entries:
                return taken


class Interrupts:
    """SIGINT while a run follows its session: the first sets `first`, the second
    cancels the task that installed it (the run stops at once)."""

    def __init__(self, on_first: Callable[[], None] | None = None) -> None:
        self.first = asyncio.Event()
        self.second = asyncio.Event()
        self.on_first = on_first
        self._task: asyncio.Task[object] | None = None

    def _hit(self) -> None:
        if not self.first.is_set():
            self.first.set()
            if self.on_first:
                self.on_first()
        else:
            self.second.set()  # seen by the drain even if the cancel below is swallowed
            if self._task is not None:
                self._task.cancel()

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        try:
            loop.add_signal_handler(signal.SIGINT, self._hit)
        except (NotImplementedError, RuntimeError):  # not the main thread: no handler
            yield
            return
        try:
            yield
        finally:
            loop.remove_signal_handler(signal.SIGINT)


@contextlib.asynccontextmanager
async def runner_lock(store: Store, session_id: str) -> AsyncIterator[RunnerLock]:
    """Hold the session's runner lock (renewed) for the body; SessionAlreadyRunning,
    naming the holder, when another runner lives."""
    lock = RunnerLock(store, session_id)
    await lock.acquire()
    renewing = asyncio.create_task(keep_lock(lock))
    try:
        yield lock
    finally:
        renewing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewing
        with contextlib.suppress(*REDIS_DOWN_IN_LOOP):
            await lock.release()


async def keep_lock(lock: RunnerLock) -> None:
    """Renew the runner lock every third of its TTL until cancelled."""
    while True:
        await asyncio.sleep(lock.lock.ttl_ms / 3000)
        try:
            await lock.extend()
        except LockLost:
            log.warning("session %s: runner lock lost (taken over); commits stay fenced",
                        lock.session_id)
            return
        except REDIS_DOWN_IN_LOOP as exc:
            log.warning("runner lock: Redis unavailable (%s)", exc)


async def interruptible(
        store: Store, session_id: str, consumer: SessionConsumer,
        follow: Callable[[Callable[[StepResult], None], asyncio.Event | None],
                         Awaitable[SessionRecord]],
        on_step: Callable[[StepResult], None],
        interrupts: Interrupts | None) -> tuple[SessionRecord, bool]:
    """Follow the session to its end, or to the first Ctrl-C: then pause it, let the
    running steps commit, report them, and say it was interrupted."""
    seen = 0

    def counted(result: StepResult) -> None:
        nonlocal seen
        seen += 1
        on_step(result)

    record = await follow(counted, interrupts.first if interrupts else None)
    if interrupts is None or record.status != SessionStatus.RUNNING:
        return record, False  # it ended (even if Ctrl-C came as it did)
    try:
        await pause(store, session_id, reason=INTERRUPTED)
    except DurableError as exc:  # it ended meanwhile, say: nothing to pause
        log.warning("session %s not paused: %s", session_id, exc)
    await drain(consumer, interrupts.second)
    for result in await store.results(session_id, seen):
        counted(result)
    record = await store.get_session(session_id)
    return record, record.status in (SessionStatus.RUNNING, SessionStatus.PAUSED)


async def drain(consumer: SessionConsumer, now: asyncio.Event) -> None:
    """Stop the consumer, its running steps allowed to finish and commit, unless `now`
    (a second Ctrl-C) is set first: then the run stops at once (CancelledError)."""
    stopping = asyncio.ensure_future(consumer.stop(grace_s=DRAIN_S))
    second = asyncio.ensure_future(now.wait())
    try:
        await asyncio.wait({stopping, second}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        second.cancel()
        if not stopping.done():  # the final stop(grace_s=0) hands the steps back
            stopping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await stopping
    if now.is_set() and stopping.cancelled():
        raise asyncio.CancelledError
    stopping.result()
