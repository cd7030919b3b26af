"""A shard's slot half-migrated (the ASK window of a resharding): single-key reads follow
ASK, a script whose declared keys are split between the nodes gets TRYAGAIN before it
runs (nothing half-applied) and a worker's client waits it out until the move ends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from helpers import wait_for
from integration.test_store import new_session
from redis_cluster import ClusterNode, LocalCluster

from strands_durable.models import SessionStatus, now_iso, now_ms
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.outage import RedisOutage, outage_client_kwargs
from strands_durable.store.store import Store

pytestmark = pytest.mark.integration


@pytest.fixture
async def riding(fresh_cluster: LocalCluster, prefix: str, tmp_path: Path
                 ) -> AsyncIterator[tuple[Store, RedisOutage]]:
    """A one-shard store on the test's own cluster whose client rides outages out as a
    worker's does, and the outage it counts them in."""
    settings = DurableSettings(redis_url=fresh_cluster.url, key_prefix=prefix, shards=1,
                               breakpoint_dir=str(tmp_path / "bp"))
    outage = RedisOutage(60, "cluster")
    store = open_store(settings, **outage_client_kwargs(outage))
    try:
        await store.prepare()
        yield store, outage
    finally:
        await store.close()


def begin_moving(cluster: LocalCluster, slot: int) -> tuple[ClusterNode, ClusterNode]:
    """Start moving `slot` to another primary; (its owner, the primary it goes to)."""
    source = cluster.owner_of_slot(slot)
    target = next(p for p in cluster.primaries() if p.port != source.port)
    cluster.begin_migration(slot, target.port)
    return source, target


async def meets_the_split_slot(outage: RedisOutage) -> None:
    async def waiting() -> bool:
        return not outage.up  # the script met TRYAGAIN and is being ridden out

    await wait_for(waiting, timeout_s=30, what="the script to meet the half-moved slot")


async def test_operations_across_a_half_migrated_slot(
        fresh_cluster: LocalCluster, riding: tuple[Store, RedisOutage]) -> None:
    store, outage = riding
    sid, _ = await store.create_session(new_session())
    slot = fresh_cluster.slot_of(store.keys.meta(sid))
    source, target = begin_moving(fresh_cluster, slot)
    moved = fresh_cluster.move_keys(slot, source, target.port, batch=1, limit=3)
    assert moved == 3
    # Reads of one key: wherever the key is now (ASK for the moved ones).
    record = await store.get_session(sid)
    assert record.status == SessionStatus.RUNNING
    assert len(await store.events(sid)) >= 1

    # A script over keys on both nodes: TRYAGAIN until the move ends, then it runs.
    cancel = asyncio.create_task(store.control(sid, "cancel", now_iso=now_iso(),
                                               now_ms=now_ms()))
    await meets_the_split_slot(outage)
    assert not cancel.done()
    assert (await store.get_session(sid)).status == SessionStatus.RUNNING  # no half
    fresh_cluster.move_keys(slot, source, target.port)
    fresh_cluster.finish_migration(slot, target.port)
    verdict, status = await asyncio.wait_for(cancel, 60)
    assert (verdict, status) == ("ok", "cancelled")
    assert (await store.get_session(sid)).status == SessionStatus.CANCELLED
    with target.client() as direct:
        assert direct.hget(store.keys.meta(sid), "status") == "cancelled"


async def test_asks_under_concurrency_keep_the_slot_map_and_need_no_outage(
        fresh_cluster: LocalCluster, riding: tuple[Store, RedisOutage]) -> None:
    """ASKING and the redirected command go out on one connection: with many commands
    in flight, none is answered MOVED by the importing node, so the client neither
    ping-pongs into an outage nor marks the slot's owner a replica (after which a
    SCRIPT LOAD skipped it and its scripts went missing: the NOSCRIPT of a CI run).
    Before, some INCRs were also applied twice (a command retried after a connection
    torn down under it)."""
    store, outage = riding
    client = store.redis
    bump = client.register_script("return redis.call('INCR', KEYS[1])")
    keys = [f"{store.keys.tag(0)}:test:{n}" for n in range(24)]
    for key in keys:
        assert await bump(keys=[key]) == 1
    slot = fresh_cluster.slot_of(keys[0])
    source, target = begin_moving(fresh_cluster, slot)
    fresh_cluster.move_named_keys(source, target.port, keys[:12])  # these answer ASK

    rounds = 10

    async def worker(n: int) -> None:
        for r in range(rounds):
            await bump(keys=[keys[(n + r) % len(keys)]])
            await client.get(keys[(n * 7 + r) % len(keys)])

    await asyncio.gather(*(worker(n) for n in range(16)))
    counts = [int(await client.get(key)) for key in keys]
    assert sum(counts) == len(keys) + 16 * rounds
    assert outage.outages == 0  # no "TTL exhausted", no torn-down map
    roles = {node.name: node.server_type for node in client.nodes_manager.nodes_cache.values()}
    assert {name for name, role in roles.items() if role == "primary"} \
        >= {p.address for p in fresh_cluster.primaries()}, roles
    fresh_cluster.move_keys(slot, source, target.port)
    fresh_cluster.finish_migration(slot, target.port)


async def test_a_take_waits_while_its_shards_slot_is_half_moved(
        fresh_cluster: LocalCluster, riding: tuple[Store, RedisOutage]) -> None:
    """take.lua reads the keys of whichever session an entry names, keys it cannot
    declare. With the stream and a session's meta moved but not its other keys, the
    importing node would read them as missing (a step as never committed, an empty
    conversation) and write a second events stream there. Its declared unwritten key
    makes Redis answer TRYAGAIN instead: the take waits the move out, then gates."""
    store, outage = riding
    sid, _ = await store.create_session(new_session())
    keys = store.keys
    slot = fresh_cluster.slot_of(keys.stream(0))
    source, target = begin_moving(fresh_cluster, slot)
    moved = [keys.stream(0), keys.meta(sid)]
    fresh_cluster.move_named_keys(source, target.port, moved)

    take = asyncio.create_task(store.take_new(0, "c1", 8, now_iso()))
    await meets_the_split_slot(outage)
    assert not take.done()
    assert fresh_cluster.keys_in_slot(target, slot) == set(moved)  # nothing written
    fresh_cluster.move_keys(slot, source, target.port)
    fresh_cluster.finish_migration(slot, target.port)
    [entry] = await asyncio.wait_for(take, 60)
    assert entry.gate is not None and entry.gate.verdict == "run"
    started = [e for e in await store.events(sid) if e[1]["type"] == "step_started"]
    assert len(started) == 1
