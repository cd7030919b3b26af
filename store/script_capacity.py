"""The provider capacity scripts' contracts (store/lua/capacity_*.lua) and typed calls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from strands_durable.store.codec import as_str
from strands_durable.store.script_library import ScriptLibrary

__all__ = ["AcquireArgs", "AcquireKeys", "CapacityKeys", "CapacityScripts", "Grant",
           "ReleaseArgs", "ReleaseKeys", "Throttled", "ThrottledArgs", "ThrottledKeys"]


@dataclass(slots=True)
class CapacityKeys:
    state: str
    leases: str


@dataclass(slots=True)
class AcquireKeys:
    state: str
    leases: str
    waiting: str  # process -> 'n|expiry ms': requests waiting there
    queue: str  # waiting session -> its pass (fair share)
    queue_expiry: str  # waiting session -> when its registration lapses
    passes: str  # session -> its pass, kept between its waits
    scope_keys: tuple[str, ...]  # per spec scope: its state hash, its leases zset


@dataclass(slots=True)
class AcquireArgs:
    now_ms: int
    lease_ttl_ms: int
    declared_rpm: int
    declared_tpm: int
    declared_in_flight: int
    wait_cap_ms: int
    process: str
    waiting_here: int  # requests of this process waiting for the key
    candidates: str  # JSON [[session, weight, tokens, lease id, waiting here, scope], ...]
    scopes: str  # JSON [[rpm, tpm, in flight], ...]: scope i's keys are scopes[2i-2:2i]


@dataclass(slots=True)
class ReleaseKeys:
    state: str
    leases: str
    scope_state: str  # the request's spec scope (keys that do not exist when it has none)
    scope_leases: str


@dataclass(slots=True)
class ReleaseArgs:
    lease_id: str
    extra_tokens: int  # used minus estimated
    succeeded: int  # 0 | 1
    declared_rpm: int
    declared_in_flight: int
    renew_until_ms: int  # > 0: only extend the lease to this expiry
    told_rpm: int  # the requests-per-minute limit the provider named in its answer, 0 if none


@dataclass(slots=True)
class ThrottledKeys:
    state: str
    leases: str
    scope_leases: str


@dataclass(slots=True)
class ThrottledArgs:
    now_ms: int
    lease_id: str
    backoff_ms: int
    told_rpm: int  # the provider's own requests-per-minute limit, 0 if it did not say
    decrease: float
    min_rpm: int


@dataclass(frozen=True)
class Grant:
    granted: bool
    wait_ms: int
    reason: str  # why not: backoff, in_flight, requests_per_minute, tokens_per_minute,
    # fair_share, spec_in_flight, spec_requests_per_minute, spec_tokens_per_minute
    rpm: float  # requests per minute in force (0: none)
    in_flight_limit: int  # 0: none
    in_flight: int
    session: str = ""  # whose candidate was granted
    lease_id: str = ""
    learned_rpm: float = 0.0

    @classmethod
    def decode(cls, reply: Any) -> Grant:
        """capacity_acquire.lua: {granted 0|1, wait ms, reason, rpm in force, in-flight
        limit, in flight, granted session, granted lease id, learned rpm}."""
        return cls(granted=int(reply[0]) == 1, wait_ms=int(reply[1]), reason=as_str(reply[2]),
                   rpm=float(as_str(reply[3])), in_flight_limit=int(reply[4]),
                   in_flight=int(reply[5]), session=as_str(reply[6]),
                   lease_id=as_str(reply[7]), learned_rpm=float(as_str(reply[8])))


@dataclass(frozen=True)
class Throttled:
    """capacity_throttled.lua: {rpm in force, in-flight limit}."""

    rpm: float
    in_flight_limit: int

    @classmethod
    def decode(cls, reply: Any) -> Throttled:
        return cls(float(as_str(reply[0])), int(reply[1]))


class CapacityScripts(ScriptLibrary):
    async def capacity_acquire(self, *, keys: AcquireKeys, args: AcquireArgs) -> Grant:
        return Grant.decode(await self._call("capacity_acquire", keys, args))

    async def capacity_release(self, *, keys: ReleaseKeys, args: ReleaseArgs) -> int:
        return int(await self._call("capacity_release", keys, args) or 0)

    async def capacity_throttled(self, *, keys: ThrottledKeys, args: ThrottledArgs
                                 ) -> Throttled:
        return Throttled.decode(await self._call("capacity_throttled", keys, args))
