"""The scheduler leader's schedules clock: every `timer_poll_ms` it reads the schedules,
and for each one not paused fires the ticks due since the last one it handled.

Exactly once, across failover: a tick's session is created under the idempotency key
`schedule:<name>:<tick ms>`, so a tick fired by two leaders (or again by the next leader
after one died between creating the session and moving the cursor) is one session; a
tick whose key already names a session counts as started and is not decided again. The
cursor (the last tick handled) moves only after the ticks' runs are recorded. Ticks
missed while no leader ran fire if they are due within the catch-up window, by the
overlap policy (scheduler/schedules.py decides), and are recorded as skipped otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from strands_durable.errors import DurableError
from strands_durable.models import now_ms
from strands_durable.scheduler.schedule_ops import previous_active, start_run, timing_of
from strands_durable.scheduler.schedules import (
    Action,
    Decision,
    Overlap,
    decide_overlap,
    plan_ticks,
)
from strands_durable.sessions.control import cancel
from strands_durable.store.outage import REDIS_DOWN_IN_LOOP
from strands_durable.store.schedules import (
    RUNS_KEPT,
    ScheduleDef,
    ScheduleRun,
    idempotency_key,
)
from strands_durable.store.store import Store

log = logging.getLogger("durable.scheduler")


class ScheduleClock:
    def __init__(self, store: Store, interval_s: float) -> None:
        self.store = store
        self.interval_s = interval_s
        self.rounds = 0  # rounds run while leading (tests wait on it)

    async def run(self, stopping: asyncio.Event, leading: Callable[[], bool],
                  on_outage: Callable[[BaseException], None]) -> None:
        """While leading: a round every interval, until `stopping` is set."""
        while not stopping.is_set():
            if leading():
                try:
                    await self.round(now_ms(), leading)
                    self.rounds += 1
                except REDIS_DOWN_IN_LOOP as exc:
                    on_outage(exc)
                except Exception:
                    log.exception("scheduler: schedules round failed")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stopping.wait(), timeout=self.interval_s)

    async def round(self, now: int, leading: Callable[[], bool] = lambda: True) -> None:
        schedules = await self.store.list_schedules()
        if not schedules:
            return
        cursors = await self.store.schedule_cursors()
        buffered = await self.store.buffered_ticks()
        for schedule in schedules:
            if not leading():
                return
            if schedule.paused:
                continue
            try:
                await self.handle(schedule, cursors.get(schedule.name, schedule.created_ms),
                                  buffered.get(schedule.name), now)
            except REDIS_DOWN_IN_LOOP:
                raise
            except Exception:  # one broken schedule never stops the others
                log.exception("scheduler: schedule %s failed", schedule.name)

    async def handle(self, schedule: ScheduleDef, cursor: int, buffered: int | None,
                     now: int) -> None:
        plan = plan_ticks(timing_of(schedule), cursor, now, kept=RUNS_KEPT)
        if not plan.fire and not plan.skipped and buffered is None:
            return
        name, at = schedule.name, now_ms()
        late = f"outside the catch-up window ({schedule.catchup_window_s}s)"
        records = [ScheduleRun(tick_ms=t, at_ms=at, outcome="skipped", detail=late)
                   for t in plan.skipped]
        if plan.skipped_more and records:
            records[0] = records[0].model_copy(
                update={"detail": f"{late}; {plan.skipped_more} earlier tick(s) too"})
        runs = await self.store.schedule_runs(name)
        active = await previous_active(self.store, runs)
        if buffered is not None and active is None:
            run = await start_run(self.store, schedule, buffered, trigger="buffered")
            await self.store.clear_buffered(name)
            records.append(run)
            active, buffered = run.session_id, None
        # Ticks a leader before us fired already: started, not decided again.
        fresh: list[int] = []
        for tick in plan.fire:
            sid = await self.store.session_of_key(idempotency_key(name, tick))
            if sid is None:
                fresh.append(tick)
                continue
            records.append(ScheduleRun(tick_ms=tick, at_ms=at, outcome="started",
                                       session_id=sid))
            active = sid
        decisions = decide_overlap(Overlap(schedule.overlap), fresh, active is not None,
                                   buffered is not None)
        for decision in decisions:
            run = await self.act(schedule, decision, active)
            records.append(run)
            if run.outcome == "started":
                active = run.session_id
        await self.store.record_runs(name, records)
        await self.store.advance_schedule(name, plan.cursor)

    async def act(self, schedule: ScheduleDef, decision: Decision, active: str | None
                  ) -> ScheduleRun:
        tick = decision.tick_ms
        if decision.action == Action.SKIP:
            return ScheduleRun(tick_ms=tick, at_ms=now_ms(), outcome="skipped",
                               detail=decision.reason)
        if decision.action == Action.BUFFER:
            waiting = await self.store.buffer_tick(schedule.name, tick)
            return ScheduleRun(tick_ms=tick, at_ms=now_ms(),
                               outcome="buffered" if waiting else "skipped",
                               detail=decision.reason if waiting
                               else "another tick waits already")
        if decision.action == Action.CANCEL_THEN_START and active is not None:
            with contextlib.suppress(DurableError):  # it may have ended meanwhile
                await cancel(self.store, active,
                             reason=f"cancelled by schedule {schedule.name}'s next tick")
        return await start_run(self.store, schedule, tick)
