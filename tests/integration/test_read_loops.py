"""A worker's read loops on a real redis-server: one loop per shard, all sharing the
worker's slots. A loop that finds its stream empty waits on it holding one slot, not
every free one: another shard's new entry runs at once, not after that wait."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest
from helpers import wait_for

from bench.latency import checked
from bench.specs import chain_spec
from strands_durable.models import SessionStatus
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.keys import shard_for_key
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

BLOCK_MS = 30_000  # far longer than the test waits: a loop stuck in it fails the test


def keys_on_shard(shard: int, shards: int, count: int) -> list[str]:
    """Idempotency keys whose sessions land on `shard` (the key picks the shard)."""
    keys: list[str] = []
    n = 0
    while len(keys) < count:
        key = f"read-loops-{n}"
        if shard_for_key(key, shards) == shard:
            keys.append(key)
        n += 1
    return keys


@contextlib.asynccontextmanager
async def two_slot_consumer(settings: DurableSettings, **update: object
                            ) -> AsyncIterator[tuple[Store, StepConsumer]]:
    """A started consumer with two slots on a fresh store, its read loops settled: each
    of two holds one slot, waiting on an empty stream."""
    settings = settings.model_copy(update={
        "worker_concurrency": 2, "worker_adaptive_concurrency": False, "bench_noop": True,
        **update})
    store = open_store(settings)
    consumer = StepConsumer(settings, store)
    try:
        await consumer.start()
        await wait_for(lambda: asyncio.sleep(0, consumer.slots_in_use == 2), timeout_s=10,
                       what="two loops waiting")
        yield store, consumer
    finally:
        await consumer.stop(grace_s=5)
        await store.redis.aclose()


async def run_on_shards(store: Store, steps: int, shards: int, on: tuple[int, ...],
                        per_shard: int, timeout_s: float) -> None:
    """Start chains of `steps` steps on the shards `on` and wait for them all to complete,
    each step committed once."""
    loaded = chain_spec(steps)
    sids = [(await start_session(store, loaded, idempotency_key=key))[0]
            for shard in on for key in keys_on_shard(shard, shards, per_shard)]

    async def done() -> bool:
        statuses = [(await store.get_session(s)).status for s in sids]
        return all(status == SessionStatus.COMPLETED for status in statuses)

    await wait_for(done, timeout_s=timeout_s, what=f"the sessions on shards {on} to complete")
    await checked(store, steps, "read loops", 0)


async def test_a_loop_waiting_on_an_empty_shard_leaves_the_slots_to_the_others(
        settings: DurableSettings) -> None:
    # Shard 0's loop starts first and found its stream empty: it waits on it. Both loops
    # wait with one slot each, so sessions on shard 1 run now.
    async with two_slot_consumer(settings, shards=2, read_block_ms=BLOCK_MS,
                                 redis_socket_timeout_s=60.0) as (store, _):
        began = time.monotonic()
        await run_on_shards(store, 3, 2, on=(1,), per_shard=3, timeout_s=20)
        assert time.monotonic() - began < BLOCK_MS / 1000


async def test_every_shard_is_read_when_its_loops_outnumber_the_slots(
        settings: DurableSettings) -> None:
    """Four shards, two slots: a loop whose wait ended empty queues behind the loops
    already waiting for a slot, so the last shards are read too (a loop that took its
    slot straight back would leave shards 2 and 3 unread for good)."""
    async with two_slot_consumer(settings, shards=4, read_block_ms=50) as (store, _):
        await run_on_shards(store, 2, 4, on=(2, 3), per_shard=2, timeout_s=30)
