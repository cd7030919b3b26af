"""A shard's slot half-migrated (the ASK window of a resharding): single-key reads follow
ASK, a script whose declared keys are split between the nodes gets TRYAGAIN before it
runs (nothing half-applied) and a worker's client waits it out until the move ends."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from helpers import wait_for
from integration.test_store import new_session
from redis_cluster import LocalCluster

from strands_durable.models import SessionStatus, now_iso, now_ms
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.outage import RedisOutage, outage_client_kwargs

pytestmark = pytest.mark.integration


async def test_operations_across_a_half_migrated_slot(fresh_cluster: LocalCluster,
                                                      prefix: str, tmp_path: Path) -> None:
    settings = DurableSettings(redis_url=fresh_cluster.url, key_prefix=prefix, shards=1,
                               breakpoint_dir=str(tmp_path / "bp"))
    outage = RedisOutage(60, "cluster")
    store = open_store(settings, **outage_client_kwargs(outage))
    try:
        await store.prepare()
        sid, _ = await store.create_session(new_session())
        slot = fresh_cluster.slot_of(store.keys.meta(sid))
        source = fresh_cluster.owner_of_slot(slot)
        target = next(p for p in fresh_cluster.primaries() if p.port != source.port)
        fresh_cluster.begin_migration(slot, target.port)
        moved = fresh_cluster.move_keys(slot, source, target.port, batch=1, limit=3)
        assert moved == 3
        # Reads of one key: wherever the key is now (ASK for the moved ones).
        record = await store.get_session(sid)
        assert record.status == SessionStatus.RUNNING
        assert len(await store.events(sid)) >= 1

        # A script over keys on both nodes: TRYAGAIN until the move ends, then it runs.
        cancel = asyncio.create_task(store.control(sid, "cancel", now_iso=now_iso(),
                                                   now_ms=now_ms()))


        async def waiting() -> bool:
            return not outage.up  # the script met TRYAGAIN and is being ridden out

        await wait_for(waiting, timeout_s=30, what="the script to meet the split slot")
        assert not cancel.done()
        assert (await store.get_session(sid)).status == SessionStatus.RUNNING  # no half
        fresh_cluster.move_keys(slot, source, target.port)
        fresh_cluster.finish_migration(slot, target.port)
        verdict, status = await asyncio.wait_for(cancel, 60)
        assert (verdict, status) == ("ok", "cancelled")
        assert (await store.get_session(sid)).status == SessionStatus.CANCELLED
        with target.client() as direct:
            assert direct.hget(store.keys.meta(sid), "status") == "cancelled"
    finally:
        await store.close()
