"""Provider capacity shared by the fleet: one state per provider key (provider, model,
host) in Redis, taken and given back through store/lua/capacity_*.lua. The decisions of
when to ask, how long to wait and what a throttle means live in worker/capacity.py; this
is only the door to Redis."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property

from strands_durable.models import now_ms
from strands_durable.store.base import StoreBase
from strands_durable.store.codec import as_entries, as_str
from strands_durable.store.script_capacity import (
    AcquireArgs,
    AcquireKeys,
    Grant,
    ReleaseArgs,
    ReleaseKeys,
    ThrottledArgs,
    ThrottledKeys,
)

__all__ = ["Candidate", "CapacityOps", "CapacityState", "DeclaredLimits", "Grant",
           "ProviderKey", "SpecScope"]

NO_SCOPE = "-"  # the scope keys of a request without one: never written
STATE_TTL_MS = 86_400_000  # a key's state lapses this long after its last use (the scripts')


@dataclass(frozen=True)
class ProviderKey:
    """What one account limit covers: a provider's model at one endpoint."""

    provider: str
    model: str
    host: str = ""  # '' : the SDK's default endpoint

    @cached_property  # asked several times for each model request
    def digest(self) -> str:
        raw = f"{self.provider}\0{self.model}\0{self.host}".encode()
        return hashlib.sha256(raw).hexdigest()[:16]

    @property
    def label(self) -> str:
        return f"{self.provider}/{self.model}" + (f"@{self.host}" if self.host else "")


@dataclass(frozen=True)
class DeclaredLimits:
    """The operator's limits for a key (0: not declared)."""

    rpm: int = 0
    tpm: int = 0
    in_flight: int = 0

    def __bool__(self) -> bool:
        return bool(self.rpm or self.tpm or self.in_flight)


@dataclass(frozen=True)
class SpecScope:
    """A spec's own lower limits (`runtime.capacity`), kept by every session of that
    spec together on each key it calls, beside the fleet's."""

    scope_id: str  # the spec's digest (hex, bounded)
    limits: DeclaredLimits


@dataclass(frozen=True)
class Candidate:
    """A waiting request a process asks for: the first of its session's there."""

    session: str
    lease_id: str
    estimated_tokens: int
    weight: float = 1.0  # its session's share (priority / default priority)
    waiting: int = 1  # requests of its session waiting in this process, itself included
    scope: SpecScope | None = None


@dataclass(frozen=True)
class CapacityState:
    """A key as `durable capacity`, `durable workers` and the console show it."""

    key: ProviderKey
    learned_rpm: float
    learned_in_flight: float
    in_flight: int
    granted: int
    throttled: int
    backoff_ms: int  # left of the shared backoff
    waiting: dict[str, int] = field(default_factory=dict)  # process -> requests waiting
    waiting_sessions: int = 0

    @property
    def waiting_requests(self) -> int:
        return sum(self.waiting.values())


