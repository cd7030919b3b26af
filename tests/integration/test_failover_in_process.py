"""Fast failover with in-process consumers on a real redis-server: a consumer that stops
beating is declared dead once and its steps run again at once (not after claim_idle_ms,
set to a minute here so that only a declaration can explain a re-run); a blocked event
loop is not a death; a zombie that wakes up stops its steps and commits nothing; the
scheduler declares too; a graceful stop is never a death."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable

import pytest
from helpers import StepBreakpoints, wait_for

from strands_durable.models import SessionStatus
from strands_durable.scheduler.service import SchedulerService
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.connect import open_store
from strands_durable.store.liveness import HOLDER, Declaration
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer
from strands_durable.worker.session_consumer import SessionConsumer

pytestmark = pytest.mark.integration

SPEC = """
version: 0
name: failover
runtime: {provider: scripted}
agents:
  a: {prompt: "You are a."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "one {{ n }}"}
      - {agent: a, input: "two after {{ last_response }}"}
"""
WORKFLOW = "failover"
BEAT_MS, MISSED = 100, 5  # dead after 0.5 s of silence


@pytest.fixture
def settings(settings: DurableSettings) -> DurableSettings:
    # claim_idle_ms of a minute: a step that runs again within a test ran again because
    # its worker was declared dead, not because its entry idled out. Three shards: each
    # is beaten on and declared on apart (tests/cluster runs this module on a cluster,
    # where they are slots of different nodes).
    return settings.model_copy(update={
        "claim_idle_ms": 60_000, "failover_beat_ms": BEAT_MS,
        "failover_missed_beats": MISSED, "shards": 3})


@pytest.fixture
async def consumers(settings: DurableSettings, store: Store
                    ) -> AsyncIterator[Callable[[], StepConsumer]]:
    made: list[StepConsumer] = []

    def make() -> StepConsumer:
        c = StepConsumer(settings, store)
        made.append(c)
        return c

    yield make
    for c in made:
        await c.stop(grace_s=0)


def crash(c: StepConsumer) -> None:
    """As a SIGKILL would: its loops and steps end where they are, writing nothing, and
    its beats stop (not removed: a dead process removes nothing)."""
    assert c.failover is not None and c.failover.thread is not None
    c.failover.thread.halt(forget=False)
    for task in [*c._loops, *c._tasks]:
        task.cancel()


async def beats_of(c: StepConsumer, more: int) -> None:
    """Wait until `c`'s beat thread has beaten `more` times more."""
    assert c.failover is not None and c.failover.thread is not None
    thread = c.failover.thread
    target = thread.beats + more

    async def done() -> bool:
        return thread.beats >= target

    await wait_for(done, timeout_s=30, what=f"{more} more beats")


async def start(store: Store, n: int = 0) -> str:
    return (await start_session(store, load_spec_text(SPEC, "f.yaml", {"n": str(n)})))[0]


async def completed(store: Store, sid: str) -> bool:
    return (await store.get_session(sid)).status == SessionStatus.COMPLETED


async def declarations(store: Store) -> list[Declaration]:
    """Every shard's, those that took entries first."""
    found = [d for k in range(store.keys.shards) for d in await store.declarations(k)]
    return sorted(found, key=lambda d: -d.entries)


async def events(store: Store, sid: str) -> list[dict[str, str]]:
    return [f for _, f in await store.events(sid)]


