"""Reading the step streams: what a worker's consumer takes from its group (new
entries, idle ones to take over) and what `durable run` claims of its own session."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import replace

from strands_durable.store.base import StoreBase
from strands_durable.store.codec import as_str, as_str_map
from strands_durable.store.conversation import PAGE
from strands_durable.store.keys import CONSUMER_GROUP, Keys
from strands_durable.store.records import (
    GATE_FIELDS,
    AutoClaimed,
    ClaimedEntries,
    StreamEntry,
    TakenEntry,
)
from strands_durable.store.script_gate import FairArgs, TakeArgs, TakeKeys, TakeSpelling
from strands_durable.store.script_step import ClaimSessionArgs, StreamKeys

_WANTED = json.dumps(list(GATE_FIELDS))
_SPELLINGS: dict[str, TakeSpelling] = {}


def take_spelling(keys: Keys, shard: int) -> TakeSpelling:
    """The shard's TakeSpelling; it depends only on the key layout, so it is made once
    per session prefix (every step's commit sends it)."""
    prefix = keys.session_prefix(shard)
    spelling = _SPELLINGS.get(prefix)
    if spelling is None:
        if len(_SPELLINGS) > 4096:  # many stores in one process (tests): stay bounded
            _SPELLINGS.clear()
        spelling = _SPELLINGS[prefix] = TakeSpelling(
            session_prefix=prefix, **keys.session_suffixes(), wanted=_WANTED, page=PAGE,
            fair_prefix=keys.fair(shard))
    return spelling


_NOT_LOOKING: dict[str, FairArgs] = {}


def fair_args(weights: str, look: bool, limits: str = "") -> FairArgs:
    """A take's FairArgs now: the clock, the namespaces' weights, whether to look for
    the shard's fairness state and the quotas of steps in flight (StoreBase; a quota
    makes every take look). Not looking, the clock is not read: one made per weights
    serves every commit (the hot path of a single-namespace fleet)."""
    if look or limits:
        return FairArgs(now_ms=int(time.time() * 1000), weights=weights, look=1,
                        limits=limits)
    args = _NOT_LOOKING.get(weights)
    if args is None:
        if len(_NOT_LOOKING) > 64:
            _NOT_LOOKING.clear()
        args = _NOT_LOOKING[weights] = FairArgs(now_ms=0, weights=weights, look=0,
                                                limits="")
    return args


class StreamReads(StoreBase):
    async def read_new(self, shard: int, consumer: str, count: int, block_ms: int
                       ) -> list[StreamEntry]:
        """Entries of the shard's stream nobody was handed yet, now pending under
        `consumer` (XREADGROUP >); [] when `block_ms` passed with none."""
        reply = await self.redis.xreadgroup(CONSUMER_GROUP, consumer,
                                            {self.keys.stream(shard): ">"}, count=count,
                                            block=block_ms)
        return [(as_str(eid), as_str_map(fields))
                for _stream, entries in reply or [] for eid, fields in entries]

    async def take_new(self, shard: int, consumer: str, count: int, now_iso: str,
                       read: Sequence[StreamEntry] = ()) -> list[TakenEntry]:
        """Gate `read` (entries a blocking read_new just made ours), then take up to
        `count` new ones without waiting and gate each, all in one call (take.lua).
        [] when there was nothing to gate."""
        reply = await self.scripts.take(
            keys=TakeKeys(self.keys.stream(shard), self.keys.unwritten(shard)),
            args=TakeArgs(group=CONSUMER_GROUP, consumer=consumer, count=count,
                          now_iso=now_iso, events_max=self.events_max,
                          ids=" ".join(entry_id for entry_id, _ in read),
                          spelling=take_spelling(self.keys, shard),
                          fair=fair_args(self.fair_weights, self.fair_look.get(shard, True),
                                         self.fair_limits)))
        # An entry sent by id whose stream entry is gone comes back without fields:
        # those the caller read are kept.
        known = dict(read)
        return [replace(t, fields=known[t.entry_id]) if not t.fields and t.entry_id in known
                else t for t in reply]

    async def claim_idle(self, shard: int, consumer: str, min_idle_ms: int, cursor: str,
                         count: int) -> AutoClaimed:
        """Take over entries pending under anyone for `min_idle_ms` (XAUTOCLAIM)."""
        next_cursor, entries, *_ = await self.redis.xautoclaim(
            self.keys.stream(shard), CONSUMER_GROUP, consumer, min_idle_ms, cursor,
            count=count)
        return AutoClaimed(as_str(next_cursor),
                           [(as_str(eid), as_str_map(f) if f is not None else None)
                            for eid, f in entries])

    async def deliveries(self, shard: int, entry_id: str) -> int | None:
        """How many times the group delivered a pending entry (None: not pending)."""
        pending = await self.redis.xpending_range(self.keys.stream(shard), CONSUMER_GROUP,
                                                  min=entry_id, max=entry_id, count=1)
        return int(pending[0]["times_delivered"]) if pending else None

    async def wait_for_entries(self, shard: int, after: str, block_ms: int) -> bool:
        """Block until the shard's stream has an entry after `after` (a plain read: it
        takes nothing from the group); False when `block_ms` passed first."""
        reply = await self.redis.xread({self.keys.stream(shard): after}, count=1,
                                       block=block_ms)
        return bool(reply)

    # -- one session's entries (`durable run`, worker/embedded.py) -------------------------
    async def claim_new_entries(self, session_id: str, consumer: str, after: str, count: int,
                                scan: int = 500) -> ClaimedEntries:
        """Entries of `session_id` after `after` that nobody was handed yet, made pending
        under `consumer` (up to `count`; at most `scan` entries looked at)."""
        return await self._claim(session_id, consumer, "new", after, count, scan, 0)

    async def claim_idle_entries(self, session_id: str, consumer: str, cursor: str,
                                 count: int, min_idle_ms: int, scan: int = 100
                                 ) -> ClaimedEntries:
        """Entries of `session_id` pending under another consumer, idle `min_idle_ms`."""
        return await self._claim(session_id, consumer, "idle", cursor, count, scan, min_idle_ms)

    async def _claim(self, session_id: str, consumer: str, mode: str, cursor: str, count: int,
                     scan: int, min_idle_ms: int) -> ClaimedEntries:
        return await self.scripts.claim_session(
            keys=StreamKeys(self.keys.stream(self.keys.shard(session_id))),
            args=ClaimSessionArgs(group=CONSUMER_GROUP, consumer=consumer,
                                  session_id=session_id, mode=mode, cursor=cursor,
                                  count=max(1, count), scan=scan, min_idle_ms=min_idle_ms))

    async def recent_job_agent(self, session_id: str, step: str, count: int) -> str:
        """The agent of `step`'s job among the newest `count` entries of its session's
        shard stream ("" when it is not among them): what a progress line shows."""
        entries = await self.redis.xrevrange(self.keys.stream(self.keys.shard(session_id)),
                                             count=count)
        for _, fields in entries:
            f = as_str_map(fields)
            if f.get("sid") == session_id and f.get("step") == step:
                return str(json.loads(f.get("job", "{}")).get("agent", ""))
        return ""

