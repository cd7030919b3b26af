"""The sessions' live streams: model output as it is written (text deltas, tool calls
starting, turns ending, a step's attempts), one Redis stream per session in its shard's
slot. Never part of a commit, and nothing durable depends on it: entries are capped
(MAXLEN, approximate) and the stream expires a while after its last write; what
committed is in the session's results and events."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from strands_durable.store.base import StoreBase
from strands_durable.store.codec import as_entries, flat_maps, range_after
from strands_durable.store.records import StreamEntry
from strands_durable.store.script_operator import LiveAppendArgs, LiveAppendKeys


@dataclass(frozen=True)
class LiveBatch:
    """What one session's live stream is given at once, in order."""

    session_id: str
    entries: Sequence[Mapping[str, str]]


def _flat_batch(out: list[str], entries: Sequence[Mapping[str, str]]) -> None:
    """A batch as live_append.lua reads it: its number of entries, then each entry as
    its number of strings and its fields and values."""
    out.append(str(len(entries)))
    flat_maps(out, entries)


class LiveOps(StoreBase):
    async def live_append(self, batches: Sequence[LiveBatch], maxlen: int, ttl_s: int
                          ) -> None:
        """Append each batch to its session's live stream, if the session still exists
        (a late batch never makes a deleted session's stream again): one script call
        per shard (its sessions' keys share a slot), all written at once on the
        pipelined connection."""
        by_shard: dict[int, tuple[list[str], list[str]]] = {}
        for batch in batches:
            if not batch.entries:
                continue
            keys, args = by_shard.setdefault(self.keys.shard(batch.session_id), ([], []))
            keys += (self.keys.meta(batch.session_id), self.keys.live(batch.session_id))
            _flat_batch(args, batch.entries)
        await asyncio.gather(*(self.scripts.live_append(
            keys=LiveAppendKeys(tuple(keys)), args=LiveAppendArgs(maxlen, ttl_s, tuple(args)))
            for keys, args in by_shard.values()))

    async def live_entries(self, session_id: str, after: str = "-", count: int | None = None
                           ) -> list[StreamEntry]:
        start = after if after == "-" else range_after(after)
        if start is None:
            return []
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
