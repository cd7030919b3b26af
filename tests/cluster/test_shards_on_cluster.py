"""Six shards on a 3+3 Redis Cluster: shards spread over the primaries by their hash
tags, every read across shards fans out (lists, fleet views, metrics, sync and async),
a session's delete leaves none of its keys on any node, and a changed DURABLE_SHARDS on
a live keyspace is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from integration.test_store import new_session
from redis_cluster import LocalCluster

from strands_durable import metrics
from strands_durable.errors import ConfigError
from strands_durable.models import SessionStatus, StepJob, now_iso, now_ms
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.fleet_reads import open_sync_client
from strands_durable.store.keys import CONSUMER_GROUP
from strands_durable.store.store import Store

pytestmark = pytest.mark.integration
SHARDS = 6


@pytest.fixture
def settings(cluster: LocalCluster, prefix: str, tmp_path: Path) -> DurableSettings:
    return DurableSettings(redis_url=cluster.url, key_prefix=prefix, shards=SHARDS,
                           claim_idle_ms=1000, read_block_ms=100, heartbeat_s=0.5,
                           breakpoint_dir=str(tmp_path / "breakpoints"))


async def make_sessions(store: Store, n: int) -> list[str]:
    return [(await store.create_session(new_session()))[0] for _ in range(n)]


async def test_sessions_spread_over_every_primary_and_list_across_shards(
        cluster: LocalCluster, store: Store) -> None:
    sids = await make_sessions(store, 24)
    shards = {store.keys.shard(sid) for sid in sids}
    assert len(shards) > 3
    # Each shard's keys share its stream's slot; the shards' slots cover all 3 primaries.
    owners = {cluster.primary_port_of_key(store.keys.stream(k)) for k in range(SHARDS)}
    assert owners == {p.port for p in cluster.primaries()}
    for sid in sids[:6]:
        slot = cluster.slot_of(store.keys.stream(store.keys.shard(sid)))
        assert {cluster.slot_of(key) for key in store.keys.session_keys(sid)} == {slot}
    listed = await store.list_sessions(limit=100)
    assert {r.session_id for r in listed} == set(sids)
    running = await store.list_sessions(SessionStatus.RUNNING, limit=100)
    assert len(running) == 24
    names = await store.workflow_names(sids)  # one pipeline, keys on every node
    assert names == ["wf"] * 24


async def test_fleet_views_and_metrics_fan_out(settings: DurableSettings, store: Store) -> None:
    sids = await make_sessions(store, 12)
    await store.beat("w1", '{"consumer": "w1"}')
    replies = await store.fleet_replies(now_ms())
    assert not [r for r in replies if isinstance(r, Exception)]
    reader = metrics.FleetReader(store.keys, heartbeat_s=settings.heartbeat_s, max_age_s=0)
    snap = await reader.read(store)
    assert snap.ok and len(snap.shards) == SHARDS
    assert sum(s.lag for s in snap.shards) == len(sids)
    assert snap.sessions["running"] == len(sids)
    sync = open_sync_client(settings.redis_url, settings.redis_timeouts)
    try:
        again = reader.read_sync(sync)
    finally:
        sync.close()
    assert (again.shards, again.sessions) == (snap.shards, snap.sessions)
    counts = [await store.queue_counts(k, now_ms()) for k in range(SHARDS)]
    assert sum(c[0] for c in counts) == len(sids)
    for k in range(SHARDS):
        assert (await store.group_info(k) or {}).get("name") == CONSUMER_GROUP


async def test_delete_leaves_no_key_of_the_session_on_any_node(
        cluster: LocalCluster, store: Store) -> None:
    sid, _ = await store.create_session(new_session("idem-delete"))
    k = store.keys
    # Lanes and journals: keys the session owns that delete.lua must declare.
    await store.redis.rpush(k.conversation(sid, "lane-a"), "m1")
    await store.redis.sadd(k.conversations(sid), "lane-a")
    await store.redis.hset(k.journal(sid, "step:0"), "m1", "x")
    await store.redis.sadd(k.journals(sid), "step:0")
    await store.control(sid, "cancel", now_iso=now_iso(), now_ms=now_ms())
    await store.delete_session(sid)
    owned = [*k.session_keys(sid), k.conversation(sid, "lane-a"), k.journal(sid, "step:0"),
             k.idempotency(k.shard(sid), "idem-delete")]
    with cluster.client() as rc:
        assert [key for key in owned if rc.exists(key)] == []
    assert sid not in {r.session_id for r in await store.list_sessions(limit=100)}


async def test_timers_and_dead_letters_per_shard(store: Store) -> None:
    sid, _ = await store.create_session(new_session())
    shard = store.keys.shard(sid)
    job = StepJob(session_id=sid, key="step:9", agent="a", input="x")
    await store.redis.zadd(store.keys.timers(shard), {job.to_json(): now_ms() - 10})
    assert await store.promote_timers(shard, now_ms()) == 1
    await store.redis.xadd(store.keys.dead(shard), {"sid": sid, "error": "x"})
    assert len(await store.dead_letters(shard)) == 1


async def test_changed_shard_count_is_refused(settings: DurableSettings, store: Store) -> None:
    await make_sessions(store, 2)
    other = open_store(settings.model_copy(update={"shards": SHARDS * 2}))
    try:
        with pytest.raises(ConfigError, match=f"DURABLE_SHARDS={SHARDS * 2}.*{SHARDS} shards"):
            await other.prepare()
    finally:
        await other.close()
