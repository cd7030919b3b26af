"""How long a worker's store waits through a primary's failover on a local 3+3 cluster
(cluster-node-timeout 2000 ms), and sequential single-key reads per second before it.
Not a test (timings belong to no assertion): `.venv/bin/python tests/cluster/failover_timing.py`.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS), str(TESTS / "e2e")]

from integration.test_store import new_session  # noqa: E402
from redis_cluster import start_cluster  # noqa: E402

from strands_durable.settings import DurableSettings  # noqa: E402
from strands_durable.store.connect import open_store  # noqa: E402
from strands_durable.store.outage import RedisOutage, outage_client_kwargs  # noqa: E402


async def once() -> tuple[float, float, float]:
    cluster = start_cluster()
    try:
        settings = DurableSettings(redis_url=cluster.url, key_prefix="m", shards=12,
                                   redis_socket_timeout_s=3, redis_connect_timeout_s=1,
                                   read_block_ms=100)
        outage = RedisOutage(60, "cluster")
        store = open_store(settings, **outage_client_kwargs(outage))
        await store.prepare()
        sids = [(await store.create_session(new_session()))[0] for _ in range(200)]
        started = time.perf_counter()
        for sid in sids:
            await store.get_session(sid)
        reads = len(sids) / (time.perf_counter() - started)
        home = store.keys.stream(store.keys.shard(sids[0]))
        victim = cluster.node(cluster.primary_port_of_key(home))
        cluster.wait_replicated(victim.port)
        cluster.kill_primary(victim.port)
        started = time.perf_counter()
        await store.get_session(sids[0])
        took = time.perf_counter() - started
        await store.close()
        return reads, took, outage.total_down_s
    finally:
        cluster.stop()


def main() -> None:
    for _ in range(3):
        reads, took, down = asyncio.run(once())
        print(f"get_session {reads:.0f}/s sequential; the first read of the killed "
              f"primary's shard returned after {took:.2f}s (outage {down:.2f}s)")


if __name__ == "__main__":
    main()
