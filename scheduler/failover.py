"""The scheduler's part in fast failover: while it leads, it watches every shard's beats
(store/liveness.py) as the workers do and declares dead a consumer silent for
DURABLE_FAILOVER_MISSED_BEATS beats (store/lua/declare_dead.lua: its entries wait
under the holder for the next re-claim of any worker, which its beat tells at once).
Whoever notices first declares it, once: with one worker left, or none, the scheduler
still does."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from strands_durable import metrics
from strands_durable.models import now_iso
from strands_durable.settings import DurableSettings
from strands_durable.store.liveness import HOLDER, BeatWatch, LivenessRule, declaration_detail
from strands_durable.store.outage import REDIS_DOWN_IN_LOOP
from strands_durable.store.store import Store

log = logging.getLogger("durable.scheduler")


class DeathWatch:
    def __init__(self, store: Store, settings: DurableSettings, name: str) -> None:
        self.store = store
        self.name = name
        self.enabled = settings.failover
        self.rule = LivenessRule.of(settings.failover_beat_ms, settings.failover_missed_beats)
        self.idle_ms = settings.claim_idle_ms * 10
        self.watch = BeatWatch(self.rule)
        self.declared = 0  # consumers declared dead by this replica, per shard (tests)

    async def tick(self) -> int:
        """One look at every shard; returns how many it declared dead."""
        declared = 0
        for shard in range(self.store.keys.shards):
            try:
                declared += await self._look(shard)
            except REDIS_DOWN_IN_LOOP:
                self.watch.lost_sight(shard)  # a window not seen whole counts for nothing
        self.declared += declared
        return declared

    async def _look(self, shard: int) -> int:
        reply = await self.store.look_at_beats(shard)
        declared = 0
        for silent in self.watch.observe(shard, reply.beats, time.monotonic(),
                                         ignore=(HOLDER,)):
            found = await self.store.declare_dead(
                shard, silent.consumer, silent.seq, by=self.name,
                silent_ms=round(silent.silent_s * 1000), idle_ms=self.idle_ms,
                now_iso=now_iso(), detail=declaration_detail(silent.silent_s, self.name))
            self.watch.forget(shard, silent.consumer)
            if found is not None:
                log.warning("declared %s dead on shard %d: no beat for %.1fs; %d step(s) "
                            "of it wait for the next worker", silent.consumer, shard,
                            silent.silent_s, len(found.entries))
                metrics.declared_dead("scheduler")
                declared += 1
        return declared

    async def run(self, stopping: asyncio.Event, leading: Callable[[], bool]) -> None:
        """Every beat, while this replica leads (a standby only starts watching)."""
        while self.enabled and not stopping.is_set():
            if leading():
                try:
                    await self.tick()
                except Exception:
                    log.exception("scheduler: failover watch failed")
            else:
                for shard in range(self.store.keys.shards):
                    self.watch.lost_sight(shard)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stopping.wait(), timeout=self.rule.beat_s)
