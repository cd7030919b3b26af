"""The bench's in-process runs on a real redis-server, at toy sizes: they run, measure
what they say (a resume from a pause at exactly N committed steps, sessions at once,
per-step CPU windows) and fail loudly when a step was committed twice. No timing is
asserted: only that each number was measured."""

from __future__ import annotations

import math

import pytest
from helpers import RedisServer, wait_for

from bench.journal_cost import one_size
from bench.latency import checked, create_sessions, run_latency
from bench.resume import TAIL_STEPS, run_resume
from bench.scale import run_scale
from bench.throughput import BenchError
from strands_durable.models import SessionStatus
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration


async def test_latency_run_measures_each_window_and_checks_exactly_once(
        redis_server: RedisServer) -> None:
    result = await run_latency(redis_server.url, sessions=3, steps=30, low=(2, 5),
                               high=(26, 30), concurrency=4, timeout_s=60)
    assert len(result.low.samples) == 3 * 4 and len(result.high.samples) == 3 * 5
    # Beside each commit, the steps running as it returned (itself among them).
    assert len(result.high.in_flight) == len(result.high.samples)
    assert all(1 <= n <= 4 for n in result.low.in_flight + result.high.in_flight)
    assert result.plan_low is not None and len(result.plan_low.samples) == 3 * 4
    assert not math.isnan(result.cpu_low_us) and not math.isnan(result.cpu_high_us)
    assert result.footprint is not None and result.footprint.steps == 30
    assert result.footprint.bytes_per_step > 0
    assert "spec_text" not in str(result.footprint.by_key)


async def test_scale_run_measures_few_and_many_sessions(redis_server: RedisServer) -> None:
    result = await run_scale(redis_server.url, sessions=(2, 12), steps=(6, 2), concurrency=4,
                             timeout_s=60)
    assert (result.small.sessions, result.big.sessions) == (2, 12)
    assert len(result.big.low.samples) == 12 * 2  # every step of every session
    assert not math.isnan(result.commit_ratio) and not math.isnan(result.cpu_ratio)


async def test_resume_run_times_a_resume_from_exactly_n_committed_steps(
        redis_server: RedisServer) -> None:
    result = await run_resume(redis_server.url, sessions=2, committed=15, timeout_s=60)
    assert len(result.to_next_step_ms) == len(result.call_ms) == 2
    assert all(x > 0 for x in result.to_next_step_ms)
    # Every session ran on to its end, each step once (else run_resume raises).
    assert result.footprint is not None and result.footprint.steps == 15 + TAIL_STEPS


async def test_a_step_committed_twice_fails_the_bench_loudly(
        store: Store, consumer: StepConsumer) -> None:
    (sid,) = await create_sessions(store, 4, 1)

    async def completed() -> bool:
        return (await store.get_session(sid)).status == SessionStatus.COMPLETED

    await wait_for(completed, what="the chain to complete")
    held = await checked(store, 4, "test", sample=1)
    assert held is not None and held.steps == 4
    await store.redis.rpush(store.keys.order(sid), "step:1")  # step:1 committed again
    with pytest.raises(BenchError, match="EXACTLY-ONCE BROKEN"):
        await checked(store, 4, "test", sample=0)


async def test_a_trimmed_event_stream_is_checked_on_what_it_kept(
        settings: DurableSettings) -> None:
    # 120 steps write about 360 events; the stream keeps about its newest 100.
    trimmed = settings.model_copy(update={"events_max": 100})
    store = open_store(trimmed)
    consumer = StepConsumer(trimmed, store)
    try:
        (sid,) = await create_sessions(store, 120, 1)
        await consumer.start()

        async def completed() -> bool:
            return (await store.get_session(sid)).status == SessionStatus.COMPLETED

        await wait_for(completed, what="the chain to complete")
        first = (await store.events(sid))[0][1]
        assert first["type"] != "session_started", "the stream was not trimmed"
        await checked(store, 120, "test", sample=0)
        await store.redis.xadd(store.keys.events(sid),
                               {"type": "step_completed", "step": "step:119"})
        with pytest.raises(BenchError, match="EXACTLY-ONCE BROKEN"):
            await checked(store, 120, "test", sample=0)
    finally:
        await consumer.stop(grace_s=5)
        await store.redis.aclose()


async def test_journal_cost_run_journals_and_commits_every_step_it_took(
        redis_server: RedisServer) -> None:
    row = await one_size(redis_server.url, steps=12, size=2000, concurrency=4)
    assert row["steps"] == 12 and 1_900 < row["turn_bytes"] < 2_100
    journal, commit = row["journal"], row["commit"]
    # Every journal write accepted (one_size fails on a refused one): one HSET of the
    # turn each. (The calls kept are the eight busiest: a journal write runs fewer kinds,
    # a commit more, tied, which is why the commit is checked by its count of commands.)
    assert journal["calls"]["hset"] == 1.0
    assert commit["commands"] >= 10  # its script and what it ran: result, events, ack ...
    assert journal["worker_cpu_us"] > 0 and commit["worker_cpu_us"] > 0
