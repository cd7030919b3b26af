"""Redis Cluster failover drills: chains run on 3 real `arq worker` processes (and a
`durable scheduler`) against a local cluster of 3 primaries and 3 replicas while a
primary that serves some of their shards is SIGKILLed. Its replica is promoted; the
workers follow (MOVED, connection errors), no process exits, every session completes and
no step commits twice.

The second drill makes the replica miss writes first (SIGSTOP: asynchronous replication
lagging), so the promotion loses commits the old primary had acknowledged. Each Lua
script replicates as one unit, so a commit is lost whole (result, order, events, the
next step's entry and this one's XACK together); its step is pending again on the new
primary and runs again: nothing is lost from the surviving history, nothing is in it
twice. docs/cluster.md says how WAIT / min-replicas-to-write bound that window."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest
from cluster_drills import Drill, assert_each_step_once
from helpers import wait_for
from recovery import start_fleet
from redis_cluster import ClusterNode, LocalCluster

pytestmark = pytest.mark.chaos

SESSIONS, STEPS, WORKERS = 24, 10, 3
DELAY_S = 0.15  # each agent call; where the kill lands is decided by commit counts


async def start_run(drill: Drill) -> None:
    # Every session is queued and held before a worker starts, and resumed once all
    # of them consume: neither a slow submit loop nor a slow worker boot (a loaded
    # machine) lets chains end before the drill begins.
    await drill.start_scheduler()
    await drill.submit(SESSIONS, DELAY_S)
    await start_fleet(drill.fleet, drill.store, WORKERS)
    await drill.release()


def busiest_primary(drill: Drill) -> tuple[ClusterNode, list[str]]:
    """The primary serving the most of the drill's sessions, and those sessions."""
    ports = [p.port for p in drill.cluster.primaries()]
    port = max(ports, key=lambda p: len(drill.on_port(p)))
    return drill.cluster.node(port), drill.on_port(port)


def replica_of(cluster: LocalCluster, primary: ClusterNode) -> ClusterNode:
    for node in cluster.replica_nodes():
        with node.client() as c:
            if int(c.info("replication")["master_port"]) == primary.port:
                return node
    raise AssertionError(f"no replica of {primary.port}")


def report(capsys: pytest.CaptureFixture[str], text: str) -> None:
    with capsys.disabled():
        print(f"\n{text}")


async def test_killing_a_primary_mid_run_loses_nothing_and_commits_nothing_twice(
        drill: Drill, cluster: LocalCluster, capsys: pytest.CaptureFixture[str]) -> None:
    await start_run(drill)
    victim, affected = busiest_primary(drill)
    assert affected, "no session on the primary to kill"
    # Steps are committing on the victim's shards (most of its sessions still running).
    before = await drill.wait_committing(affected, 2 * len(affected))

    t0 = time.monotonic()
    cluster.kill_primary(victim.port)
    await asyncio.to_thread(cluster.wait_for_failover, victim, 60)
    promoted_s = time.monotonic() - t0
    resumed_s = promoted_s + await drill.wait_progress(affected, before)
    await drill.wait_all_ended()
    total_s = time.monotonic() - t0

    assert drill.exited() == [], "a worker or the scheduler exited:\n" + drill.fleet.logs()[-3000:]
    steps = await assert_each_step_once(drill)
    report(capsys, f"cluster failover drill: {SESSIONS} sessions x {STEPS} steps = {steps} "
                   f"steps, {len(affected)} sessions on the killed primary :{victim.port} "
                   f"({before} of their steps committed before the kill); replica promoted "
                   f"{promoted_s:.1f} s after kill -9, commits on its shards again after "
                   f"{resumed_s:.1f} s, all done {total_s:.1f} s after the kill; "
                   f"double commits 0; worker exits 0")


async def test_a_promotion_that_loses_acknowledged_commits_reruns_them_once(
        drill: Drill, cluster: LocalCluster, capsys: pytest.CaptureFixture[str]) -> None:
    await start_run(drill)
    victim, affected = busiest_primary(drill)
    replica = replica_of(cluster, victim)
    await drill.wait_committing(affected, len(affected))
    # The replica stops taking the stream of writes: what commits now is on the primary
    # alone, as when replication lags. SIGSTOP alone would not do (its kernel still
    # buffers what the primary sends): the primary drops the link too, and the stopped
    # replica cannot dial back.
    assert replica.pid is not None
    os.kill(replica.pid, signal.SIGSTOP)
    try:
        with victim.client() as direct:
            direct.execute_command("CLIENT", "KILL", "TYPE", "replica")
        mark = await drill.committed(affected)
        await wait_for(lambda: drill.committed_at_least(affected, mark + 3),
                       what="commits the stopped replica misses")
        # The fleet stands still from here until the promoted replica's figure is read:
        # a worker that followed the promotion at once would commit on the new primary
        # before the read, and its new commits would hide the lost ones.
        with drill.frozen():
            acked = await drill.committed(affected)
            cluster.kill_primary(victim.port)
            os.kill(replica.pid, signal.SIGCONT)
            t0 = time.monotonic()
            await asyncio.to_thread(cluster.wait_for_failover, victim, 60)
            promoted_s = time.monotonic() - t0
            survived = await drill.committed_readable(affected)
    finally:
        os.kill(replica.pid, signal.SIGCONT)
    lost = acked - survived
    assert lost > 0, "the promotion lost nothing: the drill did not bite"
    await drill.wait_all_ended()

    assert drill.exited() == [], "a worker or the scheduler exited:\n" + drill.fleet.logs()[-3000:]
    steps = await assert_each_step_once(drill)
    report(capsys, f"cluster lost-write drill: {steps} steps; the old primary acknowledged "
                   f"{acked} commits on its shards, the promoted replica had {survived}: "
                   f"{lost} acknowledged commits lost, each step ran again and committed "
                   f"once (promotion {promoted_s:.1f} s); double commits 0")

