"""The cluster harness itself: it forms, routes, fails over and migrates a slot."""

from __future__ import annotations

import pytest
from redis_cluster import LocalCluster, start_cluster

pytestmark = pytest.mark.integration


def test_shared_cluster_forms_with_three_primaries(cluster: LocalCluster) -> None:
    assert len(cluster.primaries()) == 3
    assert cluster.replica_nodes() == []
    assert cluster.url.startswith("redis+cluster://127.0.0.1:")
    with cluster.client() as c:
        c.set("{a}x", "1")
        assert c.get("{a}x") == "1"
    owner = cluster.primary_port_of_key("{a}x")
    with cluster.node(owner).client() as direct:
        assert direct.get("{a}x") == "1"


def test_migrate_slot_moves_keys(own_cluster: LocalCluster) -> None:
    cluster = own_cluster
    with cluster.client() as c:
        c.set("{mig}k1", "v1")
        c.set("{mig}k2", "v2")
    slot = cluster.slot_of("{mig}k1")
    source = cluster.owner_of_slot(slot)
    target = next(p for p in cluster.primaries() if p.port != source.port)
    cluster.migrate_slot(slot, target.port)
    assert cluster.owner_of_slot(slot).port == target.port
    with target.client() as direct:
        assert direct.get("{mig}k1") == "v1"
    with cluster.client() as c:
        assert c.get("{mig}k2") == "v2"


def test_kill_primary_fails_over_and_node_rejoins() -> None:
    c = start_cluster(primaries=3, replicas=1)
    try:
        assert len(c.primaries()) == 3
        assert len(c.replica_nodes()) == 3
        masters = set()
        for replica in c.replica_nodes():
            with replica.client() as direct:
                masters.add(int(direct.info("replication")["master_port"]))
        assert masters == {p.port for p in c.primaries()}  # one replica per primary
        with c.client() as rc:
            rc.set("{f}k", "kept")
        victim = c.node(c.primary_port_of_key("{f}k"))
        pid = victim.pid
        c.wait_replicated(victim.port)  # the replica has it
        c.kill_primary(victim.port)
        assert not victim.alive and pid is not None
        c.wait_for_failover(victim)
        assert c.primary_port_of_key("{f}k") != victim.port
        with c.client() as rc:
            assert rc.get("{f}k") == "kept"
        c.restart(victim.port)
        c.wait_healthy()
        assert victim.role() == "slave"
    finally:
        c.stop()
    assert all(not n.alive for n in c.nodes)
