"""Namespaces' quotas in Redis: the quotas (one hash), and per namespace the sessions
holding a place (`active`) and those queued for one (`queued`). sessions/quotas.py
decides; these are its reads and atomic writes (single-key, so a cluster's slots never
matter)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

from strands_durable.access import NamespaceQuota
from strands_durable.store.base import StoreBase
from strands_durable.store.codec import as_str
from strands_durable.store.script_access import QuotaPlaceArgs, QuotaPlaceKeys

TOKENS_TTL_S = 2 * 86_400  # a day's token counter outlives its day by a day


class QuotaOps(StoreBase):
    """Namespaces' quotas and their bookkeeping (sessions/quotas.py decides)."""

    async def set_quota(self, quota: NamespaceQuota) -> None:
        await self.redis.hset(self.keys.quotas(), quota.namespace, quota.model_dump_json())

    async def drop_quota(self, namespace: str) -> bool:
        return bool(await self.redis.hdel(self.keys.quotas(), namespace))

    async def quota(self, namespace: str) -> NamespaceQuota | None:
        raw = await self.redis.hget(self.keys.quotas(), namespace)
        return _quota(raw) if raw is not None else None

    async def quotas(self) -> list[NamespaceQuota]:
        found = [_quota(raw) for raw in (await self.redis.hgetall(self.keys.quotas())).values()]
        return sorted((q for q in found if q is not None), key=lambda q: q.namespace)

    async def refresh_fair_weights(self) -> str:
        """Read the namespaces' weights and quotas of steps in flight (their quotas') into
        `fair_weights` and `fair_limits`, which every take of this store sends (the fair
        take, _lib.lua); the worker calls it with each heartbeat, so a change takes effect
        within seconds. A quota of steps in flight is split between the shards (each
        counts its own), rounded up."""
        found = await self.quotas()
        self.fair_weights = " ".join(f"{q.namespace}={q.weight}" for q in found
                                     if q.weight is not None and q.weight != 1)
        shards = self.keys.shards
        self.fair_limits = " ".join(f"{q.namespace}={-(-q.steps_in_flight // shards)}"
                                    for q in found if q.steps_in_flight is not None)
        return self.fair_weights

    def fair_weight(self, namespace: str) -> int:
        """A namespace's weight as the last refresh read it (1 unless its quota says)."""
        for pair in self.fair_weights.split():
            name, _, weight = pair.partition("=")
            if name == namespace:
                return int(weight)
        return 1

    async def reserve_place(self, namespace: str, member: str, limit: int, now_ms: int
                            ) -> bool:
        """Add `member` to the namespace's active set if it holds fewer than `limit`
        (checked and added in one script: no two submits take the last place)."""
        return await self.scripts.quota_place(
            keys=QuotaPlaceKeys(self.keys.quota_part(namespace, "active")),
            args=QuotaPlaceArgs(member=member, limit=limit, now_ms=now_ms))

    async def settle_place(self, namespace: str, reservation: str, session_id: str | None,
                           now_ms: int) -> None:
        """A reservation becomes the session it was for (or is dropped: None). The
        session is added before the reservation goes: for a moment the namespace counts
        one more, never one less."""
        key = self.keys.quota_part(namespace, "active")
        if session_id is not None:
            await self.redis.zadd(key, {session_id: now_ms})
        await self.redis.zrem(key, reservation)

    async def active_places(self, namespace: str) -> list[tuple[str, int]]:
        rows = await self.redis.zrange(self.keys.quota_part(namespace, "active"), 0, -1,
                                       withscores=True)
        return [(as_str(member), int(score)) for member, score in rows]

    async def free_places(self, namespace: str, members: Sequence[str]) -> None:
        if members:
            await self.redis.zrem(self.keys.quota_part(namespace, "active"), *members)

    async def session_statuses(self, session_ids: Sequence[str]) -> list[str | None]:
        """Each session's status, None for one that is gone."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for sid in session_ids:
                pipe.hget(self.keys.meta(sid), "status")
            found = await pipe.execute()
        return [None if s is None else as_str(s) for s in found]

    async def session_paused_reason(self, session_id: str) -> str | None:
        """Why the session is paused; None when it is not paused (or gone)."""
        status, reason = await self.redis.hmget(self.keys.meta(session_id),
                                                ["status", "paused_reason"])
        if status is None or as_str(status) != "paused":
            return None
        return as_str(reason) if reason else ""

    async def add_tokens(self, namespace: str, day: str, tokens: int) -> int:
        """Count a committed step's model tokens in the namespace's day (`tokens:<day>`,
        UTC YYYY-MM-DD), kept TOKENS_TTL_S so old days vanish; the day's total."""
        key = self.keys.quota_part(namespace, f"tokens:{day}")
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.incrby(key, tokens)
            pipe.expire(key, TOKENS_TTL_S)
            total, _ = await pipe.execute()
        return int(total)

    async def tokens_used(self, namespace: str, day: str) -> int:
        raw = await self.redis.get(self.keys.quota_part(namespace, f"tokens:{day}"))
        return int(raw) if raw is not None else 0

    async def queue_for_place(self, namespace: str, session_id: str, now_ms: int) -> None:
        await self.redis.zadd(self.keys.quota_part(namespace, "queued"), {session_id: now_ms})

    async def queued_first(self, namespace: str, count: int) -> list[str]:
        return [as_str(m) for m in await self.redis.zrange(
            self.keys.quota_part(namespace, "queued"), 0, count - 1)]

    async def unqueue(self, namespace: str, session_id: str) -> None:
        await self.redis.zrem(self.keys.quota_part(namespace, "queued"), session_id)


def _quota(raw: bytes | str) -> NamespaceQuota | None:
    try:
        return NamespaceQuota.model_validate_json(raw)
    except ValidationError:
        return None