async def test_a_silent_consumer_is_declared_dead_and_its_step_runs_again_at_once(
        store: Store, consumers: Callable[[], StepConsumer],
        breakpoints: StepBreakpoints) -> None:
    breakpoints.set(WORKFLOW, "step:0")
    dead = consumers()
    await dead.start()
    sid = await start(store)
    (hit,) = await breakpoints.wait(WORKFLOW, "step:0")
    assert hit.worker == dead.name
    crash(dead)
    breakpoints.clear(WORKFLOW, "step:0")
    killed = time.monotonic()
    live = consumers()
    await live.start()
    await wait_for(lambda: completed(store, sid), what="the session to complete")
    print(f"re-run and completed {time.monotonic() - killed:.2f}s after the crash "
          f"(silence allowed: {BEAT_MS * MISSED / 1000}s)")

    trail = await events(store, sid)
    declared = [f for f in trail if f["type"] == "worker_declared_dead"]
    assert [(f["step"], f["worker"]) for f in declared] == [("step:0", dead.name)]
    assert f"declared dead by {live.name}" in declared[0]["detail"]
    (again,) = [f for f in trail if f["type"] == "step_reclaimed"]
    assert again["worker"] == live.name
    assert again["detail"] == f"after {dead.name} was declared dead"
    assert Counter(f["step"] for f in trail if f["type"] == "step_completed") == {
        "step:0": 1, "step:1": 1}
    # It is declared dead on every shard, each on its own: the session can complete once
    # the shard holding its entry has declared, before another shard's check comes round.
    async def on_every_shard() -> bool:
        return len(await declarations(store)) == store.keys.shards

    await wait_for(on_every_shard, what="a declaration on every shard")
    record, *elsewhere = await declarations(store)
    assert len(elsewhere) == store.keys.shards - 1
    assert {d.consumer for d in elsewhere} == {dead.name} and \
        not any(d.entries for d in elsewhere)
    assert (record.consumer, record.by, record.entries, record.reruns) == (
        dead.name, live.name, 1, 1)
    assert record.silent_ms >= BEAT_MS * MISSED
    assert record.rerun_first_ms is not None and record.rerun_first_ms >= record.at_ms
    # Its entries left the holder; its beats are gone (nobody declares it again).
    for shard in range(store.keys.shards):
        assert (await store.group_consumers(shard)).get(HOLDER, (0, 0))[0] == 0
        assert dead.name not in (await store.look_at_beats(shard)).beats


async def test_a_blocked_event_loop_is_not_a_death(
        store: Store, consumers: Callable[[], StepConsumer],
        breakpoints: StepBreakpoints) -> None:
    breakpoints.set(WORKFLOW, "step:0")
    busy, watcher = consumers(), consumers()
    await busy.start()
    sid = await start(store)
    await breakpoints.wait(WORKFLOW, "step:0")
    await watcher.start()
    await beats_of(watcher, 2)
    # The event loop of both is blocked by Python code (the GIL held in turns, as by a
    # heavy render) for four times the silence that makes a death.
    until = time.monotonic() + 4 * BEAT_MS * MISSED / 1000
    spins = 0
    while time.monotonic() < until:
        spins += 1
    await beats_of(watcher, MISSED + 2)  # it kept watching since: nothing to declare
    assert await declarations(store) == []
    breakpoints.clear(WORKFLOW, "step:0")
    await wait_for(lambda: completed(store, sid), what="the session to complete")
    trail = await events(store, sid)
    assert not [f for f in trail if f["type"] in ("worker_declared_dead", "step_reclaimed")]
    assert spins > 0


async def test_a_zombie_that_wakes_up_stops_its_step_and_commits_nothing(
        store: Store, consumers: Callable[[], StepConsumer],
        breakpoints: StepBreakpoints) -> None:
    breakpoints.set(WORKFLOW, "step:0")
    zombie = consumers()
    await zombie.start()
    sid = await start(store)
    await breakpoints.wait(WORKFLOW, "step:0")
    # Its beats stop reaching Redis while its event loop goes on (the step still runs
    # there, its lease renewal a minute away).
    assert zombie.failover is not None and zombie.failover.thread is not None
    zombie.failover.thread.halt(forget=False)
    live = consumers()
    await live.start()
    (_, again) = await breakpoints.wait(WORKFLOW, "step:0", n=2)
    assert (again.worker, again.reclaimed) == (live.name, True)
    assert zombie.runner.running  # still running its copy
    zombie.failover.start()  # beats again: its beat's reply says it was declared dead

    async def dropped() -> bool:
        return not zombie.runner.running

    await wait_for(dropped, what="the zombie to drop its step")
    breakpoints.clear(WORKFLOW, "step:0")
    await wait_for(lambda: completed(store, sid), what="the session to complete")
    trail = await events(store, sid)
    done = [f for f in trail if f["type"] == "step_completed"]
    assert [(f["step"], f["worker"]) for f in done] == [("step:0", live.name),
                                                        ("step:1", done[1]["worker"])]
    record = (await declarations(store))[0]
    assert record.revived_ms is not None and record.reruns == 1


