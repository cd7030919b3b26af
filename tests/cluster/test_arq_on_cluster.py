"""arq's own connection on a Redis Cluster (store/cluster_arq.py): what arq's Worker
sends (its start-up INFO/DBSIZE pipeline, the queue poll, the health check) works through
the cluster, and a MULTI/EXEC pipeline is refused with a clear error."""

from __future__ import annotations

import pytest
from arq.connections import ArqRedis, log_redis_info
from redis.exceptions import RedisClusterException
from redis_cluster import LocalCluster

from strands_durable.store.cluster_arq import ClusterArqRedis
from strands_durable.store.redis_url import async_redis_client
from strands_durable.worker import arq_queue_name

pytestmark = pytest.mark.integration


async def test_arq_commands_route_through_the_cluster(cluster: LocalCluster) -> None:
    queue = arq_queue_name("tarq", cluster.url)
    assert queue == "{tarq:arq}"
    health = queue + ":health-check"
    assert cluster.slot_of(queue) == cluster.slot_of(health)
    client = async_redis_client(cluster.url, redis_class=ArqRedis)
    assert isinstance(client, ClusterArqRedis)
    try:
        lines: list[str] = []
        await log_redis_info(client, lines.append)
        assert lines and "redis_version=7" in lines[0], lines
        assert await client.zcard(queue) == 0
        assert await client.zrangebyscore(queue, min=float("-inf"), max=1e15) == []
        await client.psetex(health, 60_000, b"ok")
        owner = cluster.primary_port_of_key(health)
        with cluster.node(owner).client() as direct:
            assert direct.get(health) == "ok"
        assert await client.delete(health) == 1
        with pytest.raises(RedisClusterException, match="not supported on a Redis Cluster"):
            client.pipeline(transaction=True)
    finally:
        await client.aclose()


def test_plain_urls_keep_the_untagged_queue() -> None:
    assert arq_queue_name("durable", "redis://127.0.0.1:6379/0") == "durable:arq"
