"""Redis Cluster resharding drill: while chains run on 3 real `arq worker` processes, the
slot of a live shard (its `{s<k>}` hash tag: the shard's stream, indexes and every key of
its sessions) moves to another primary the way `redis-cli --cluster reshard` moves it:
CLUSTER SETSLOT IMPORTING on the target and MIGRATING on the source, MIGRATE of every key
of the slot in small batches (the fleet commits between batches, so scripts meet a
half-moved slot: ASK, TRYAGAIN), then SETSLOT NODE. Nothing may be lost or committed
twice, and no process may exit."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest
from cluster_drills import SHARDS, Drill, assert_each_step_once
from recovery import start_fleet
from redis_cluster import LocalCluster

from strands_durable.store.keys import shard_of

pytestmark = pytest.mark.chaos

SESSIONS, STEPS, WORKERS = 32, 10, 3
DELAY_S = 0.15
BATCH = 4  # keys per MIGRATE: small, so that the fleet works on a half-moved slot


async def test_moving_a_live_shards_slot_loses_nothing_and_commits_nothing_twice(
        drill: Drill, cluster: LocalCluster, capsys: pytest.CaptureFixture[str]) -> None:
    # Every session is queued and held before a worker starts, and resumed once all
    # of them consume: neither a slow submit loop nor a slow worker boot (a loaded
    # machine) lets chains end before the drill begins.
    await drill.start_scheduler()
    await drill.submit(SESSIONS, DELAY_S)
    await start_fleet(drill.fleet, drill.store, WORKERS)
    await drill.release()
    by_shard = Counter(shard_of(sid, SHARDS) for sid in drill.sids)
    shard, _ = by_shard.most_common(1)[0]
    moving = [sid for sid in drill.sids if shard_of(sid, SHARDS) == shard]
    slot = cluster.slot_of(drill.store.keys.tag(shard))
    source = cluster.owner_of_slot(slot)
    target = next(p for p in cluster.primaries() if p.port != source.port)
    before = await drill.wait_committing(moving, len(moving))

    t0 = time.monotonic()
    cluster.begin_migration(slot, target.port)
    moved = batches = 0
    while True:
        n = await asyncio.to_thread(cluster.move_keys, slot, source, target.port, BATCH, BATCH)
        if not n:
            break
        moved, batches = moved + n, batches + 1
        # Let the fleet work against the half-moved slot before the next batch (once
        # only the moving shard's sessions are left, they wait for the move to end).
        await drill.wait_any_commit(held=moving)
    during = await drill.committed_readable(moving) - before
    cluster.finish_migration(slot, target.port)
    migrated_s = time.monotonic() - t0
    assert cluster.owner_of_slot(slot).port == target.port
    await drill.wait_all_ended()

    assert drill.exited() == [], "a worker or the scheduler exited:\n" + drill.fleet.logs()[-3000:]
    steps = await assert_each_step_once(drill)
    with source.client() as c:
        assert c.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0, "keys left behind"
    # What the workers met while the slot was half-moved (TRYAGAIN): waited out as an
    # outage, logged once each; never a step's error (a NOSCRIPT, once a client had
    # marked the slot's owner a replica) or a failed read.
    logs = drill.fleet.logs()
    assert "Traceback" not in logs and "NOSCRIPT" not in logs.upper(), logs[-3000:]
    waits = logs.count("is unavailable")
    with capsys.disabled():
        print(f"\ncluster resharding drill: {SESSIONS} sessions x {STEPS} steps = {steps} "
              f"steps; shard {shard} (slot {slot}, {len(moving)} sessions) moved "
              f":{source.port} -> :{target.port} while running: {moved} keys in {batches} "
              f"batches of {BATCH} over {migrated_s:.1f} s, {during} of its steps committed "
              f"while half-moved, {waits} outage waits in worker logs; lost 0, double "
              f"commits 0, process exits 0")
