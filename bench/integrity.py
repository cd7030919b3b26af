"""After a run: every step committed exactly once (else the bench fails loudly), and what
a session holds in Redis (bytes per session and per step, by key)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis

from strands_durable.models import EventType, SessionStatus
from strands_durable.store.keys import Keys


class CommittedTwice(RuntimeError):
    """A step has more than one result, commit-order entry or step_completed event."""


async def completed_sessions(redis: Redis, keys: Keys) -> list[str]:
    sids: list[str] = []
    for shard in range(keys.shards):
        key = keys.index_status(shard, SessionStatus.COMPLETED)
        sids += [s.decode() if isinstance(s, bytes) else s
                 for s in await redis.zrange(key, 0, -1)]
    return sids


async def check_once(redis: Redis, keys: Keys, sids: list[str], steps: int) -> None:
    """Each of `steps` steps of every session committed once: one result, one place in
    the commit order, one step_completed event. CommittedTwice names the first that is
    not."""
    for sid in sids:
        async with redis.pipeline(transaction=False) as pipe:
            pipe.hlen(keys.results(sid))
            pipe.lrange(keys.order(sid), 0, -1)
            pipe.xrange(keys.events(sid), "-", "+")
            results, order, events = await pipe.execute()
        done = Counter(_text(f.get(b"step", f.get("step", ""))) for _, f in events
                       if _text(f.get(b"type", f.get("type", ""))) == EventType.STEP_COMPLETED)
        twice = [k for k, n in Counter(_text(k) for k in order).items() if n > 1]
        twice += [k for k, n in done.items() if n > 1]
        # A long session's stream keeps only its newest events (DURABLE_EVENTS_MAX): then
        # the step_completed events it still has must each be there once, and no more.
        whole = bool(events) and _text(events[0][1].get(
            b"type", events[0][1].get("type", ""))) == EventType.SESSION_STARTED
        events_ok = sum(done.values()) == steps if whole else sum(done.values()) <= steps
        if twice or results != steps or len(order) != steps or not events_ok:
            raise CommittedTwice(
                f"session {sid}: {results} results, {len(order)} commit-order entries, "
                f"{sum(done.values())} step_completed events for {steps} steps"
                + (f"; committed more than once: {sorted(set(twice))[:5]}" if twice else ""))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass
class Footprint:
    sessions: int = 0
    steps: int = 0  # per session
    bytes_per_session: float = 0.0
    by_key: dict[str, float] = field(default_factory=dict)  # key suffix -> mean bytes

    @property
    def bytes_per_step(self) -> float:
        return self.bytes_per_session / self.steps if self.steps else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"sessions": self.sessions, "steps": self.steps,
                "bytes_per_session": round(self.bytes_per_session),
                "bytes_per_step": round(self.bytes_per_step),
                "by_key": {k: round(v) for k, v in self.by_key.items()}}


async def footprint(redis: Redis, keys: Keys, sids: list[str], steps: int,
                    sample: int = 5) -> Footprint:
    """MEMORY USAGE of every key of up to `sample` sessions, averaged."""
    picked = sids[:sample]
    by_key: Counter[str] = Counter()
    for sid in picked:
        base = keys.meta(sid)
        async for raw in redis.scan_iter(match=f"{base}*", count=1000):
            key = _text(raw)
            size = await redis.memory_usage(key, samples=0) or 0
            by_key[key[len(base):] or "meta"] += size
    n = max(len(picked), 1)
    # Lanes are per agent: one row for all of them.
    merged: Counter[str] = Counter()
    for suffix, size in by_key.items():
        merged[":conv:*" if suffix.startswith(":conv:") else suffix] += size
    total = sum(merged.values()) / n
    return Footprint(len(picked), steps, total,
                     {k: v / n for k, v in sorted(merged.items(), key=lambda kv: -kv[1])})
