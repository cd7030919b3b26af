"""Scans of the shards' indexes and queues: sessions by status and last update (for
listing, cleanup, `--auto-resume` and the watchdog), timers and stream entries."""

from __future__ import annotations

from collections.abc import Sequence

from strands_durable.models import SessionStatus
from strands_durable.store.base import StoreBase
from strands_durable.store.codec import as_entries, as_str
from strands_durable.store.records import IndexEntry, RunningFields, StreamEntry


class IndexReads(StoreBase):
    def _index_key(self, shard: int, status: SessionStatus | None) -> str:
        return (self.keys.index_status(shard, status) if status is not None
                else self.keys.index_all(shard))

    async def index_page(self, shard: int, status: SessionStatus, start: int, count: int
                         ) -> list[str]:
        """Session ids `start`..`start + count - 1` of a status index, oldest first."""
        return [as_str(sid) for sid in await self.redis.zrange(
            self.keys.index_status(shard, status), start, start + count - 1)]

    async def index_until(self, shard: int, status: SessionStatus, max_score: float,
                          limit: int | None = None) -> list[IndexEntry]:
        """Sessions of a status index updated at or before `max_score`, oldest first
        (the first `limit` of them when given)."""
        rows = await self.redis.zrangebyscore(
            self.keys.index_status(shard, status), "-inf", max_score, withscores=True,
            start=None if limit is None else 0, num=limit)
        return [IndexEntry(as_str(sid), float(score)) for sid, score in rows]

    async def index_score(self, shard: int, status: SessionStatus, session_id: str
                          ) -> float | None:
        score = await self.redis.zscore(self.keys.index_status(shard, status), session_id)
        return None if score is None else float(score)

    async def index_at(self, shard: int, status: SessionStatus | None, score: float
                       ) -> list[IndexEntry]:
        """Every session of an index (status None: all) scored exactly `score`."""
        rows = await self.redis.zrangebyscore(self._index_key(shard, status), score, score,
                                              withscores=True)
        return [IndexEntry(as_str(sid), float(s)) for sid, s in rows]

    async def index_below(self, shard: int, status: SessionStatus | None, below: float,
                          floor: float, count: int) -> list[IndexEntry]:
        """The first `count` sessions scored under `below` and at least `floor`, newest
        first."""
        rows = await self.redis.zrevrangebyscore(self._index_key(shard, status),
                                                 f"({below}", floor, start=0, num=count,
                                                 withscores=True)
        return [IndexEntry(as_str(sid), float(s)) for sid, s in rows]

    async def spec_sessions(self, shard: int, spec_hash: str, status: SessionStatus
                            ) -> list[IndexEntry]:
        """Sessions of `spec_hash` now in `status`, scored by last update (ZINTER costs
        the size of the smaller set)."""
        # Weight 0 for the spec index: the score is the status index's (update time).
        rows = await self.redis.zinter({self.keys.index_status(shard, status): 1,
                                        self.keys.index_spec(shard, spec_hash): 0},
                                       withscores=True)
        return [IndexEntry(as_str(sid), float(score)) for sid, score in rows]

    async def workflow_names(self, session_ids: Sequence[str]) -> list[str | None]:
        """Each session's workflow name, None for one deleted meanwhile."""
        if not session_ids:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for sid in session_ids:
                pipe.hget(self.keys.meta(sid), "workflow_name")
            names = await pipe.execute()
        return [None if n is None else as_str(n) for n in names]

    async def running_fields(self, session_ids: Sequence[str]) -> list[RunningFields]:
        """What the duration watchdog needs of each session (deleted ones left out)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for sid in session_ids:
                pipe.hmget(self.keys.meta(sid), ["started_ms", "spec_digest",
                                                 "budget_overrides"])
            rows = await pipe.execute()
        return [RunningFields(sid, int(started), as_str(digest), as_str(overrides))
                for sid, (started, digest, overrides) in zip(session_ids, rows, strict=True)
                if started is not None]

    async def timer_jobs(self, shard: int, stop: int) -> list[str]:
        """Job JSON texts of the shard's timers 0..`stop` (inclusive), soonest first."""
        return [as_str(job) for job in await self.redis.zrange(self.keys.timers(shard), 0, stop)]

    async def stream_page(self, shard: int, after: str, count: int) -> list[StreamEntry]:
        """Up to `count` entries of the shard's step stream from `after` ('-' or an
        exclusive '(id')."""
        return as_entries(await self.redis.xrange(self.keys.stream(shard), after, "+",
                                                  count=count))
