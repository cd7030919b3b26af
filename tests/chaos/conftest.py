"""Fixtures of the Redis Cluster drills (test_cluster_failover.py, test_cluster_resharding.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from cluster_drills import DRILL, Drill, open_cluster_store
from helpers.fleet import Fleet
from redis_cluster import LocalCluster, start_cluster


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    """A local cluster of 3 primaries and 3 replicas for one drill."""
    c = start_cluster(primaries=3, replicas=1)
    yield c
    c.stop()


@pytest.fixture
async def drill(request: pytest.FixtureRequest, cluster: LocalCluster, prefix: str,
                tmp_path: Path) -> AsyncIterator[Drill]:
    """The drill of the requesting module: its chains have the module's STEPS steps."""
    store = await open_cluster_store(cluster, prefix)
    fleet = Fleet.create(cluster.url, prefix, tmp_path, **DRILL)
    d = Drill(cluster, store, fleet, request.module.STEPS)
    try:
        yield d
    finally:
        fleet.stop_all()
        await store.redis.aclose()
