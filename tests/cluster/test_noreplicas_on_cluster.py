"""NOREPLICAS on a Redis Cluster: one primary with `min-replicas-to-write 1` whose
replica is stopped refuses writes to its shards; a worker's client waits those out
(one outage, two lines) while the other primaries' shards keep committing, and every
write lands once the replica is back."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path

import pytest
from helpers import wait_for, wait_for_sync
from integration.test_store import new_session
from redis_cluster import ClusterNode, LocalCluster

from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.outage import RedisOutage, outage_client_kwargs

pytestmark = pytest.mark.integration


def replica_of(cluster: LocalCluster, primary: ClusterNode) -> ClusterNode:
    for node in cluster.replica_nodes():
        with node.client() as c:
            if int(c.info("replication")["master_port"]) == primary.port:
                return node
    raise AssertionError(f"no replica of {primary.port}")


def good_replicas(primary: ClusterNode) -> int:
    with primary.client() as c:
        return int(c.info("replication").get("min_slaves_good_slaves", 0))


async def test_a_worker_waits_out_one_primarys_noreplicas(
        fresh_cluster: LocalCluster, prefix: str, tmp_path: Path) -> None:
    settings = DurableSettings(redis_url=fresh_cluster.url, key_prefix=prefix, shards=6,
                               breakpoint_dir=str(tmp_path / "bp"))
    said: list[tuple[int, str]] = []
    outage = RedisOutage(600, "cluster", announce=lambda level, text: said.append((level, text)))
    store = open_store(settings, **outage_client_kwargs(outage))
    await store.prepare()
    primary = fresh_cluster.node(fresh_cluster.primary_port_of_key(store.keys.stream(0)))
    replica = replica_of(fresh_cluster, primary)
    assert replica.pid is not None
    with primary.client() as c:
        c.config_set("min-replicas-to-write", 1)
        c.config_set("min-replicas-max-lag", 1)
    os.kill(replica.pid, signal.SIGSTOP)
    try:
        wait_for_sync(lambda: good_replicas(primary) == 0, what="the primary to refuse writes")
        creating = [asyncio.create_task(store.create_session(new_session())) for _ in range(48)]
        await wait_for(lambda: asyncio.sleep(0, not outage.up), what="the outage")
        # Sessions on the other primaries' shards are created meanwhile.
        await wait_for(lambda: asyncio.sleep(0, sum(t.done() for t in creating) >= 1),
                       what="a session on another shard")
        assert not outage.up and not all(t.done() for t in creating)
    finally:
        os.kill(replica.pid, signal.SIGCONT)
    sids = [sid for sid, _ in await asyncio.wait_for(asyncio.gather(*creating), timeout=60)]
    assert len(set(sids)) == 48 and len(await store.list_sessions(limit=100)) == 48
    assert outage.up and outage.outages == 1
    assert [level for level, _ in said] == [logging.WARNING, logging.INFO]
    assert "NOREPLICAS" in said[0][1]
    await store.close()
