"""The stream consumer a worker process hosts: reads its shards' step streams with
XREADGROUP, runs steps up to its concurrency, re-claims entries other workers left
idle, dead-letters entries delivered too often, promotes due timers and heartbeats.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from collections.abc import Sequence

from strands_durable import metrics
from strands_durable.models import Event, EventType, StepJob, now_iso, now_ms
from strands_durable.settings import DurableSettings
from strands_durable.store.fleet import process_name
from strands_durable.store.keys import check_token
from strands_durable.store.outage import REDIS_DOWN_IN_LOOP
from strands_durable.store.records import StreamEntry, TakenEntry
from strands_durable.store.store import Store
from strands_durable.version import __version__
from strands_durable.worker import token_tally
from strands_durable.worker.execute import StepExecutor
from strands_durable.worker.failover import Failover
from strands_durable.worker.faults import stall_loop
from strands_durable.worker.loop_load import BusyGauge, LoopIdleClock, watch_idle
from strands_durable.worker.slots import FLOOR, PACE_S, SlotHold, Slots, next_limit
from strands_durable.worker.step_runner import StepRunner

log = logging.getLogger("durable.worker")

# The most entries one turn of a read loop takes (and gates, in one take.lua call), however
# many slots are free: a script holds Redis while it runs, about 50 us an entry, so 1,000
# at once (a worker with every slot free) would stall every other client ~50 ms; 100 hold
# it about 5 ms. The loop's next turn takes the next batch at once.
READ_BATCH = 100


class StepConsumer:
    def __init__(self, settings: DurableSettings, store: Store, name: str | None = None,
                 executor: StepExecutor | None = None) -> None:
        self.settings = settings
        self.store = store
        self.name = check_token("consumer name", name or process_name())
        self.runner = StepRunner(settings, store, executor or StepExecutor(settings, store),
                                 self.name)
        self._slots = Slots(settings.worker_concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self._loops: list[asyncio.Task[None]] = []
        self._readers = 0  # the first _readers loops read the streams
        self._stopping = asyncio.Event()
        # Shards a commit just found with nothing new: the next read waits at once
        # (a take there would find nothing again; one round trip saved).
        self._drained: set[int] = set()
        # When each shard's read loop re-claims idle entries next: a commit takes no
        # entry then, so the slot comes back to the loop (a busy worker whose commits
        # always took the next step would never look for a dead worker's entries).
        self._reclaim_at: dict[int, float] = {}
        self.runner.take_next = self._take_next
        self.started_at = now_iso()
        self.steps_run = 0  # deliveries processed (pacing's busy time per step)
        # Beats from a thread, dead workers' entries taken at once (worker/failover.py).
        self.failover = Failover.for_consumer(self)

    # -- lifecycle -----------------------------------------------------------------
    def read_shards(self) -> Sequence[int]:
        """The shards this consumer reads and promotes timers of: every one here."""
        return range(self.store.keys.shards)

    async def start(self) -> None:
        await self.store.prepare()
        await self.store.refresh_fair_weights()  # namespaces' quotas, before any take
        idle = watch_idle(asyncio.get_running_loop())
        pacing = self.settings.worker_adaptive_concurrency and idle is not None
        if pacing:
            self._slots.set_limit(FLOOR)
        shards = self.read_shards()
        self._loops = [asyncio.create_task(self._read_loop(k), name=f"read-{k}") for k in shards]
        self._readers = len(self._loops)
        self._loops += [
            asyncio.create_task(self._timer_loop(), name="timers"),
            asyncio.create_task(self._heartbeat_loop(), name="heartbeat"),
        ]
        if pacing and idle is not None:
            self._loops.append(asyncio.create_task(self._pace_loop(idle), name="pacing"))
        if self.failover is not None:
            self.failover.start()
        if self.settings.loop_stall:  # drills only
            self._loops.append(asyncio.create_task(stall_loop(self.settings.loop_stall)))
        log.info("worker %s consuming %d shard(s), concurrency %d", self.name,
                 len(shards), self.settings.worker_concurrency)

    async def stop(self, grace_s: float | None = None) -> None:
        """Stop reading; let running steps finish (and commit) for up to `grace_s`;
        whatever is still running then is cancelled and stays pending for another worker."""
        self._stopping.set()
        # Stop reading first, so nothing new arrives while running steps drain.
        readers = self._loops[: self._readers]
        for loop in readers:
            loop.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        grace = self.settings.shutdown_grace_s if grace_s is None else grace_s
        if self._tasks:
            log.info("worker %s: waiting up to %.1fs for %d running step(s)", self.name,
                     grace, len(self._tasks))
            _, pending = await asyncio.wait(set(self._tasks), timeout=grace)
            stranded = dict(self.runner.running)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
                released = await self._hand_back(stranded)
                log.warning("worker %s: %d step(s) handed back for another worker",
                            self.name, released)
        for loop in self._loops:
            loop.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        await self.runner.executor.close()  # MCP server processes end with the worker
        if self.failover is not None:  # beats stop last: nobody declares us dead now
            await self.failover.stop()
        with contextlib.suppress(*REDIS_DOWN_IN_LOOP):
            await token_tally.close(self.store)  # the tokens counted since the last write
            await self.store.forget_heartbeats([self.name])
            # Leave the group too, unless steps handed back are still pending under us.
            await self.store.retire_consumer(self.name)

    async def _hand_back(self, entries: dict[str, StepJob]) -> int:
        by_shard: dict[int, list[str]] = {}
        for entry_id, job in entries.items():
            by_shard.setdefault(self.store.keys.shard(job.session_id), []).append(entry_id)
        released = 0
        with contextlib.suppress(*REDIS_DOWN_IN_LOOP):
            for shard, ids in by_shard.items():
                released += await self.store.release(shard, ids, self.name,
                                                     self.settings.claim_idle_ms * 10)
        return released

    async def wait_idle(self) -> None:
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    @property
    def running(self) -> int:
        return len(self._tasks)

    @property
    def slots_in_use(self) -> int:
        """Slots taken: by running steps, and by read loops for what they start next."""
        return self._slots.used

    @property
    def slot_limit(self) -> int:
        """Steps this consumer takes at once now (worker/slots.py)."""
        return self._slots.limit

    # -- loops -----------------------------------------------------------------------
    def _spawn(self, shard: int, entry_id: str, fields: dict[str, str], reclaimed: bool,
               gated: TakenEntry | None = None) -> None:
        task = asyncio.create_task(self._run_one(shard, entry_id, fields, reclaimed, gated))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _take_next(self, shard: int) -> int:
        """A commit takes the worker's next entry into the slot its step frees, unless
        the worker is stopping, its slot limit came down (worker/slots.py) or the shard's
        re-claim is due."""
        if self._stopping.is_set() or not self._slots.keeps_slot():
            return 0
        due = self._reclaim_at.get(shard)
        return 0 if due is None or asyncio.get_running_loop().time() >= due else 1

    async def _run_one(self, shard: int, entry_id: str, fields: dict[str, str],
                       reclaimed: bool, gated: TakenEntry | None = None) -> None:
        """Run the entry's step in the slot the caller took, then what its commit took
        in the same slot (and task), until a commit takes nothing."""
        try:
            while True:
                taken = await self.runner.process(shard, entry_id, fields, reclaimed, gated)
                self.steps_run += 1
                gated = await self._next_taken(shard, taken)
                if gated is None:
                    return
                entry_id, fields, reclaimed = gated.entry_id, gated.fields, False
        except asyncio.CancelledError:
            raise
        except REDIS_DOWN_IN_LOOP as exc:
            # The entry stays pending; it is re-claimed once Redis is back.
            log.warning("step entry %s: Redis unavailable (%s); left pending", entry_id, exc)
        except Exception:
            log.exception("step entry %s: unexpected error; left pending", entry_id)
        finally:
            self._slots.give_back()

    async def _next_taken(self, shard: int, taken: list[TakenEntry] | None
                          ) -> TakenEntry | None:
        """The entry a commit took to run next, if any; one its gate settled (held,
        committed, ...: acked there) needs nothing. Taken as the worker began to stop:
        handed back for another worker at once."""
        if taken == []:
            self._drained.add(shard)
        runnable = [t for t in taken or () if t.gate is None or t.gate.verdict == "run"]
        if runnable and self._stopping.is_set():
            await self.store.release(shard, [t.entry_id for t in runnable], self.name,
                                     self.settings.claim_idle_ms * 10)
            return None
        for extra in runnable[1:]:  # a commit takes one per freed slot: not reached
            await self.store.release(shard, [extra.entry_id], self.name,
                                     self.settings.claim_idle_ms * 10)
        return runnable[0] if runnable else None

    async def _read_loop(self, shard: int) -> None:
        """One loop per shard owns the slots it takes: first it re-claims entries other
        workers left idle, then reads new ones, never holding more than it can run.
        (Re-claiming apart from reading would let claimed entries wait for slots until
        they idle out again, and their delivery counts climb with nobody running them.)"""
        reclaim_every = max(0.05, self.settings.claim_idle_ms / 2000)
        loop = asyncio.get_running_loop()
        self._reclaim_at[shard] = loop.time() + reclaim_every  # sooner: a worker died
        while not self._stopping.is_set():
            hold = self._slots.hold(await self._slots.take_free(READ_BATCH))
            used = 0
            try:
                if loop.time() >= self._reclaim_at[shard]:
                    self._reclaim_at[shard] = loop.time() + reclaim_every
                    used += await self._reclaim(shard, hold.count)
                if used < hold.count:
                    used += await self._read_new(shard, hold, used)
            except asyncio.CancelledError:
                raise
            except REDIS_DOWN_IN_LOOP as exc:
                log.warning("shard %d: Redis unavailable (%s); retrying", shard, exc)
                await self._pause(1.0)
            except Exception:
                log.exception("shard %d: read failed", shard)
                await self._pause(1.0)
            finally:
                hold.release_unused(used)

    async def _read_new(self, shard: int, hold: SlotHold, used: int) -> int:
        """Start new entries in the slots of `hold` that `used` leaves; how many started.
        While there is work, entries come gated (take.lua: one round trip for the read
        and every gate). An empty stream is waited on with a blocking read of one entry,
        holding one slot (the other shards' loops can run what they find meanwhile), and
        what it returns is gated in one call with as many more new entries as slots are
        free by then."""
        if shard in self._drained:
            self._drained.discard(shard)
        else:
            taken = await self.store.take_new(shard, self.name, hold.count - used, now_iso())
            if taken:
                return self._start_taken(shard, taken)
        hold.keep(used + 1)
        entries = await self._wait_new(shard)
        if not entries:
            return 0
        return await self._gate_read(shard, entries, hold.add_free(READ_BATCH - hold.count))

    async def _wait_new(self, shard: int) -> list[StreamEntry]:
        """The next new entry, waited for up to read_block_ms; none once stopping."""
        entries = await self.store.read_new(shard, self.name, 1, self.settings.read_block_ms)
        if entries and self._stopping.is_set():  # arrived as we stopped: hand them back
            await self.store.release(shard, [e for e, _ in entries], self.name,
                                     self.settings.claim_idle_ms * 10)
            return []
        return entries

    async def _gate_read(self, shard: int, entries: list[StreamEntry],
                         more: int) -> int:
        """Gate and start what a blocking read returned, with up to `more` new entries."""
        gated = await self.store.take_new(shard, self.name, more, now_iso(), read=entries)
        return self._start_taken(shard, gated)

    def _start_taken(self, shard: int, taken: list[TakenEntry]) -> int:
        """Run what take.lua handed over; an entry its gate settled (committed, held,
        ...: acked there) takes no slot. Returns the slots used."""
        started = 0
        for entry in taken:
            if entry.gate is not None and entry.gate.verdict != "run":
                log.debug("entry %s: %s", entry.entry_id, entry.gate.verdict)  # or stale
                continue
            # Arrived as we stopped: it still runs (its step_started is written), within
            # the grace period like every running step.
            self._spawn(shard, entry.entry_id, entry.fields, reclaimed=False, gated=entry)
            started += 1
        return started

    async def _reclaim(self, shard: int, slots: int) -> int:
        """Take over up to `slots` entries idle past claim_idle_ms; returns how many
        were started (dead-lettered ones take no slot)."""
        spawned = 0 if self.failover is None else await self.failover.take_orphans(shard, slots)
        cursor = "0-0"
        while spawned < slots:
            claimed = await self.store.claim_idle(shard, self.name, self.settings.claim_idle_ms,
                                                  cursor, slots - spawned)
            cursor = claimed.cursor
            for entry_id, fields in claimed.entries:
                if fields is not None and await self._take_over(shard, entry_id, fields):
                    spawned += 1
            if cursor == "0-0" or not claimed.entries:
                break
        return spawned

    async def _take_over(self, shard: int, entry_id: str, fields: dict[str, str],
                         deliveries: int | None = None, note: str = "") -> bool:
        if entry_id in self.runner.running:
            # Our own step, still running: its lease lapsed while this event loop was
            # busy (a slow import, a long render), and the claim renewed it. Running it
            # twice in one consumer would pass every fence: leave it to the running one.
            log.info("entry %s: lease lapsed while it ran here; renewed, not re-run", entry_id)
            return False
        deliveries = deliveries or await self.store.deliveries(shard, entry_id) or 1
        if deliveries > self.settings.max_deliveries:
            await self._dead_letter(shard, entry_id, fields, deliveries)
            return False
        log.info("re-claimed entry %s (delivery %d)%s", entry_id, deliveries,
                 f" {note}" if note else "")
        metrics.step_reclaimed()
        if note:
            self.runner.reclaim_notes[entry_id] = note
        self._spawn(shard, entry_id, fields, reclaimed=True)
        return True

    async def _dead_letter(self, shard: int, entry_id: str, fields: dict[str, str],
                           deliveries: int) -> None:
        metrics.dead_lettered()
        try:
            job = StepJob.from_json(fields["job"])
        except (KeyError, ValueError, TypeError) as exc:
            await self.store.dead_letter_raw(shard, entry_id, fields, f"not a step job: {exc}",
                                            self.name)
            return
        at = now_iso()
        error = (f"step {job.key} (agent {job.agent}) was delivered {deliveries} times without "
                 f"completing (max {self.settings.max_deliveries}): its workers keep dying or "
                 f"hanging; it is on the dead-letter stream, `durable requeue` retries it")
        events = [Event(EventType.STEP_DEAD_LETTERED, step=job.key, attempt=job.attempt,
                        worker=self.name, at=at, detail=f"{deliveries} deliveries"),
                  Event(EventType.SESSION_FAILED, step=job.key, at=at, detail=error)]
        log.error("session %s: %s", job.session_id, error)
        await self.store.dead_letter(job, entry_id, self.name, deliveries, error, events,
                                     at, now_ms())

    async def _timer_loop(self) -> None:
        interval = self.settings.timer_poll_ms / 1000
        while not self._stopping.is_set():
            for shard in self.read_shards():
                try:
                    await self.promote_timers(shard)
                except asyncio.CancelledError:
                    raise
                except REDIS_DOWN_IN_LOOP as exc:
                    log.warning("timers shard %d: Redis unavailable (%s)", shard, exc)
                except Exception:
                    log.exception("timers shard %d failed", shard)
            await self._pause(interval)

    async def promote_timers(self, shard: int) -> int:
        return await self.store.promote_timers(shard, now_ms())

    async def _heartbeat_loop(self) -> None:
        while not self._stopping.is_set():
            beat = {
                "consumer": self.name, "host": socket.gethostname(), "pid": os.getpid(),
                "started_at": self.started_at, "last_seen": now_iso(), "last_seen_ms": now_ms(),
                "concurrency": self.settings.worker_concurrency,
                "version": __version__,  # the release it runs (a rolling upgrade mixes them)
                "slots": self._slots.limit,  # below concurrency while adaptive pacing holds back
                "running": [f"{j.session_id}/{j.key}" for j in self.runner.running.values()],
            }
            try:
                await self.store.beat(self.name, json.dumps(beat))
                await self.store.refresh_fair_weights()  # namespaces' weights: every take's
                metrics.heartbeat()
            except asyncio.CancelledError:
                raise
            except REDIS_DOWN_IN_LOOP as exc:
                log.warning("heartbeat: Redis unavailable (%s)", exc)
            await self._pause(self.settings.heartbeat_s)

    async def _pace_loop(self, idle: LoopIdleClock) -> None:
        """Revise the slot limit every PACE_S from how busy the event loop was."""
        gauge = BusyGauge(idle)
        steps = self.steps_run
        while not self._stopping.is_set():
            await self._pause(PACE_S)
            busy, busy_s = gauge.sample()
            ran, steps = self.steps_run - steps, self.steps_run
            slots = self._slots
            slots.set_limit(next_limit(slots.limit, slots.ceiling, slots.used, busy,
                                       busy_s / ran if ran else 0.0))
            metrics.worker_paced(busy)

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), timeout=seconds)

