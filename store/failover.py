"""Fast failover's Redis side: beats, declarations of death and the re-run of a dead
consumer's entries (store/lua/beat.lua, declare_dead.lua, claim_orphans.lua; the rule
that decides who is dead is store/liveness.py).

`BeatWire` is the beat thread's own blocking connection (worker/failover.py): a worker's
beats must not wait for its event loop, which a heavy step can keep busy for seconds.
`FailoverOps` gives the Store the same scripts on its asyncio client (the scheduler's
watch, a worker's re-claim of orphaned entries) and the declarations' reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from strands_durable.redis_targets import Timeouts
from strands_durable.store.base import StoreBase
from strands_durable.store.codec import as_str_map
from strands_durable.store.keys import CONSUMER_GROUP, Keys
from strands_durable.store.liveness import HOLDER, KEEP_DECLARATIONS_MS, Declaration
from strands_durable.store.redis_url import sync_redis_client
from strands_durable.store.script_library import flat, script_source
from strands_durable.store.script_operator import (
    BeatArgs,
    BeatKeys,
    BeatReply,
    ClaimOrphansArgs,
    ClaimOrphansKeys,
    Declared,
    DeclareDeadArgs,
    DeclareDeadKeys,
    Orphan,
)

__all__ = ["BeatReply", "BeatWire", "Declared", "FailoverOps", "Orphan"]


def beat_call(keys: Keys, shard: int, consumer: str, seq: int) -> tuple[BeatKeys, BeatArgs]:
    return (BeatKeys(keys.beats(shard), keys.deaths(shard), keys.stream(shard)),
            BeatArgs(consumer, seq, CONSUMER_GROUP, HOLDER))


def declare_call(keys: Keys, shard: int, consumer: str, seq: str, *, by: str,
                 silent_ms: int, idle_ms: int, now_iso: str, events_max: int,
                 detail: str) -> tuple[DeclareDeadKeys, DeclareDeadArgs]:
    suffixes = keys.session_suffixes()
    return (DeclareDeadKeys(keys.beats(shard), keys.deaths(shard), keys.orphans(shard),
                            keys.stream(shard), keys.unwritten(shard)),
            DeclareDeadArgs(consumer, seq, CONSUMER_GROUP, HOLDER, idle_ms, by, silent_ms,
                            now_iso, events_max, keys.session_prefix(shard),
                            suffixes["events"], KEEP_DECLARATIONS_MS, detail))


class BeatWire:
    """A blocking client of its own, for one thread: beats and declarations."""

    def __init__(self, url: str, keys: Keys, timeouts: Timeouts, events_max: int) -> None:
        self.keys = keys
        self.events_max = events_max
        self.client = sync_redis_client(url, timeouts, decode_responses=True)
        self._scripts = {name: self.client.register_script(script_source(name))
                         for name in ("beat", "declare_dead")}

    def _run(self, name: str, contract: tuple[Any, Any]) -> Any:
        keys, args = contract
        return self._scripts[name](keys=flat(keys), args=flat(args))

    def beat(self, shard: int, consumer: str, seq: int) -> BeatReply:
        return BeatReply.decode(
            self._run("beat", beat_call(self.keys, shard, consumer, seq)), consumer)

    def declare(self, shard: int, consumer: str, seq: str, **how: Any) -> Declared | None:
        """Declare `consumer` dead on `shard` if its beat is still `seq`; None if not."""
        return Declared.decode(self._run("declare_dead", declare_call(
            self.keys, shard, consumer, seq, events_max=self.events_max, **how)))

    def forget(self, consumer: str, shards: Sequence[int]) -> None:
        """A consumer that stops: its beats go, so nobody declares it dead."""
        for shard in shards:
            self.client.hdel(self.keys.beats(shard), consumer)

    def close(self) -> None:
        self.client.close()


class FailoverOps(StoreBase):
    async def look_at_beats(self, shard: int) -> BeatReply:
        """The shard's beats, for an observer that does not beat (the scheduler)."""
        keys, args = beat_call(self.keys, shard, "", 0)
        return await self.scripts.beat(keys=keys, args=args)

    async def declare_dead(self, shard: int, consumer: str, seq: str, **how: Any
                           ) -> Declared | None:
        keys, args = declare_call(self.keys, shard, consumer, seq,
                                  events_max=self.events_max, **how)
        return await self.scripts.declare_dead(keys=keys, args=args)

    async def claim_orphans(self, shard: int, consumer: str, count: int
                            ) -> tuple[list[Orphan], bool]:
        """Up to `count` entries of dead consumers, now ours; and whether more wait."""
        k = self.keys
        orphans = await self.scripts.claim_orphans(
            keys=ClaimOrphansKeys(k.stream(shard), k.orphans(shard), k.deaths(shard)),
            args=ClaimOrphansArgs(CONSUMER_GROUP, consumer, HOLDER, max(1, count)))
        return orphans.entries, orphans.more

    async def declarations(self, shard: int) -> list[Declaration]:
        """The consumers declared dead on `shard` (the last hour's)."""
        raw = as_str_map(await self.redis.hgetall(self.keys.deaths(shard)))
        found = (Declaration.parse(name, text) for name, text in raw.items())
        return [d for d in found if d is not None]

    async def forget_beats(self, consumer: str, shards: Sequence[int]) -> None:
        for shard in shards:
            await self.redis.hdel(self.keys.beats(shard), consumer)
