"""Provider capacity shared by the fleet: one state per provider key (provider, model,
host) in Redis, taken and given back through store/lua/capacity_*.lua. The decisions of
when to ask, how long to wait and what a throttle means live in worker/capacity.py; this
is only the door to Redis."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cached_property

from strands_durable.models import now_ms
from strands_durable.store.base import StoreBase
from strands_durable.store.codec import as_str
from strands_durable.store.script_capacity import (
    AcquireArgs,
    CapacityKeys,
    ReleaseArgs,
    ThrottledArgs,
)

__all__ = ["CapacityOps", "CapacityState", "DeclaredLimits", "Grant", "ProviderKey"]


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


@dataclass(frozen=True)
class Grant:
    granted: bool
    wait_ms: int
    reason: str  # why not: backoff, in_flight, requests_per_minute, tokens_per_minute
    rpm: float  # requests per minute in force (0: none)
    in_flight_limit: int  # 0: none
    in_flight: int


@dataclass(frozen=True)
class CapacityState:
    """A key as `durable workers` and the metrics show it."""

    key: ProviderKey
    learned_rpm: float
    learned_in_flight: float
    in_flight: int
    granted: int
    throttled: int
    backoff_ms: int  # left of the shared backoff


class CapacityOps(StoreBase):
    def _capacity_keys(self, key: ProviderKey) -> CapacityKeys:
        return CapacityKeys(self.keys.capacity(key.digest), self.keys.capacity_leases(key.digest))

    async def capacity_register(self, key: ProviderKey) -> None:
        await self.redis.hset(self.keys.capacity_keys(), key.digest, json.dumps(
            {"provider": key.provider, "model": key.model, "host": key.host}))

    async def capacity_acquire(self, key: ProviderKey, limits: DeclaredLimits, lease_id: str,
                               lease_ttl_ms: int, estimated_tokens: int,
                               wait_cap_ms: int) -> Grant:
        reply = await self.scripts.capacity_acquire(
            keys=self._capacity_keys(key),
            args=AcquireArgs(now_ms(), lease_id, lease_ttl_ms, estimated_tokens, limits.rpm,
                             limits.tpm, limits.in_flight, wait_cap_ms))
        return Grant(granted=int(reply[0]) == 1, wait_ms=int(reply[1]), reason=as_str(reply[2]),
                     rpm=float(as_str(reply[3])), in_flight_limit=int(reply[4]),
                     in_flight=int(reply[5]))

    async def capacity_renew(self, key: ProviderKey, lease_id: str, until_ms: int) -> None:
        await self.scripts.capacity_release(
            keys=self._capacity_keys(key), args=ReleaseArgs(lease_id, 0, 0, 0, 0, until_ms))

    async def capacity_release(self, key: ProviderKey, limits: DeclaredLimits, lease_id: str,
                               extra_tokens: int, succeeded: bool) -> None:
        await self.scripts.capacity_release(
            keys=self._capacity_keys(key),
            args=ReleaseArgs(lease_id, extra_tokens, int(succeeded), limits.rpm,
                             limits.in_flight, 0))

    async def capacity_throttled(self, key: ProviderKey, lease_id: str, backoff_ms: int,
                                 told_rpm: int, decrease: float, min_rpm: int
                                 ) -> tuple[float, int]:
        reply = await self.scripts.capacity_throttled(
            keys=self._capacity_keys(key),
            args=ThrottledArgs(now_ms(), lease_id, backoff_ms, told_rpm, decrease, min_rpm))
        return float(as_str(reply[0])), int(reply[1])

    async def capacity_states(self) -> list[CapacityState]:
        """Every key the fleet has used, with its state now."""
        now = now_ms()
        states = []
        for digest, raw in sorted((await self.redis.hgetall(self.keys.capacity_keys())).items()):
            described = json.loads(as_str(raw))
            key = ProviderKey(described["provider"], described["model"], described["host"])
            if key.digest != as_str(digest):
                continue
            fields = await self.redis.hmget(
                self.keys.capacity(key.digest),
                ["learned_rpm", "learned_inflight", "granted", "throttled", "backoff_until"])
            values = [as_str(v) if v is not None else "0" for v in fields]
            leases = self.keys.capacity_leases(key.digest)
            in_flight = await self.redis.zcount(leases, now + 1, "+inf")
            states.append(CapacityState(
                key=key, learned_rpm=float(values[0]), learned_in_flight=float(values[1]),
                in_flight=int(in_flight), granted=int(values[2]), throttled=int(values[3]),
                backoff_ms=max(0, int(float(values[4])) - now)))
        return states
