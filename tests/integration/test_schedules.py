"""Schedules on a real redis-server: the leader's clock fires each tick once (two clocks,
a leader that died between creating a tick's session and recording it), catches up after
downtime within the window and skips the rest, applies the overlap policies; the store
keeps the spec as submitted; a SchedulerService in process fires a per-second schedule."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from helpers import wait_for

from strands_durable.models import SessionStatus, now_ms
from strands_durable.scheduler.schedule_clock import ScheduleClock
from strands_durable.scheduler.schedule_ops import (
    ScheduleOptions,
    new_schedule,
    schedule_view,
    set_paused,
    start_run,
    trigger_now,
)
from strands_durable.scheduler.service import SchedulerService
from strands_durable.sessions.control import cancel
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.connect import open_store
from strands_durable.store.schedules import ScheduleDef, ScheduleExists, ScheduleNotFound
from strands_durable.store.store import Store

pytestmark = pytest.mark.integration

SPEC = """
version: 0
name: {name}
runtime: {{provider: scripted}}
inputs:
  required: {{topic: string}}
agents:
  a: {{prompt: "You are a."}}
pattern:
  type: chain
  config:
    steps:
      - {{agent: a, input: "about {{{{ topic }}}}"}}
"""
MINUTE = 60_000


def schedule(name: str, cron: str = "* * * * *", *, created_ms: int | None = None,
             **options: object) -> ScheduleDef:
    loaded = load_spec_text(SPEC.format(name="nightly"), "spec.yaml", {"topic": "tides"})
    made = new_schedule(name, loaded, ScheduleOptions(cron=cron, **options),  # type: ignore[arg-type]
                        now=created_ms)
    return made


async def sessions(store: Store) -> list[str]:
    return [r.session_id for r in await store.list_sessions(limit=1000)]


def minute_floor(ms: int) -> int:
    return ms - ms % MINUTE


async def test_catch_up_fires_ticks_inside_the_window_and_skips_the_rest(store: Store) -> None:
    now = minute_floor(now_ms()) + 30_000
    await store.create_schedule(schedule("late", created_ms=now - 10 * MINUTE - 30_000,
                                         overlap="allow", catchup_window_s=150))
    await ScheduleClock(store, 0.05).round(now)
    runs = await store.schedule_runs("late")
    started = sorted(r.tick_ms for r in runs if r.outcome == "started")
    skipped = sorted(r.tick_ms for r in runs if r.outcome == "skipped")
    assert started == [now - 150_000, now - 90_000, now - 30_000]  # 150 s late: inside
    assert len(skipped) == 7 and all(t < now - 150_000 for t in skipped)
    assert all("catch-up window" in r.detail for r in runs if r.outcome == "skipped")
    assert len(await sessions(store)) == 3
    view = await schedule_view(store, "late", now)
    assert view.last_tick_ms == now - 30_000 and len(view.next_fire_ms) == 5
    assert view.next_fire_ms[0] == now + 30_000
    # The same round again (another leader, same clock): nothing new.
    await ScheduleClock(store, 0.05).round(now)
    assert len(await sessions(store)) == 3


async def test_a_tick_fired_by_a_leader_that_died_before_recording_it_is_one_session(
        store: Store) -> None:
    now = minute_floor(now_ms()) + 1_000
    made = schedule("once", created_ms=now - 30_000, overlap="allow")
    await store.create_schedule(made)
    tick = now - 1_000
    # The dead leader created the tick's session and recorded nothing, moved no cursor.
    first = await start_run(store, made, tick)
    assert first.outcome == "started"
    await asyncio.gather(ScheduleClock(store, 0.05).round(now),
                         ScheduleClock(store, 0.05).round(now))
    runs = [r for r in await store.schedule_runs("once") if r.tick_ms == tick]
    assert [(r.outcome, r.session_id) for r in runs] == [("started", first.session_id)]
    assert await sessions(store) == [first.session_id]


async def test_skip_records_a_tick_while_the_previous_run_goes_on(store: Store) -> None:
    now = minute_floor(now_ms()) + 1_000
    await store.create_schedule(schedule("skipper", created_ms=now - 3 * MINUTE))
    await ScheduleClock(store, 0.05).round(now)  # three ticks due: one starts (no worker)
    runs = sorted(await store.schedule_runs("skipper"), key=lambda r: r.tick_ms)
    assert [r.outcome for r in runs] == ["started", "skipped", "skipped"]
    assert "still going" in runs[1].detail


async def test_buffer_one_starts_the_buffered_tick_when_the_run_ends(store: Store) -> None:
    now = minute_floor(now_ms()) + 1_000
    await store.create_schedule(schedule("buf", created_ms=now - 3 * MINUTE,
                                         overlap="buffer_one"))
    clock = ScheduleClock(store, 0.05)
    await clock.round(now)
    runs = sorted(await store.schedule_runs("buf"), key=lambda r: r.tick_ms)
    assert [r.outcome for r in runs] == ["started", "buffered", "skipped"]
    assert (await store.buffered_ticks())["buf"] == runs[1].tick_ms
    await clock.round(now + 100)
    assert len(await sessions(store)) == 1  # still waiting
    assert runs[0].session_id is not None
    await cancel(store, runs[0].session_id)
    await clock.round(now + 200)
    later = {r.tick_ms: r for r in await store.schedule_runs("buf")}
    assert later[runs[1].tick_ms].outcome == "started"
    assert later[runs[1].tick_ms].trigger == "buffered"
    assert "buf" not in await store.buffered_ticks()
    assert len(await sessions(store)) == 2


async def test_cancel_other_cancels_the_running_one(store: Store) -> None:
    now = minute_floor(now_ms()) + 1_000
    await store.create_schedule(schedule("canceller", created_ms=now - MINUTE - 10_000,
                                         overlap="cancel_other"))
    clock = ScheduleClock(store, 0.05)
    await clock.round(now)
    first = (await store.schedule_runs("canceller"))[0]
    assert first.outcome == "started" and first.session_id
    await clock.round(now + MINUTE)
    newest = (await store.schedule_runs("canceller"))[0]
    assert newest.outcome == "started" and newest.session_id != first.session_id
    assert await store.status_of(first.session_id) == SessionStatus.CANCELLED
    assert await store.status_of(newest.session_id or "") == SessionStatus.RUNNING


async def test_pause_resume_trigger_and_delete(store: Store) -> None:
    # A second into the last whole minute: never ahead of the clock a resume reads (a
    # minute's floor + 1 s was, during the first second of each minute).
    now = minute_floor(now_ms()) - MINUTE + 1_000
    await store.create_schedule(schedule("ops", created_ms=now - 5 * MINUTE))
    with pytest.raises(ScheduleExists):
        await store.create_schedule(schedule("ops"))
    assert (await set_paused(store, "ops", True)).next_fire_ms == []
    clock = ScheduleClock(store, 0.05)
    await clock.round(now)
    assert await store.schedule_runs("ops") == []  # paused: nothing fires
    manual = await trigger_now(store, "ops")  # a trigger fires even when paused
    assert manual.outcome == "started" and manual.trigger == "manual"
    resumed = await set_paused(store, "ops", False)
    assert not resumed.paused and resumed.last_tick_ms and resumed.last_tick_ms >= now
    await clock.round(now)  # the ticks missed while paused are not caught up
    assert [r.trigger for r in await store.schedule_runs("ops")] == ["manual"]
    await store.delete_schedule("ops")
    with pytest.raises(ScheduleNotFound):
        await schedule_view(store, "ops")
    assert "ops" not in await store.schedule_cursors()


async def test_the_spec_kept_is_the_one_submitted(store: Store) -> None:
    await store.create_schedule(schedule("kept"))
    run = await trigger_now(store, "kept")
    record = await store.get_session(run.session_id or "")
    assert record.workflow_name == "nightly" and record.variables["topic"] == "tides"


@asynccontextmanager
async def scheduler(settings: DurableSettings) -> AsyncIterator[SchedulerService]:
    store = open_store(settings)
    service = SchedulerService(settings, store)
    task = asyncio.create_task(service.run())
    try:
        yield service
    finally:
        service.stop()
        await asyncio.gather(task, return_exceptions=True)
        await store.redis.aclose()


async def test_two_schedulers_fire_each_per_second_tick_once(settings: DurableSettings,
                                                           store: Store) -> None:
    fast = settings.model_copy(update={"scheduler_lock_ttl_ms": 600, "metrics_port": 0})
    await store.create_schedule(schedule("every-second", "* * * * * *", overlap="allow"))
    async with scheduler(fast), scheduler(fast):
        async def started() -> bool:
            runs = await store.schedule_runs("every-second")
            return len([r for r in runs if r.outcome == "started"]) >= 4

        await wait_for(started, timeout_s=60, what="four ticks fired")
    runs = [r for r in await store.schedule_runs("every-second") if r.outcome == "started"]
    ticks = sorted(r.tick_ms for r in runs)
    assert len(set(ticks)) == len(ticks)
    assert all(b - a == 1000 for a, b in itertools.pairwise(ticks))  # no gap
    assert sorted(await sessions(store)) == sorted(str(r.session_id) for r in runs)


async def test_a_schedule_deleted_during_a_round_leaves_nothing_behind(store: Store) -> None:
    made = schedule("gone", created_ms=now_ms() - 2 * MINUTE, overlap="allow")
    await store.create_schedule(made)
    await store.delete_schedule("gone")
    # A leader that read the schedule before the delete finishes its round.
    await ScheduleClock(store, 0.05).handle(made, made.created_ms, None, now_ms())
    assert "gone" not in await store.schedule_cursors()
    assert await store.schedule_runs("gone") == []
