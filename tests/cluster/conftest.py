"""Fixtures for tests against a real local Redis Cluster (tests/redis_cluster.py).

One cluster per test module keeps the suite quick; a test that kills or moves things
should use `fresh_cluster` (its own cluster) so the others see a healthy one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from redis_cluster import LocalCluster, start_cluster

from strands_durable.settings import DurableSettings


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    """3 primaries with 1 replica each, shared by a test module; healthy when handed out."""
    c = start_cluster(primaries=3, replicas=1)
    yield c
    c.stop()


@pytest.fixture
def fresh_cluster() -> Iterator[LocalCluster]:
    """A 3+3 cluster of the test's own, for drills that kill or reshard."""
    c = start_cluster(primaries=3, replicas=1)
    yield c
    c.stop()


@pytest.fixture
def settings(cluster: LocalCluster, prefix: str, tmp_path: Path) -> DurableSettings:
    """The root conftest's settings, on the module's cluster (tests reused from
    tests/integration run unchanged against it)."""
    return DurableSettings(redis_url=cluster.url, key_prefix=prefix, claim_idle_ms=1000,
                           read_block_ms=100, timer_poll_ms=50, heartbeat_s=0.5,
                           breakpoint_dir=str(tmp_path / "breakpoints"))
