"""The provider capacity scripts' contracts (store/lua/capacity_*.lua) and typed calls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from strands_durable.store.script_library import ScriptLibrary

__all__ = ["AcquireArgs", "CapacityKeys", "CapacityScripts", "ReleaseArgs", "ThrottledArgs"]


@dataclass(frozen=True)
class CapacityKeys:
    state: str
    leases: str


@dataclass(frozen=True)
class AcquireArgs:
    now_ms: int
    lease_id: str
    lease_ttl_ms: int
    estimated_tokens: int
    declared_rpm: int
    declared_tpm: int
    declared_in_flight: int
    wait_cap_ms: int


@dataclass(frozen=True)
class ReleaseArgs:
    lease_id: str
    extra_tokens: int  # used minus estimated
    succeeded: int  # 0 | 1
    declared_rpm: int
    declared_in_flight: int
    renew_until_ms: int  # > 0: only extend the lease to this expiry


@dataclass(frozen=True)
class ThrottledArgs:
    now_ms: int
    lease_id: str
    backoff_ms: int
    told_rpm: int  # the provider's own requests-per-minute limit, 0 if it did not say
    decrease: float
    min_rpm: int


class CapacityScripts(ScriptLibrary):
    async def capacity_acquire(self, *, keys: CapacityKeys, args: AcquireArgs) -> list[Any]:
        """[granted 0|1, wait ms, reason, rpm in force, in-flight limit, in flight]."""
        return list(await self._call("capacity_acquire", keys, args))

    async def capacity_release(self, *, keys: CapacityKeys, args: ReleaseArgs) -> int:
        return int(await self._call("capacity_release", keys, args) or 0)

    async def capacity_throttled(self, *, keys: CapacityKeys, args: ThrottledArgs) -> list[Any]:
        """[rpm in force, in-flight limit]."""
        return list(await self._call("capacity_throttled", keys, args))
