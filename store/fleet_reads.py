"""The fleet's state in Redis: workers' heartbeats, the consumers of each shard's
group (and retiring them), and the one pipelined read behind the fleet gauges
(metrics/fleet.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis import Redis as SyncClient
from redis.exceptions import ResponseError

from strands_durable.models import SessionStatus
from strands_durable.redis_targets import Timeouts
from strands_durable.store.base import StoreBase
from strands_durable.store.codec import as_str, as_str_map
from strands_durable.store.keys import CONSUMER_GROUP, Keys
from strands_durable.store.redis_url import sync_redis_client
from strands_durable.store.script_operator import RetireConsumerArgs
from strands_durable.store.script_step import StreamKeys

__all__ = ["PER_SHARD", "FleetReads", "SyncClient", "open_sync_client", "queue_fleet_reads",
           "read_fleet_sync"]

PER_SHARD = 6 + len(SessionStatus)  # commands queue_fleet_reads queues per shard


def queue_fleet_reads(pipe: Any, keys: Keys, now_ms: int) -> None:
    """Queue every read on `pipe` (sync or asyncio pipeline): O(1) commands per shard
    (ZCOUNT is O(log n)), plus the heartbeats hash, which the scheduler prunes."""
    for shard in range(keys.shards):
        stream = keys.stream(shard)
        pipe.xinfo_groups(stream)
        pipe.xlen(stream)
        pipe.zcount(keys.timers(shard), "-inf", now_ms)
        pipe.zcard(keys.timers(shard))
        pipe.xlen(keys.dead(shard))
        pipe.llen(keys.fair_waiting(shard))  # steps fair dispatch moved off the stream
        for status in SessionStatus:
            pipe.zcard(keys.index_status(shard, status))
    pipe.hvals(keys.workers())


def read_fleet_sync(client: SyncClient, keys: Keys, now_ms: int) -> list[Any]:
    """The fleet read on a sync client (prometheus-client's scrape thread); a failed
    command's reply is its exception."""
    with client.pipeline(transaction=False) as pipe:
        queue_fleet_reads(pipe, keys, now_ms)
        return list(pipe.execute(raise_on_error=False))


def open_sync_client(redis_url: str, timeouts: Timeouts | None) -> SyncClient:
    return sync_redis_client(redis_url, timeouts, decode_responses=True)


class FleetReads(StoreBase):
    async def fleet_replies(self, now_ms: int) -> list[Any]:
        """The fleet read (see queue_fleet_reads) on the store's client."""
        async with self.redis.pipeline(transaction=False) as pipe:
            queue_fleet_reads(pipe, self.keys, now_ms)
            return list(await pipe.execute(raise_on_error=False))

    async def heartbeats(self) -> dict[str, str]:
        """Consumer name -> its last heartbeat (JSON)."""
        return as_str_map(await self.redis.hgetall(self.keys.workers()))

    async def beat(self, consumer: str, heartbeat_json: str) -> None:
        await self.redis.hset(self.keys.workers(), consumer, heartbeat_json)

    async def forget_heartbeats(self, consumers: Sequence[str]) -> None:
        if consumers:
            await self.redis.hdel(self.keys.workers(), *consumers)

    async def retire_consumer(self, consumer: str, min_idle_ms: int = 0,
                              shards: Sequence[int] | None = None) -> int:
        """Drop `consumer` from each shard's group (every shard by default) where it holds
        nothing pending and has been idle `min_idle_ms`, so `durable workers` lists no
        long-gone workers."""
        retired = 0
        for shard in range(self.keys.shards) if shards is None else shards:
            retired += await self.scripts.retire_consumer(
                keys=StreamKeys(self.keys.stream(shard)),
                args=RetireConsumerArgs(group=CONSUMER_GROUP, consumer=consumer,
                                        min_idle_ms=min_idle_ms))
        return retired

    async def group_consumers(self, shard: int) -> dict[str, tuple[int, int]]:
        """{consumer name: (pending entries, idle ms)} of a shard's group."""
        try:
            rows = await self.redis.xinfo_consumers(self.keys.stream(shard), CONSUMER_GROUP)
        except ResponseError:  # no stream or group yet: nobody holds anything
            return {}
        return {as_str(r["name"]): (int(r.get("pending", 0)), int(r.get("idle", 0)))
                for r in rows}

    async def group_info(self, shard: int) -> dict[str, Any] | None:
        """XINFO GROUPS' row of the workers' group on `shard` (None: no stream or group)."""
        try:
            groups = await self.redis.xinfo_groups(self.keys.stream(shard))
        except ResponseError:
            return None
        return next((dict(g) for g in groups if as_str(g.get("name")) == CONSUMER_GROUP),
                    None)

    async def queue_counts(self, shard: int, now_ms: int) -> tuple[int, int, int, int]:
        """(stream length, dead letters, timers, timers due) of `shard`."""
        k = self.keys
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.xlen(k.stream(shard))
            pipe.xlen(k.dead(shard))
            pipe.zcard(k.timers(shard))
            pipe.zcount(k.timers(shard), "-inf", now_ms)
            length, dead, timers, due = await pipe.execute()
        return int(length), int(dead), int(timers), int(due)

    async def deferred_steps(self, shard: int) -> int:
        """Steps of `shard` waiting on their namespaces' lists (the fair take moved them
        off the stream until their namespace's turn): part of its queue."""
        return sum((await self.deferred_by_namespace(shard)).values())

    async def deferred_by_namespace(self, shard: int) -> dict[str, int]:
        """Namespace -> its steps of `shard` waiting on its list (none: absent)."""
        names = [as_str(n) for n in
                 await self.redis.zrange(f"{self.keys.fair(shard)}:ready", 0, -1)]
        if not names:
            return {}
        async with self.redis.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.llen(self.keys.fair_queue(shard, name))
            counts = await pipe.execute()
        return {name: int(n) for name, n in zip(names, counts, strict=True) if int(n)}
