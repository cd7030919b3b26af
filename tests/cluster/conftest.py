"""Fixtures for tests against a real local Redis Cluster (tests/redis_cluster.py).

`cluster`: one cluster of 3 primaries without replicas for the whole session (each xdist
worker starts its own), for the tests that need slots spread over primaries and nothing
else: every test keeps to its own key prefix and leaves the topology as it found it.
A test that kills a node or moves a slot uses `fresh_cluster` (3+3, its own) or
`own_cluster` (3 primaries, its own), so the shared one stays healthy."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from redis_cluster import LocalCluster, start_cluster

from strands_durable.settings import DurableSettings


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    """3 primaries, no replicas, shared by the session; healthy when handed out."""
    c = start_cluster(primaries=3, replicas=0)
    yield c
    c.stop()


@pytest.fixture(autouse=True)
def _shared_cluster_left_healthy(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test on the shared cluster must leave it as it found it: every node up, every slot
    where it was (a test that kills or reshards belongs on a cluster of its own)."""
    if "cluster" not in request.fixturenames:
        yield
        return
    shared: LocalCluster = request.getfixturevalue("cluster")
    before = _slot_map(shared)
    yield
    assert all(n.alive for n in shared.nodes), "a test killed a node of the shared cluster"
    assert _slot_map(shared) == before, "a test moved slots of the shared cluster"


def _slot_map(c: LocalCluster) -> list[tuple[int, int, int]]:
    with c.nodes[0].client() as direct:
        return sorted((int(s), int(e), int(p[1]))
                      for s, e, p, *_ in direct.execute_command("CLUSTER", "SLOTS"))


@pytest.fixture
def fresh_cluster() -> Iterator[LocalCluster]:
    """A 3+3 cluster of the test's own, for drills that kill a primary (failover)."""
    c = start_cluster(primaries=3, replicas=1)
    yield c
    c.stop()


@pytest.fixture
def own_cluster() -> Iterator[LocalCluster]:
    """3 primaries of the test's own, for a test that reshards (no replica needed)."""
    c = start_cluster(primaries=3, replicas=0)
    yield c
    c.stop()


@pytest.fixture
def settings(cluster: LocalCluster, prefix: str, tmp_path: Path) -> DurableSettings:
    """The root conftest's settings, on the session's cluster (tests reused from
    tests/integration run unchanged against it)."""
    return DurableSettings(redis_url=cluster.url, key_prefix=prefix, claim_idle_ms=1000,
                           read_block_ms=100, timer_poll_ms=50, heartbeat_s=0.5,
                           breakpoint_dir=str(tmp_path / "breakpoints"))
