"""The cluster client through a primary's failover (store/cluster_client.py): a worker's
client (OutageRetry) rides it out and every command succeeds, a plain client (API, CLI)
meets at most a ConnectionError (never a raw MOVED or CLUSTERDOWN), and scripts run on
a primary that has never loaded them (NOSCRIPT: loaded again, retried)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from integration.test_store import new_session
from redis_cluster import LocalCluster

from strands_durable.models import SessionStatus
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.outage import REDIS_DOWN, RedisOutage, outage_client_kwargs
from strands_durable.store.store import Store

pytestmark = pytest.mark.integration
SHARDS = 6


def cluster_settings(cluster: LocalCluster, prefix: str, tmp_path: Path) -> DurableSettings:
    return DurableSettings(redis_url=cluster.url, key_prefix=prefix, shards=SHARDS,
                           redis_socket_timeout_s=3, redis_connect_timeout_s=1,
                           read_block_ms=100, breakpoint_dir=str(tmp_path / "bp"))


async def test_scripts_run_on_primaries_that_never_loaded_them(
        cluster: LocalCluster, store: Store) -> None:
    sid, _ = await store.create_session(new_session())
    for primary in cluster.primaries():
        with primary.client() as direct:
            direct.script_flush()
    await store.redis.rpush(store.keys.conversation(sid, "a"), '{"role": "user"}')
    assert await store.conversation(sid, "a") == [{"role": "user"}]  # lane_page.lua
    assert (await store.get_session(sid)).status == SessionStatus.RUNNING


async def test_a_worker_client_rides_out_a_failover(fresh_cluster: LocalCluster, prefix: str,
                                                    tmp_path: Path) -> None:
    settings = cluster_settings(fresh_cluster, prefix, tmp_path)
    outage = RedisOutage(60, "cluster")
    worker = open_store(settings, **outage_client_kwargs(outage))
    plain = open_store(settings)
    try:
        await worker.prepare()
        sids = [(await worker.create_session(new_session()))[0] for _ in range(12)]
        victim = fresh_cluster.node(fresh_cluster.primary_port_of_key(
            worker.keys.stream(worker.keys.shard(sids[0]))))
        fresh_cluster.wait_replicated(victim.port)  # its replica has them
        fresh_cluster.kill_primary(victim.port)

        async def plain_reads() -> list[BaseException]:
            errors: list[BaseException] = []
            for _ in range(20):
                try:
                    await plain.get_session(sids[0])
                except Exception as exc:  # only what callers already handle may escape
                    errors.append(exc)
                await asyncio.sleep(0.1)
            return errors

        # Meanwhile the worker's client keeps working: each call returns, none raises.
        errors, records = await asyncio.gather(
            plain_reads(), asyncio.gather(*(worker.get_session(sid) for sid in sids)))
        assert [r.session_id for r in records] == sids
        assert all(isinstance(e, REDIS_DOWN) for e in errors), errors
        fresh_cluster.wait_for_failover(victim)
        created, _ = await worker.create_session(new_session())
        assert len(await worker.list_sessions(limit=100)) == len(sids) + 1
        assert (await plain.get_session(created)).session_id == created
        assert outage.up and outage.outages >= 1  # it met the failover, and rode it out
    finally:
        await worker.close()
        await plain.close()
