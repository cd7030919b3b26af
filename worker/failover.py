"""Fast failover in a step consumer (a worker, or `durable run`'s consumer).

A thread of its own, with a Redis connection of its own, beats on every shard the
consumer reads every DURABLE_FAILOVER_BEAT_MS, so a busy event loop (a heavy render, a
slow import, a long GC pause) cannot make the worker look dead. The same thread watches
the other consumers' beats there (store/liveness.py) and declares dead, in one script
per shard (store/lua/declare_dead.lua), any that stayed silent for
DURABLE_FAILOVER_MISSED_BEATS beats: their pending entries move under a holder marked
long idle, and each affected session gets a `worker_declared_dead` event. The thread
then tells the event loop, whose read loop takes them at its next turn (claim_orphans.lua)
and runs them; every other worker learns from its next beat that orphans wait.

A worker that finds (in its beat's reply) that it was declared dead stops the steps it
was running on that shard whose entries are no longer its own: they run elsewhere, and
the fence would refuse anything they wrote anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from strands_durable import metrics
from strands_durable.models import now_iso
from strands_durable.redis_targets import Timeouts
from strands_durable.store.connect import MEMORY_URL
from strands_durable.store.failover import BeatWire
from strands_durable.store.liveness import (
    HOLDER,
    BeatWatch,
    Declaration,
    LivenessRule,
    Silent,
    declaration_detail,
)
from strands_durable.store.outage import REDIS_DOWN_IN_LOOP

if TYPE_CHECKING:
    from strands_durable.worker.consumer import StepConsumer

log = logging.getLogger("durable.worker")

JOIN_S = 10.0  # a stop waits this long for the beat thread's last call


class BeatThread(threading.Thread):
    """Beats for `consumer` on `shards` and watches the others' beats there."""

    def __init__(self, wire: BeatWire, consumer: str, shards: Sequence[int],
                 rule: LivenessRule, loop: asyncio.AbstractEventLoop, *, idle_ms: int,
                 role: str, on_orphans: Callable[[int], None],
                 on_declared: Callable[[int, Declaration], None]) -> None:
        super().__init__(name=f"durable-beats-{consumer}", daemon=True)
        self.wire = wire
        self.consumer = consumer
        self.shards = tuple(shards)
        self.rule = rule
        self.watch = BeatWatch(rule)
        self.loop = loop
        self.idle_ms = idle_ms
        self.role = role
        self.on_orphans = on_orphans
        self.on_declared = on_declared
        self.beats = 0  # beats written (tests wait on it)
        self._halt = threading.Event()
        self._forget = False
        self._failing = False

    def halt(self, forget: bool) -> None:
        """Stop after the current tick; `forget`: remove our beats (a graceful stop).
        The first call decides."""
        if not self._halt.is_set():
            self._forget = forget
            self._halt.set()

    def run(self) -> None:
        # Its numbers never repeat one of an earlier thread of the same consumer (one
        # restarted, say): an observer must see each beat as a change.
        seq = secrets.randbits(48)
        due = time.monotonic()
        try:
            while not self._halt.is_set() and not self.loop.is_closed():
                seq += 1
                for shard in self.shards:
                    try:
                        self._tick(shard, seq)
                    except Exception:  # never let the beats die with the worker alive
                        self.watch.lost_sight(shard)
                        log.exception("beats of %s: shard %d failed", self.consumer, shard)
                self.beats += 1
                due = max(due + self.rule.beat_s, time.monotonic())
                self._halt.wait(max(0.0, due - time.monotonic()))
            if self._forget:
                with contextlib.suppress(Exception):
                    self.wire.forget(self.consumer, self.shards)
        finally:
            with contextlib.suppress(Exception):
                self.wire.close()

    def _tick(self, shard: int, seq: int) -> None:
        try:
            reply = self.wire.beat(shard, self.consumer, seq)
        except Exception as exc:  # Redis away: keep beating; what we saw no longer counts
            self.watch.lost_sight(shard)
            self._trouble(exc)
            return
        self._recovered()
        if reply.declared is not None:
            self._post(self.on_declared, shard, reply.declared)
        waiting = reply.orphans_waiting
        for silent in self.watch.observe(shard, reply.beats, time.monotonic(),
                                         ignore=(self.consumer, HOLDER)):
            waiting = self._declare(shard, silent) or waiting
        if waiting:
            self._post(self.on_orphans, shard)

    def _declare(self, shard: int, silent: Silent) -> bool:
        """Declare `silent` dead on `shard`; True if entries were taken from it."""
        try:
            declared = self.wire.declare(
                shard, silent.consumer, silent.seq, by=self.consumer,
                silent_ms=round(silent.silent_s * 1000), idle_ms=self.idle_ms,
                now_iso=now_iso(), detail=declaration_detail(silent.silent_s, self.consumer))
        except Exception as exc:
            self.watch.lost_sight(shard)
            self._trouble(exc)
            return False
        self.watch.forget(shard, silent.consumer)
        if declared is None:
            return False  # it beat meanwhile, or someone else declared it
        announce(silent, len(declared.entries), shard, self.consumer, self.role)
        return bool(declared.entries)

    def _post(self, fn: Callable[..., None], *args: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody to tell
            self.loop.call_soon_threadsafe(fn, *args)

    # Debug only: the consumer already logs one line when Redis goes and one when it is
    # back (store/outage.py); an operator reads one outage, not one per thread.
    def _trouble(self, exc: Exception) -> None:
        if not self._failing:
            self._failing = True
            log.debug("beats of %s: Redis unreachable (%s); beating on", self.consumer, exc)

    def _recovered(self) -> None:
        if self._failing:
            self._failing = False
            log.debug("beats of %s: Redis reachable again", self.consumer)


def announce(silent: Silent, entries: int, shard: int, by: str, role: str) -> None:
    log.warning("declared %s dead on shard %d: no beat for %.1fs; %d step(s) of it run "
                "again now (declared by %s)", silent.consumer, shard, silent.silent_s,
                entries, by)
    metrics.declared_dead(role)


def beat_timeouts(rule: LivenessRule, timeouts: Timeouts) -> Timeouts:
    """The beat connection gives up on a call well before a beat would count as missed
    (then it reconnects), never later than the store's own timeouts."""
    quick = max(0.2, rule.dead_after_s / 2)
    return Timeouts(min(timeouts.connect_s, quick), min(timeouts.socket_s, quick))


class Failover:
    """A consumer's side of fast failover: its beat thread, and on its event loop the
    orphaned entries it takes and the news that it was itself declared dead."""

    def __init__(self, consumer: StepConsumer) -> None:
        self.consumer = consumer
        settings = consumer.settings
        self.rule = LivenessRule.of(settings.failover_beat_ms, settings.failover_missed_beats)
        self.thread: BeatThread | None = None
        self._drops: set[asyncio.Task[int]] = set()

    @classmethod
    def for_consumer(cls, consumer: StepConsumer) -> Failover | None:
        """None when failover is off, or in memory (`durable run --ephemeral`: no fleet)."""
        settings = consumer.settings
        if not settings.failover or settings.redis_url.startswith(MEMORY_URL):
            return None
        return cls(consumer)

    def start(self) -> None:
        c, settings = self.consumer, self.consumer.settings
        wire = BeatWire(settings.redis_url, c.store.keys,
                        beat_timeouts(self.rule, settings.redis_timeouts), settings.events_max)
        self.thread = BeatThread(
            wire, c.name, c.read_shards(), self.rule, asyncio.get_running_loop(),
            idle_ms=settings.claim_idle_ms * 10,
            role="run" if getattr(c, "session_id", None) else "worker",
            on_orphans=self._orphans_waiting, on_declared=self._declared_dead)
        self.thread.start()

    async def stop(self) -> None:
        """Stop beating and remove our beats: after this nobody declares us dead."""
        if self.thread is not None:
            self.thread.halt(forget=True)
            await asyncio.to_thread(self.thread.join, JOIN_S)
            self.thread = None

    def _orphans_waiting(self, shard: int) -> None:
        if shard in self.consumer._reclaim_at:
            self.consumer._reclaim_at[shard] = 0.0  # the read loop re-claims at its next turn

    def _declared_dead(self, shard: int, declaration: Declaration) -> None:
        c = self.consumer
        log.warning("worker %s was declared dead on shard %d by %s (no beat of it seen for "
                    "%.1fs): %d of its steps run elsewhere now, and what it ran of them is "
                    "dropped", c.name, shard, declaration.by, declaration.silent_ms / 1000,
                    declaration.entries)
        metrics.found_declared_dead()
        keys = c.store.keys
        ours = [entry for entry, job in c.runner.running.items()
                if keys.shard(job.session_id) == shard]
        task = asyncio.ensure_future(self._drop(shard, ours))
        self._drops.add(task)
        task.add_done_callback(self._drops.discard)

    async def _drop(self, shard: int, entries: list[str]) -> int:
        try:
            return await self.consumer.runner.drop_lost(shard, entries)
        except REDIS_DOWN_IN_LOOP:  # their next renewal finds out instead
            return 0

    async def take_orphans(self, shard: int, slots: int) -> int:
        """Run up to `slots` entries of dead consumers; returns how many started."""
        c = self.consumer
        orphans, more = await c.store.claim_orphans(shard, c.name, slots)
        if more:
            c._reclaim_at[shard] = 0.0  # more wait: again at the next turn
        started = 0
        for o in orphans:
            if o.since_last_beat_s is not None:
                metrics.failover_rerun(o.since_last_beat_s)
            note = f"after {o.dead or 'its worker'} was declared dead"
            if await c._take_over(shard, o.entry_id, o.fields, o.deliveries, note):
                started += 1
        return started
