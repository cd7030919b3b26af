"""Adaptive concurrency on a real redis-server (worker/slots.py): a worker whose event loop
is saturated by its steps' Python takes fewer at once, leaving the rest on the stream;
steps that wait (on a model) keep every slot; each step is committed exactly once either
way. Only slot counts are asserted, never timings."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from helpers import wait_for

from bench.latency import checked, create_sessions, wait_done
from strands_durable.models import SessionStatus, StepJob
from strands_durable.settings import DurableSettings
from strands_durable.spec.model import Spec
from strands_durable.store.connect import open_store
from strands_durable.worker.consumer import StepConsumer
from strands_durable.worker.execute import StepExecutor, StepOutput
from strands_durable.worker.slots import FLOOR

pytestmark = pytest.mark.integration

CEILING = 8


BURN_S = 0.002


def burn(seconds: float = BURN_S) -> StepOutput:
    """Run Python on the event loop for `seconds`: a CPU-bound step."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass
    return StepOutput(response="ok")


class BurningExecutor(StepExecutor):
    async def run(self, spec: Spec, variables: dict[str, Any], job: StepJob,
                  run: Any = None) -> StepOutput:
        return burn()


# A step whose Python outlasts a commit's round trip even on a loaded machine. With 2 ms,
# the loop idled while a busy redis-server was slow to reply, found room and grew to the
# ceiling: right for that loop, but not the saturated loop this test means.
HEAVY_BURN_S = 0.02


class HeavyBurningExecutor(StepExecutor):
    async def run(self, spec: Spec, variables: dict[str, Any], job: StepJob,
                  run: Any = None) -> StepOutput:
        return burn(HEAVY_BURN_S)


class WaitThenBurnExecutor(StepExecutor):
    """Steps wait (as on a model) until `burning` is set; from then on they burn CPU."""

    burning: asyncio.Event

    async def run(self, spec: Spec, variables: dict[str, Any], job: StepJob,
                  run: Any = None) -> StepOutput:
        await self.burning.wait()
        return burn()


class WaitingExecutor(StepExecutor):
    """Each step waits for `released`, as a step waits on its model: the loop idles."""

    released: asyncio.Event

    async def run(self, spec: Spec, variables: dict[str, Any], job: StepJob,
                  run: Any = None) -> StepOutput:
        await self.released.wait()
        return StepOutput(response="ok")


def noop_settings(settings: DurableSettings, **changes: Any) -> DurableSettings:
    return settings.model_copy(update={"bench_noop": True, "worker_concurrency": CEILING,
                                       **changes})


async def watch(consumer: StepConsumer, seen: list[tuple[int, int]]) -> None:
    """Record (slot limit, steps running) at every loop turn the watcher gets."""
    while True:
        seen.append((consumer.slot_limit, consumer.running))
        await asyncio.sleep(0.005)


async def run_chains(settings: DurableSettings, executor: StepExecutor, sessions: int,
                     steps: int) -> list[tuple[int, int]]:
    store = open_store(settings)
    consumer = StepConsumer(settings, store, executor=executor)
    seen: list[tuple[int, int]] = []
    try:
        await create_sessions(store, steps, sessions)
        await consumer.start()
        watcher = asyncio.create_task(watch(consumer, seen))
        await wait_done(store, sessions, 120, "chains")
        watcher.cancel()
        await consumer.stop(grace_s=5)
        await checked(store, steps, "chains", 0)  # raises if any step committed twice
    finally:
        await store.redis.aclose()
    return seen


async def test_a_saturated_worker_runs_fewer_steps_and_commits_each_once(
        settings: DurableSettings) -> None:
    settings = noop_settings(settings)
    seen = await run_chains(settings, HeavyBurningExecutor(settings, open_store(settings)),
                            sessions=12, steps=30)
    # 12 chains could fill all 8 slots, but 20 ms of Python a step keeps the loop busy
    # with far fewer: the limit starts at the floor and stays well under the ceiling.
    assert seen[0][0] == FLOOR
    limits = [limit for limit, _ in seen]
    assert max(limits) < CEILING
    assert max(running for _, running in seen) < CEILING
    assert sum(limits) / len(limits) <= FLOOR + 2


async def test_the_same_steps_with_fixed_concurrency_fill_every_slot(
        settings: DurableSettings) -> None:
    settings = noop_settings(settings, worker_adaptive_concurrency=False)
    seen = await run_chains(settings, BurningExecutor(settings, open_store(settings)),
                            sessions=12, steps=40)
    assert {limit for limit, _ in seen} == {CEILING}
    assert max(running for _, running in seen) == CEILING


async def test_steps_waiting_on_a_model_get_every_slot(settings: DurableSettings) -> None:
    settings = noop_settings(settings)
    store = open_store(settings)
    executor = WaitingExecutor(settings, store)
    executor.released = asyncio.Event()
    consumer = StepConsumer(settings, store, executor=executor)
    try:
        await create_sessions(store, 3, 12)
        await consumer.start()
        assert consumer.slot_limit == FLOOR  # a slow start
        # The loop idles while they wait, so the limit grows to the ceiling: 8 steps
        # wait at once and the other 4 chains wait on the stream.
        await wait_for(lambda: asyncio.sleep(0, consumer.running == CEILING), timeout_s=30)
        assert consumer.slot_limit == CEILING
        executor.released.set()
        await wait_done(store, 12, 60, "waiting chains")
        await consumer.stop(grace_s=5)
        await checked(store, 3, "waiting chains", 0)
    finally:
        await store.redis.aclose()


async def test_a_worker_whose_steps_turn_cpu_bound_gives_slots_back(
        settings: DurableSettings) -> None:
    # Re-claims are due rarely: each also frees a slot (`_take_next`), which would hide
    # whether a lowered limit alone brings the running steps down.
    settings = noop_settings(settings, claim_idle_ms=60_000)
    store = open_store(settings)
    executor = WaitThenBurnExecutor(settings, store)
    executor.burning = asyncio.Event()
    consumer = StepConsumer(settings, store, executor=executor)
    try:
        await create_sessions(store, 200, 12)
        await consumer.start()
        await wait_for(lambda: asyncio.sleep(0, consumer.running == CEILING), timeout_s=30,
                       what="every slot in use while the steps wait")
        executor.burning.set()
        # Now the loop is saturated: the limit comes down, and the steps running follow
        # it as they end (their commits take no next entry), while the chains go on.
        await wait_for(lambda: asyncio.sleep(0, consumer.running <= FLOOR + 1),
                       timeout_s=60, what="running steps down to what fits")
        assert consumer.slot_limit < CEILING
        done = await store.redis.zcard(store.keys.index_status(0, SessionStatus.COMPLETED))
        assert done < 12  # it happened while the chains ran, not as they ended
        await wait_done(store, 12, 120, "chains")
        await consumer.stop(grace_s=5)
        await checked(store, 200, "chains", 0)
    finally:
        await store.redis.aclose()
