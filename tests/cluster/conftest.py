"""Fixtures for tests against a real local Redis Cluster (tests/redis_cluster.py).

One cluster per test module keeps the suite quick; a test that kills or moves things
should use `fresh_cluster` (its own cluster) so the others see a healthy one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from redis_cluster import LocalCluster, start_cluster


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
