"""The sessions' live streams: model output as it is written (text deltas, tool calls
starting, turns ending, a step's attempts), one Redis stream per session in its shard's
slot. Never part of a commit, and nothing durable depends on it: entries are capped
(MAXLEN, approximate) and the stream expires a while after its last write; what
committed is in the session's results and events."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from strands_durable.store.base import StoreBase
from strands_durable.store.codec import as_entries
from strands_durable.store.records import StreamEntry


@dataclass(frozen=True)
class LiveBatch:
    """What one session's live stream is given at once, in order."""

    session_id: str
    entries: Sequence[Mapping[str, str]]


class LiveOps(StoreBase):
    async def live_append(self, batches: Sequence[LiveBatch], maxlen: int, ttl_s: int
                          ) -> None:
        """Append each batch to its session's live stream: one round trip for all (a
        pipeline, not a transaction: sessions live in different slots on a cluster)."""
        if not batches:
            return
        pipe = self.redis.pipeline(transaction=False)
        for batch in batches:
            key = self.keys.live(batch.session_id)
            for fields in batch.entries:
                entry: dict[Any, Any] = dict(fields)  # redis-py's field type is invariant
                pipe.xadd(key, entry, maxlen=maxlen, approximate=True)
            pipe.expire(key, ttl_s)
        await pipe.execute()

    async def live_entries(self, session_id: str, after: str = "-", count: int | None = None
                           ) -> list[StreamEntry]:
        start = after if after == "-" else f"({after}"
        return as_entries(await self.redis.xrange(self.keys.live(session_id), start, "+",
                                                  count=count))

    async def live_newest_id(self, session_id: str) -> str:
        """The id of the stream's newest entry ("0-0" when it has none)."""
        newest = await self.redis.xrevrange(self.keys.live(session_id), "+", "-", count=1)
        return as_entries(newest)[0][0] if newest else "0-0"

    async def live_wait(self, session_id: str, after: str, count: int, block_ms: int
                        ) -> list[StreamEntry]:
        """Entries after `after`, waiting up to `block_ms` for one (XREAD BLOCK)."""
        reply = await self.redis.xread({self.keys.live(session_id): after}, count=count,
                                       block=block_ms)
        return [entry for _, batch in reply or [] for entry in as_entries(batch)]
