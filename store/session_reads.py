"""Reads of one session's state: its meta hash, results, events, conversation,
artifacts, checkpoints and failed jobs, decoded."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from strands_durable.errors import SessionNotFound
from strands_durable.models import SessionStatus, StepResult
from strands_durable.store.base import StoreBase
from strands_durable.store.codec import as_entries, as_str, as_str_map, range_after
from strands_durable.store.conversation import PAGE, restore
from strands_durable.store.records import GATE_FIELDS, SessionRecord, StreamEntry
from strands_durable.store.script_operator import (
    LaneKeys,
    LanePageArgs,
    ResultsKeys,
    ResultsPageArgs,
)


class SessionReads(StoreBase):
    async def plan_fields(self, session_id: str) -> dict[str, str]:
        """The meta fields a commit is planned from (what the gate script returns)."""
        values = await self.redis.hmget(self.keys.meta(session_id), list(GATE_FIELDS))
        return {k: as_str(v) for k, v in zip(GATE_FIELDS, values, strict=True)}

    async def get_session(self, session_id: str) -> SessionRecord:
        h = await self.redis.hgetall(self.keys.meta(session_id))
        if not h or "status" not in h:
            raise SessionNotFound(session_id)
        return SessionRecord.from_hash(session_id, as_str_map(h))

    async def status_of(self, session_id: str) -> SessionStatus | None:
        """The session's status alone (one field, not the whole record); None if gone."""
        value = await self.redis.hget(self.keys.meta(session_id), "status")
        return SessionStatus(as_str(value)) if value is not None else None

    async def exists(self, session_id: str) -> bool:
        return bool(await self.redis.exists(self.keys.meta(session_id)))

    async def spec_json(self, session_id: str) -> str:
        value = await self.redis.hget(self.keys.meta(session_id), "spec_json")
        if value is None:
            raise SessionNotFound(session_id)
        return as_str(value)

    async def results(self, session_id: str, start: int = 0, stop: int = -1
                      ) -> list[StepResult]:
        """Results in commit order, positions `start` to `stop` (inclusive; -1: the end)."""
        values = await self.scripts.results_page(
            keys=ResultsKeys(self.keys.order(session_id), self.keys.results(session_id)),
            args=ResultsPageArgs(start, stop))
        return [StepResult.from_json(v) for v in values if v is not None]

    async def events(self, session_id: str, after: str = "-", count: int | None = None
                     ) -> list[StreamEntry]:
        start = after if after == "-" else range_after(after)
        if start is None:
            return []
        entries = await self.redis.xrange(self.keys.events(session_id), start, "+", count=count)
        return as_entries(entries)

    async def wait_events(self, session_id: str, after: str, count: int, block_ms: int
                          ) -> list[StreamEntry]:
        """Events after `after`, waiting up to `block_ms` for one (XREAD BLOCK)."""
        reply = await self.redis.xread({self.keys.events(session_id): after}, count=count,
                                       block=block_ms)
        return [entry for _, batch in reply or [] for entry in as_entries(batch)]

    async def conversation_lanes(self, session_id: str) -> list[str]:
        """The session's conversation lanes (an agent's own, or a spec's named lane)."""
        return sorted(as_str(m) for m in await self.redis.smembers(
            self.keys.conversations(session_id)))

    async def conversation(self, session_id: str, lane: str, window: int = 0,
                           prefetched: tuple[int, list[str]] | None = None
                           ) -> list[dict[str, Any]]:
        """The lane's conversation to restore (store/conversation.py): the whole of it
        since its latest compaction, at most `window` newest messages (0: no ceiling).
        `prefetched`: its length and newest page as the step's gate read them (take.lua)."""
        key = self.keys.conversation(session_id, lane)
        if prefetched is None:
            # The length and the newest page in one round trip (one script, so they
            # agree); `restore` reads further back only past a page without a compaction.
            prefetched = await self.scripts.lane_page(keys=LaneKeys(key),
                                                      args=LanePageArgs(PAGE))
        length, newest = prefetched
        first = (max(0, length - PAGE), length - 1)

        async def read(start: int, stop: int) -> list[bytes | str]:
            if (start, stop) == first:
                return list(newest)
            return list(await self.redis.lrange(key, start, stop))

        return await restore(length, read, window)

    async def failed_steps(self, session_id: str) -> list[str]:
        """Keys of the steps that failed past their retries and await a resume."""
        return [as_str(k) for k in await self.redis.hkeys(self.keys.failed_jobs(session_id))]

    async def artifacts(self, session_id: str) -> dict[str, str]:
        return as_str_map(await self.redis.hgetall(self.keys.artifacts(session_id)))

    async def checkpoints(self, session_id: str) -> list[dict[str, Any]]:
        raw = await self.redis.lrange(self.keys.checkpoints(session_id), 0, -1)
        return [{"n": i + 1, **json.loads(r)} for i, r in enumerate(raw)]

    async def list_sessions(self, status: SessionStatus | None = None, limit: int = 100,
                            ) -> list[SessionRecord]:
        """Most recently updated first, merged across shards."""
        scored: list[tuple[float, str]] = []
        for shard in range(self.keys.shards):
            key = (self.keys.index_status(shard, status) if status
                   else self.keys.index_all(shard))
            for sid, score in await self.redis.zrevrange(key, 0, limit - 1, withscores=True):
                scored.append((score, as_str(sid)))
        scored.sort(reverse=True)
        records = []
        for _, sid in scored[:limit]:
            try:
                records.append(await self.get_session(sid))
            except SessionNotFound:
                continue  # deleted between the index read and now
        return records

    # -- what requeue and fork read (sessions/{requeue,checkpoints}.py) -----
    async def failed_jobs(self, session_id: str) -> dict[str, str]:
        """Step key -> the job JSON of each step that failed for good (or dead-lettered)."""
        return as_str_map(await self.redis.hgetall(self.keys.failed_jobs(session_id)))

    async def dead_letters(self, shard: int) -> list[StreamEntry]:
        return as_entries(await self.redis.xrange(self.keys.dead(shard), "-", "+"))

    async def committed_steps(self, session_id: str, steps: Sequence[str]) -> set[str]:
        if not steps:
            return set()
        async with self.redis.pipeline(transaction=False) as pipe:
            for step in steps:
                pipe.hexists(self.keys.results(session_id), step)
            found = await pipe.execute()
        return {step for step, hit in zip(steps, found, strict=True) if hit}

    async def step_order(self, session_id: str, count: int) -> list[str]:
        """The first `count` committed step keys, in commit order."""
        if count <= 0:
            return []
        return [as_str(x) for x in
                await self.redis.lrange(self.keys.order(session_id), 0, count - 1)]

    async def results_of(self, session_id: str, steps: Sequence[str]) -> list[StepResult]:
        if not steps:
            return []
        values = await self.redis.hmget(self.keys.results(session_id), list(steps))
        return [StepResult.from_json(v) for v in values if v is not None]

    async def checkpoint_texts(self, session_id: str, count: int) -> list[str]:
        """The first `count` checkpoints as stored (JSON text)."""
        if count <= 0:
            return []
        return [as_str(x) for x in
                await self.redis.lrange(self.keys.checkpoints(session_id), 0, count - 1)]

    async def checkpoint_count(self, session_id: str) -> int:
        return int(await self.redis.llen(self.keys.checkpoints(session_id)))

    async def conversation_head(self, session_id: str, lane: str, length: int) -> list[str]:
        """The first `length` messages of a lane, as stored (JSON text)."""
        if length <= 0:
            return []
        return [as_str(x) for x in
                await self.redis.lrange(self.keys.conversation(session_id, lane), 0, length - 1)]

