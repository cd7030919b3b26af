"""Fair dispatch on a 3+3 Redis Cluster with six shards: each shard's takes defer,
refill and count a namespace's steps in flight with keys of that shard's slot alone (a
script that touched another slot would be refused), and every step is taken once."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest
from integration.test_store import new_session
from redis_cluster import LocalCluster

from strands_durable.access import NamespaceQuota
from strands_durable.models import now_iso, now_ms
from strands_durable.settings import DurableSettings
from strands_durable.store.store import Store

pytestmark = pytest.mark.integration
SHARDS = 6


@pytest.fixture
def settings(cluster: LocalCluster, prefix: str, tmp_path: Path) -> DurableSettings:
    return DurableSettings(redis_url=cluster.url, key_prefix=prefix, shards=SHARDS,
                           breakpoint_dir=str(tmp_path / "breakpoints"))


async def test_fair_takes_stay_in_each_shards_slot(store: Store) -> None:
    await store.set_quota(NamespaceQuota(namespace="team-b", steps_in_flight=SHARDS * 2))
    await store.refresh_fair_weights()
    made: list[str] = []
    for namespace, n in (("team-a", 200), ("team-b", 30)):
        new = dataclasses.replace(new_session(), namespace=namespace)
        made += [(await store.create_session(new))[0] for _ in range(n)]
    for shard in range(SHARDS):
        await store.promote_timers(shard, now_ms())  # the look: state exists
    taken: list[str] = []
    for _ in range(400):
        got = 0
        for shard in range(SHARDS):
            for entry in await store.take_new(shard, "c1", 4, now_iso()):
                if entry.gate is not None and entry.gate.verdict == "run":
                    taken.append(entry.fields["sid"])
                    await store.ack(shard, entry.entry_id)
                    got += 1
        left = sum([await store.deferred_steps(k) for k in range(SHARDS)])
        if not got and not left:
            break
    assert Counter(taken) == Counter(made)