class CapacityOps(StoreBase):
    def _part(self, key: ProviderKey, part: str) -> str:
        return self.keys.capacity_part(key.digest, part)

    def _scope_keys(self, key: ProviderKey, scope: SpecScope | None) -> tuple[str, str]:
        name = f"scope:{scope.scope_id if scope else NO_SCOPE}"
        return self._part(key, name), self._part(key, f"{name}:leases")

    async def capacity_register(self, key: ProviderKey) -> None:
        """Name `key` in the fleet's list of keys (what the views read), its state marked
        in use first: the list drops a key whose state lapsed (a day without a request;
        the scripts' PEXPIRE), so that names a spec made up do not pile up for good. A
        worker registers each key it uses again every hour (worker/capacity.py)."""
        state = self.keys.capacity(key.digest)
        await self.redis.hset(state, "registered_ms", str(now_ms()))
        await self.redis.pexpire(state, STATE_TTL_MS)
        await self.redis.hset(self.keys.capacity_keys(), key.digest, json.dumps(
            {"provider": key.provider, "model": key.model, "host": key.host}))

    async def capacity_acquire(self, key: ProviderKey, limits: DeclaredLimits,
                               candidates: list[Candidate], lease_ttl_ms: int,
                               wait_cap_ms: int, process: str = "", waiting: int = 0
                               ) -> Grant:
        """One of `candidates` granted (fair share among the sessions waiting), or how
        long to wait. `waiting`: this process's requests waiting for the key."""
        scopes: list[SpecScope] = []
        for c in candidates:
            if c.scope is not None and c.scope not in scopes:
                scopes.append(c.scope)
        wanted = [[c.session, c.weight, c.estimated_tokens, c.lease_id, c.waiting,
                   scopes.index(c.scope) + 1 if c.scope is not None else 0]
                  for c in candidates]
        scope_keys = tuple(k for s in scopes for k in self._scope_keys(key, s))
        return await self.scripts.capacity_acquire(
            keys=AcquireKeys(self.keys.capacity(key.digest),
                             self.keys.capacity_leases(key.digest), self._part(key, "waiting"),
                             self._part(key, "queue"), self._part(key, "queue_expiry"),
                             self._part(key, "passes"), scope_keys),
            args=AcquireArgs(now_ms(), lease_ttl_ms, limits.rpm, limits.tpm, limits.in_flight,
                             wait_cap_ms, process or "-", waiting, json.dumps(wanted),
                             json.dumps([[s.limits.rpm, s.limits.tpm, s.limits.in_flight]
                                         for s in scopes])))

    def _release_keys(self, key: ProviderKey, scope: SpecScope | None) -> ReleaseKeys:
        return ReleaseKeys(self.keys.capacity(key.digest), self.keys.capacity_leases(key.digest),
                           *self._scope_keys(key, scope))

    async def capacity_renew(self, key: ProviderKey, lease_id: str, until_ms: int,
                             scope: SpecScope | None = None) -> None:
        await self.scripts.capacity_release(
            keys=self._release_keys(key, scope),
            args=ReleaseArgs(lease_id, 0, 0, 0, 0, until_ms, 0))

    async def capacity_release(self, key: ProviderKey, limits: DeclaredLimits, lease_id: str,
                               extra_tokens: int, succeeded: bool,
                               scope: SpecScope | None = None, told_rpm: int = 0) -> None:
        await self.scripts.capacity_release(
            keys=self._release_keys(key, scope),
            args=ReleaseArgs(lease_id, extra_tokens, int(succeeded), limits.rpm,
                             limits.in_flight, 0, told_rpm))

    async def capacity_throttled(self, key: ProviderKey, lease_id: str, backoff_ms: int,
                                 told_rpm: int, decrease: float, min_rpm: int,
                                 scope: SpecScope | None = None) -> tuple[float, int]:
        throttled = await self.scripts.capacity_throttled(
            keys=ThrottledKeys(self.keys.capacity(key.digest),
                               self.keys.capacity_leases(key.digest),
                               self._scope_keys(key, scope)[1]),
            args=ThrottledArgs(now_ms(), lease_id, backoff_ms, told_rpm, decrease, min_rpm))
        return throttled.rpm, throttled.in_flight_limit

    async def capacity_share(self, session_id: str) -> tuple[int | None, str]:
        """The priority a session was submitted with (None: the default) and its
        namespace, whose weight multiplies its share of a busy key (fair dispatch)."""
        value, namespace = await self.redis.hmget(self.keys.meta(session_id),
                                                  ["priority", "namespace"])
        priority = int(as_str(value)) if value is not None and as_str(value).isdigit() \
            else None
        return priority, as_str(namespace) if namespace is not None else "default"

    async def capacity_states(self) -> list[CapacityState]:
        """Every key the fleet has used within a day, with its state now (a key whose
        state lapsed leaves the list)."""
        states = []
        registry = self.keys.capacity_keys()
        for digest, raw in sorted((await self.redis.hgetall(registry)).items()):
            described = json.loads(as_str(raw))
            key = ProviderKey(described["provider"], described["model"], described["host"])
            if key.digest != as_str(digest):
                continue
            state = await self._state(key)
            if state is None:
                await self.redis.hdel(registry, key.digest)
            else:
                states.append(state)
        return states

    async def _state(self, key: ProviderKey) -> CapacityState | None:
        """The key's state now; None when nothing of it is left."""
        now = now_ms()
        fields = await self.redis.hmget(
            self.keys.capacity(key.digest),
            ["learned_rpm", "learned_inflight", "granted", "throttled", "backoff_until",
             "registered_ms"])
        values = [as_str(v) if v is not None else "0" for v in fields]
        in_flight = await self.redis.zcount(self.keys.capacity_leases(key.digest), now + 1,
                                            "+inf")
        waiting = {}
        for process, raw in (await self.redis.hgetall(self._part(key, "waiting"))).items():
            count, _, until = as_str(raw).partition("|")
            if until.isdigit() and int(until) > now and count.isdigit():
                waiting[as_str(process)] = int(count)
        sessions = await self.redis.zcount(self._part(key, "queue_expiry"), now + 1, "+inf")
        if all(v is None for v in fields) and not (in_flight or waiting or sessions):
            return None
        return CapacityState(
            key=key, learned_rpm=float(values[0]), learned_in_flight=float(values[1]),
            in_flight=int(in_flight), granted=int(values[2]), throttled=int(values[3]),
            backoff_ms=max(0, int(float(values[4])) - now), waiting=waiting,
            waiting_sessions=int(sessions))

    async def recent_events(self, session_id: str, count: int) -> list[tuple[str, dict[str, str]]]:
        """A session's newest `count` events, oldest first (what a waiting step shows)."""
        entries = await self.redis.xrevrange(self.keys.events(session_id), "+", "-",
                                             count=count)
        return as_entries(list(reversed(entries)))
