"""The session store: every read and atomic write of session state in Redis, and the
only code that talks to Redis (store/*). Writes that must be atomic are Lua scripts
(store/lua/, called through the typed library in store/scripts.py).

`Store` is the one door; its parts live beside it by concern: step_path.py (create,
gate, commit, fail), streams.py (what workers read of the streams), session_reads.py,
operator_writes.py (pause/resume/cancel, requeue, fork, delete), index_reads.py
(scans of the indexes), fleet_reads.py (heartbeats, consumer groups, gauges),
failover.py (liveness beats, declarations of death, re-running a dead worker's entries),
capacity.py (provider capacity) and live.py (the live streams of model output).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from redis.exceptions import ResponseError

from strands_durable.errors import ConfigError
from strands_durable.store import format_version
from strands_durable.store.access import AccessOps
from strands_durable.store.capacity import CapacityOps
from strands_durable.store.codec import JSON_SEPARATORS, dumps
from strands_durable.store.export import TransferOps
from strands_durable.store.failover import FailoverOps
from strands_durable.store.fleet_reads import FleetReads
from strands_durable.store.index_reads import IndexReads
from strands_durable.store.keys import CONSUMER_GROUP, FORMAT_FIELD
from strands_durable.store.live import LiveBatch, LiveOps
from strands_durable.store.locks import Lock, locked
from strands_durable.store.operator_writes import OperatorWrites
from strands_durable.store.records import (
    DEFAULT_EVENTS_MAX,
    GATE_FIELDS,
    AutoClaimed,
    ClaimedEntries,
    CommitOutcome,
    CommitRequest,
    GateOutcome,
    IndexEntry,
    NewFork,
    NewSession,
    RunningFields,
    SessionRecord,
    StreamEntry,
    commit_bytes,
)
from strands_durable.store.schedules import ScheduleOps
from strands_durable.store.session_reads import SessionReads
from strands_durable.store.step_path import StepPath
from strands_durable.store.streams import StreamReads
from strands_durable.store.webhooks import WebhookOps

__all__ = [
    "DEFAULT_EVENTS_MAX", "GATE_FIELDS", "JSON_SEPARATORS", "AutoClaimed", "ClaimedEntries",
    "CommitOutcome", "CommitRequest", "GateOutcome", "IndexEntry", "LiveBatch", "NewFork",
    "NewSession",
    "RunningFields", "SessionRecord", "ShardCountChanged", "Store", "StreamEntry",
    "commit_bytes", "dumps",
]


class ShardCountChanged(ConfigError):
    """DURABLE_SHARDS is not the count this keyspace was set up with (its config key)."""


class Store(StepPath, StreamReads, SessionReads, OperatorWrites, IndexReads, FleetReads,
            FailoverOps, CapacityOps, LiveOps, AccessOps, ScheduleOps, WebhookOps,
            TransferOps):
    async def prepare(self) -> None:
        """Check the shard count against what this Redis was set up with, and the data
        format (store/format_version.py: stamp, upgrade or refuse); create groups. Both
        are read in one round trip."""
        recorded, data_format = await self.redis.hmget(self.keys.config(),
                                                       ["shards", FORMAT_FIELD])
        fresh = recorded is None
        if recorded is None:
            await self.redis.hsetnx(self.keys.config(), "shards", str(self.keys.shards))
            recorded = await self.redis.hget(self.keys.config(), "shards")
        if int(recorded) != self.keys.shards:
            raise ShardCountChanged(
                f"DURABLE_SHARDS={self.keys.shards} but the sessions under prefix "
                f"{self.keys.prefix!r} were created with {recorded} shards; set it back "
                f"(DURABLE_SHARDS={recorded}): a live keyspace cannot change its shard "
                "count, each session lives in its shard's keys (and cluster slot)"
            )
        await format_version.check(self.redis, self.scripts, self.keys, data_format,
                                   fresh=fresh)
        for stream in self.keys.streams():
            try:
                await self.redis.xgroup_create(stream, CONSUMER_GROUP, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    async def data_format(self) -> int | None:
        """The data format recorded under the prefix (None: not recorded yet)."""
        return await format_version.read_recorded(self.redis, self.keys)

    async def upgrade_data_format(self) -> list[format_version.Migration]:
        """Run the pending migrations (the operator's `durable data-format --upgrade`)."""
        return await format_version.upgrade(self.redis, self.scripts, self.keys)

    async def ping(self) -> None:
        await self.redis.ping()

    async def close(self) -> None:
        await self.redis.aclose()

    # -- locks (store/locks.py) ----------------------------------------------------------
    def new_lock(self, name: str, *, ttl_ms: int, shard: int | None = None) -> Lock:
        """A lock to take and keep (a leader's); its fence grows with every holder."""
        return Lock(self.redis, self.scripts, self.keys.lock(name, shard),
                    self.keys.lock_fence(name, shard), ttl_ms)

    @asynccontextmanager
    async def locked(self, name: str, *, shard: int | None = None, ttl_ms: int = 30_000,
                     wait_s: float = 5.0) -> AsyncIterator[Lock]:
        """Hold the lock `name` for the body; LockNotAcquired past `wait_s`."""
        async with locked(self.redis, self.scripts, self.keys.lock(name, shard),
                          ttl_ms=ttl_ms, wait_s=wait_s) as lock:
            yield lock
