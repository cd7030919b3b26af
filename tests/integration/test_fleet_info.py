"""`durable workers` and `durable queue` data on a real redis-server: heartbeats joined
with what each consumer holds, and per-shard stream, lag, pending, dead letters and
timers as the workers leave them."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from helpers import StepBreakpoints, wait_for

from strands_durable.models import SessionStatus, StepJob, now_ms
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.connect import open_store
from strands_durable.store.fleet import (
    QueueStats,
    ShardStats,
    lag_of,
    list_workers,
    queue_stats,
    worker_infos,
)
from strands_durable.store.keys import CONSUMER_GROUP
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer
from strands_durable.worker.slots import FLOOR

pytestmark = pytest.mark.integration

ONE_STEP = """
version: 0
name: one-step
runtime: {provider: scripted}
agents:
  a: {prompt: "You are a."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "one"}
"""

WAITS_FOR_A_HUMAN = """
version: 0
name: ask
runtime: {provider: scripted}
agents:
  a: {prompt: "You are a."}
pattern:
  type: chain
  config:
    steps:
      - {type: hitl, prompt: "Go?", timeout_seconds: 3600, default: "go"}
      - {agent: a, input: "after {{ hitl_response }}"}
"""


def settings_for(redis_url: str, prefix: str, **extra: object) -> DurableSettings:
    base: dict[str, object] = {"redis_url": redis_url, "key_prefix": prefix,
                               "read_block_ms": 100, "timer_poll_ms": 50, "heartbeat_s": 0.2}
    return DurableSettings(**{**base, **extra})  # type: ignore[arg-type]


async def test_workers_heartbeats_running_steps_and_pending(redis_server, prefix: str,
                                                           tmp_path: Path) -> None:
    breakpoints = StepBreakpoints(tmp_path / "breakpoints")
    settings = settings_for(redis_server.url, prefix, claim_idle_ms=60_000,
                            breakpoint_dir=str(breakpoints.directory))
    store = open_store(settings)
    await store.prepare()
    # A worker took this step and died: it holds the entry and never sent a heartbeat.
    orphan, _ = await start_session(store, load_spec_text(ONE_STEP, "one.yaml"))
    await store.redis.xreadgroup(CONSUMER_GROUP, "crashed-worker",
                                 {store.keys.stream(0): ">"}, count=1)
    breakpoints.set("one-step", "step:0")  # busy's step runs until the test ends
    busy, _ = await start_session(store, load_spec_text(ONE_STEP, "one.yaml"))
    consumers = [StepConsumer(settings, store, name=n) for n in ("w1", "w2")]
    for c in consumers:
        await c.start()
    try:
        async def running_seen() -> list[object]:
            return [w for w in await list_workers(store) if f"{busy}/step:0" in w.running]

        (runner,) = await wait_for(running_seen, what="a heartbeat naming the running step")
        infos = {w.consumer: w for w in await list_workers(store)}
        assert set(infos) == {"w1", "w2", "crashed-worker"}
        for name in ("w1", "w2"):
            w = infos[name]
            assert w.alive and w.host == socket.gethostname() and w.pid == os.getpid()
            assert w.concurrency == settings.worker_concurrency
            assert w.last_seen_age_s is not None and w.last_seen_age_s < 5
        assert runner.pending == 1 and runner.pending_by_shard == (1,)
        idle = infos["w2" if runner.consumer == "w1" else "w1"]
        assert idle.pending == 0 and idle.running == ()
        # Slots taken at once: adaptive pacing starts a worker at FLOOR and grows it while
        # its loop is idle and every slot is taken (a read loop holds them all for a
        # moment before it waits with one), up to its concurrency.
        for w in (idle, runner):
            assert w.slots is not None and FLOOR <= w.slots <= settings.worker_concurrency
        crashed = infos["crashed-worker"]
        assert (crashed.alive, crashed.last_seen, crashed.pending) == (False, "", 1)
        assert crashed.idle_ms is not None
        assert [w.consumer for w in await list_workers(store)][-1] == "crashed-worker"
        assert (await store.get_session(orphan)).status == SessionStatus.RUNNING

        # A clean stop removes the heartbeat of a worker that holds nothing.
        await next(c for c in consumers if c.name == idle.consumer).stop(grace_s=0)
        assert {w.consumer for w in await list_workers(store)} == {
            runner.consumer, "crashed-worker"}
    finally:
        for c in consumers:
            await c.stop(grace_s=0)
        await store.redis.aclose()


def test_liveness_and_order_from_heartbeats() -> None:
    now = 1_000_000
    beats = {
        "fresh": json.dumps({"host": "h", "pid": 1, "last_seen": "t", "last_seen_ms": now - 2_000,
                             "concurrency": 8, "slots": 3, "running": ["s/step:0"]}),
        "stale": json.dumps({"host": "h", "pid": 2, "last_seen": "t", "slots": "3",
                             "last_seen_ms": now - 60_000}),
        "garbled": "{not json",
    }
    pending = [{"fresh": (1, 10), "ghost": (2, 50_000)}, {"ghost": (1, 40_000)}]
    infos = worker_infos(beats, pending, now, alive_within_s=15)
    assert [(w.consumer, w.alive, w.pending_by_shard) for w in infos] == [
        ("fresh", True, (1, 0)), ("stale", False, (0, 0)), ("garbled", False, (0, 0)),
        ("ghost", False, (2, 1))]
    assert infos[0].running == ("s/step:0",) and infos[0].last_seen_age_s == 2.0
    assert (infos[0].concurrency, infos[0].slots, infos[0].slots_text()) == (8, 3, "3 of 8")
    assert (infos[1].concurrency, infos[1].slots) == (None, None)  # not a number: unknown
    assert infos[1].slots_text() == ""
    older = worker_infos({"old": json.dumps({"last_seen_ms": now, "concurrency": 8})}, [], now)
    assert older[0].slots_text() == "8"  # a heartbeat from before slots were reported
    assert infos[-1].idle_ms == 40_000 and infos[-1].pending == 3


def test_lag_and_totals() -> None:
    assert lag_of({"lag": 4}, 9, 2) == 4
    assert lag_of({"lag": None}, 9, 2) == 7  # Redis could not tell: length - pending
    assert lag_of(None, 0, 0) == 0
    stats = QueueStats((ShardStats(0, "a", 3, 1, 2, 1, 0, 1, 0),
                        ShardStats(1, "b", 4, 4, 0, 0, 2, 3, 1, deferred=6)))
    assert stats.to_dict()["total"] == {"length": 7, "lag": 5, "pending": 2,
                                        "dead_letters": 2, "timers": 4, "timers_due": 1,
                                        "deferred": 6}


async def test_queue_stats_as_the_fleet_leaves_them(redis_server, prefix: str) -> None:
    settings = settings_for(redis_server.url, prefix, claim_idle_ms=300, max_deliveries=1)
    store = open_store(settings)
    await store.prepare()
    sids = [(await start_session(store, load_spec_text(ONE_STEP, "s.yaml")))[0]
            for _ in range(3)]
    await start_session(store, load_spec_text(WAITS_FOR_A_HUMAN, "ask.yaml"))  # a timer
    # A retry whose backoff passed while no worker ran: due now.
    due_job = StepJob(session_id=sids[0], key="step:x", agent="a", input="retry")
    await store.redis.zadd(store.keys.timers(0), {due_job.to_json(): now_ms() - 1000})

    stats = await queue_stats(store)
    (shard,) = stats.shards
    assert (shard.length, shard.lag, shard.pending, shard.consumers) == (3, 3, 0, 0)
    assert (shard.timers, shard.timers_due, shard.dead_letters) == (2, 1, 0)
    await store.redis.zrem(store.keys.timers(0), due_job.to_json())

    await store.redis.xreadgroup(CONSUMER_GROUP, "crashed-worker",
                                 {store.keys.stream(0): ">"}, count=1)
    shard = (await queue_stats(store)).shards[0]
    assert (shard.length, shard.lag, shard.pending, shard.consumers) == (3, 2, 1, 1)

    consumer = StepConsumer(settings, store)
    await consumer.start()
    try:
        async def drained() -> bool:
            s = (await queue_stats(store)).shards[0]
            return s.length == 0 and s.dead_letters == 1

        await wait_for(drained, what="the stream to drain and one dead letter")
        shard = (await queue_stats(store)).shards[0]
        assert (shard.lag, shard.pending, shard.timers, shard.timers_due) == (0, 0, 1, 0)
        statuses = sorted([(await store.get_session(s)).status.value for s in sids])
        assert statuses == ["completed", "completed", "failed"]
    finally:
        await consumer.stop(grace_s=0)
        await store.redis.aclose()


async def test_queue_stats_per_shard_and_total(redis_server, prefix: str) -> None:
    store: Store = open_store(settings_for(redis_server.url, prefix, shards=3))
    await store.prepare()
    for _ in range(12):
        await start_session(store, load_spec_text(ONE_STEP, "s.yaml"))
    stats = await queue_stats(store)
    assert [s.shard for s in stats.shards] == [0, 1, 2]
    lengths = [await store.redis.xlen(store.keys.stream(k)) for k in range(3)]
    assert [s.length for s in stats.shards] == lengths
    assert stats.to_dict()["total"]["length"] == 12 == stats.total["lag"]
    await store.redis.aclose()