async def test_the_scheduler_declares_a_dead_worker_when_no_worker_watches(
        settings: DurableSettings, store: Store, consumers: Callable[[], StepConsumer],
        breakpoints: StepBreakpoints) -> None:
    breakpoints.set(WORKFLOW, "step:0")
    dead = consumers()
    await dead.start()
    sid = await start(store)
    await breakpoints.wait(WORKFLOW, "step:0")
    crash(dead)
    breakpoints.clear(WORKFLOW, "step:0")
    scheduler_store = open_store(settings)
    service = SchedulerService(settings, scheduler_store, name="sched-1")
    running = asyncio.create_task(service.run())
    try:
        async def declared() -> bool:
            return service.deaths.declared > 0

        await wait_for(declared, what="the scheduler to declare the worker dead")
        async def all_shards() -> bool:
            return service.deaths.declared == store.keys.shards

        await wait_for(all_shards, what="the worker declared dead on every shard")
        record = (await declarations(store))[0]
        assert (record.consumer, record.by, record.entries) == (dead.name, "sched-1", 1)
        live = consumers()
        await live.start()  # its first beat says orphans wait: it takes them at once
        await wait_for(lambda: completed(store, sid), what="the session to complete")
    finally:
        service.stop()
        await running
        await scheduler_store.close()
    (again,) = [f for f in await events(store, sid) if f["type"] == "step_reclaimed"]
    assert again["detail"] == f"after {dead.name} was declared dead"


async def test_a_graceful_stop_is_never_a_death(
        store: Store, consumers: Callable[[], StepConsumer]) -> None:
    leaving, watcher = consumers(), consumers()
    await leaving.start()
    await watcher.start()
    await beats_of(watcher, 2)
    assert leaving.name in (await store.look_at_beats(0)).beats
    await leaving.stop(grace_s=0)
    for shard in range(store.keys.shards):
        assert leaving.name not in (await store.look_at_beats(shard)).beats
    await beats_of(watcher, 2 * MISSED)
    assert await declarations(store) == []


async def test_durable_runs_consumer_takes_over_from_a_dead_worker_and_is_taken_over(
        settings: DurableSettings, store: Store, consumers: Callable[[], StepConsumer],
        breakpoints: StepBreakpoints) -> None:
    """`durable run` against a fleet's Redis: its consumer beats and watches its shard
    like a worker, so it declares a dead worker holding its session's step and runs
    that step at once; killed in turn, a worker of the fleet declares it dead."""
    breakpoints.set(WORKFLOW, "step:0")
    worker = consumers()
    await worker.start()
    sid = await start(store)
    await breakpoints.wait(WORKFLOW, "step:0")
    crash(worker)
    run = SessionConsumer(settings, store, sid)
    await run.start()
    try:
        (_, again) = await breakpoints.wait(WORKFLOW, "step:0", n=2)
        assert (again.worker, again.reclaimed) == (run.name, True)
        crash(run)
    finally:
        await run.stop(grace_s=0)
    breakpoints.clear(WORKFLOW, "step:0")
    fleet = consumers()
    await fleet.start()
    await wait_for(lambda: completed(store, sid), what="the session to complete")
    trail = await events(store, sid)
    assert [(f["step"], f["worker"]) for f in trail if f["type"] == "worker_declared_dead"
            ] == [("step:0", worker.name), ("step:0", run.name)]
    assert [(f["worker"], f["detail"]) for f in trail if f["type"] == "step_reclaimed"] == [
        (run.name, ""), (fleet.name, f"after {run.name} was declared dead")]
    assert Counter(f["step"] for f in trail if f["type"] == "step_completed") == {
        "step:0": 1, "step:1": 1}
