"""Provider capacity shared by the fleet: a model request waits for its key's turn
instead of meeting the account's limit alone.

Each live model turn of a step (a replayed one costs nothing) takes a lease on its
provider key (provider, model, host) from Redis (store/capacity.py): within the limits
the operator declared (DURABLE_CAPACITY_LIMITS) and those learned from throttling, after
the fleet's shared backoff. A throttled answer (429, Anthropic's 529, Bedrock's
ThrottlingException) is not a failure: the key backs off for the whole fleet (the
provider's Retry-After, else a second), its learned rate and concurrency shrink, and the
turn waits and asks again. Waiting costs no attempt, no `failure_policy` retry and no
delivery; a turn that waited DURABLE_CAPACITY_MAX_WAIT_S in all fails its step, naming
the key and the limit. Successes grow the learned limits back (AIMD), so the fleet
settles just under the account's limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from strands.models.model import Model
from strands.types.content import Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolSpec

from strands_durable import metrics
from strands_durable.errors import Unavailable
from strands_durable.provider_policy import CapacityPolicy
from strands_durable.store.capacity import DeclaredLimits, ProviderKey
from strands_durable.store.store import Store
from strands_durable.worker.model_wrapper import ModelWrapper
from strands_durable.worker.providers.transient import Throttle, throttle_of

__all__ = ["CapacityExhausted", "CapacityGate", "CapacityModel", "Lease", "estimate_tokens"]

log = logging.getLogger("durable.worker")

# Providers with an account to share; `scripted` has none.
LIMITED_PROVIDERS = frozenset({"openai", "anthropic", "gemini", "bedrock", "litellm", "ollama",
                               "llamacpp"})
DEFAULT_BACKOFF_S = 1.0  # a throttle that names no Retry-After
DECREASE = 0.7  # a throttle's multiplicative decrease of the learned limits
MIN_RPM = 1
WAIT_CAP_MS = 1_000  # the longest one sleep before asking again (others' leases end)
OUTPUT_ESTIMATE = 512  # tokens a reply is assumed to take before its usage is known

# Told when a turn starts waiting: (the key's label, why, the advised wait in ms).
OnWait = Callable[[str, str, int], Awaitable[None]]


class CapacityExhausted(Unavailable):
    """A model request waited longer than DURABLE_CAPACITY_MAX_WAIT_S for its key."""

    code = "capacity_exhausted"


@dataclass(frozen=True)
class Lease:
    key: ProviderKey
    limits: DeclaredLimits
    lease_id: str
    estimated_tokens: int


def estimate_tokens(messages: Messages, system_prompt: str | None, max_tokens: int | None
                    ) -> int:
    """A request's tokens before the provider counts them: about four characters a token
    of what is sent, and the reply's ceiling (or a typical reply)."""
    sent = len(json.dumps(messages, default=str)) + len(system_prompt or "")
    return sent // 4 + (max_tokens or OUTPUT_ESTIMATE)


class CapacityGate:
    """One per worker process: takes and gives back leases on provider keys."""

    def __init__(self, store: Store, policy: CapacityPolicy) -> None:
        self.store = store
        self.policy = policy
        self._registered: set[str] = set()
        # Per key, this process's waiters queue here and only the first asks Redis: the
        # fleet's pollers are one per process, not one per waiting step, and they are
        # served in turn. A lease given back here wakes the first at once.
        self._turns: dict[str, asyncio.Lock] = {}
        self._freed: dict[str, asyncio.Event] = {}

    def applies_to(self, provider: str) -> bool:
        return self.policy.capacity_enabled and provider in LIMITED_PROVIDERS

    def limits(self, key: ProviderKey) -> DeclaredLimits:
        declared = self.policy.declared(key.provider, key.model, key.host)
        if declared is None:
            return DeclaredLimits()
        return DeclaredLimits(declared.rpm, declared.tpm, declared.in_flight)

    async def acquire(self, key: ProviderKey, estimated_tokens: int, waited_s: float,
                      on_wait: OnWait | None) -> tuple[Lease, float]:
        """A lease on `key`, after waiting as long as the fleet's state says; the time
        waited in all (with `waited_s` before); CapacityExhausted past the bound."""
        if key.digest not in self._registered:
            await self.store.capacity_register(key)
            self._registered.add(key.digest)
        started = time.monotonic()
        metrics.capacity_waiting(key.provider, key.model, 1)
        try:
            async with self._turns.setdefault(key.digest, asyncio.Lock()):
                return await self._ask(key, estimated_tokens, waited_s, on_wait, started)
        finally:
            metrics.capacity_waiting(key.provider, key.model, -1)

    async def _ask(self, key: ProviderKey, estimated_tokens: int, waited_s: float,
                   on_wait: OnWait | None, started: float) -> tuple[Lease, float]:
        limits = self.limits(key)
        lease_id = uuid.uuid4().hex
        ttl_ms = int(self.policy.capacity_lease_s * 1000)
        freed = self._freed.setdefault(key.digest, asyncio.Event())
        told = False
        while True:
            freed.clear()
            grant = await self.store.capacity_acquire(key, limits, lease_id, ttl_ms,
                                                      estimated_tokens, WAIT_CAP_MS)
            metrics.capacity_state(key.provider, key.model, grant.rpm, grant.in_flight_limit)
            waited = waited_s + time.monotonic() - started
            if grant.granted:
                if waited > 0:
                    metrics.capacity_waited(key.provider, key.model, waited)
                return Lease(key, limits, lease_id, estimated_tokens), waited
            if waited >= self.policy.capacity_max_wait_s:
                raise CapacityExhausted(
                    f"{key.label}: waited {waited:.0f}s for provider capacity "
                    f"({_reason_text(grant.reason)}; {grant.rpm:g} requests/min and "
                    f"{grant.in_flight_limit or 'no'} at once in force), past "
                    f"DURABLE_CAPACITY_MAX_WAIT_S={self.policy.capacity_max_wait_s:g}")
            if not told and on_wait is not None:
                told = True
                await on_wait(key.label, grant.reason, grant.wait_ms)
            # Jitter: the fleet's processes do not ask again all at once.
            pause = grant.wait_ms / 1000 * random.uniform(1.0, 1.25)
            if grant.reason == "in_flight":  # a lease given back here ends the wait
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(freed.wait(), pause)
            else:
                await asyncio.sleep(pause)

    async def renew(self, lease: Lease) -> None:
        until = int(time.time() * 1000 + self.policy.capacity_lease_s * 1000)
        await self.store.capacity_renew(lease.key, lease.lease_id, until)

    async def release(self, lease: Lease, used_tokens: int | None, succeeded: bool) -> None:
        extra = 0 if used_tokens is None else used_tokens - lease.estimated_tokens
        try:
            await self.store.capacity_release(lease.key, lease.limits, lease.lease_id, extra,
                                              succeeded)
        finally:
            if (freed := self._freed.get(lease.key.digest)) is not None:
                freed.set()

    async def throttled(self, lease: Lease, throttle: Throttle) -> None:
        backoff_s = throttle.retry_after_s if throttle.retry_after_s is not None else \
            DEFAULT_BACKOFF_S
        metrics.capacity_throttled(lease.key.provider, lease.key.model)
        rpm, in_flight = await self.store.capacity_throttled(
            lease.key, lease.lease_id, int(backoff_s * 1000), throttle.limit_rpm or 0,
            DECREASE, MIN_RPM)
        log.info("%s throttled: the fleet backs off %.2fs; now %g requests/min, %d at once",
                 lease.key.label, backoff_s, rpm, in_flight)


def _reason_text(reason: str) -> str:
    return {"backoff": "the provider asked the fleet to back off",
            "in_flight": "the requests-at-once limit",
            "requests_per_minute": "the requests-per-minute limit",
            "tokens_per_minute": "the tokens-per-minute limit"}.get(reason, reason)


class CapacityModel(ModelWrapper):
    """A provider model whose every request takes its turn on the fleet's capacity."""

    def __init__(self, inner: Model, gate: CapacityGate, key: ProviderKey,
                 max_tokens: int | None = None, on_wait: OnWait | None = None) -> None:
        super().__init__(inner)
        self.gate = gate
        self.key = key
        self.max_tokens = max_tokens
        self.on_wait = on_wait

    async def stream(self, messages: Messages, tool_specs: list[ToolSpec] | None = None,
                     system_prompt: str | None = None,
                     **kwargs: Any) -> AsyncGenerator[StreamEvent, None]:
        estimate = estimate_tokens(messages, system_prompt, self.max_tokens)
        waited = 0.0
        while True:
            lease, waited = await self.gate.acquire(self.key, estimate, waited, self.on_wait)
            started = time.monotonic()
            renewing = asyncio.create_task(self._keep(lease))
            answered = False
            used: int | None = None
            try:
                async for event in self.inner.stream(messages, tool_specs, system_prompt,
                                                     **kwargs):
                    answered = True
                    used = _usage(event) if used is None else used
                    yield event
            except Exception as exc:
                renewing.cancel()
                throttle = None if answered else throttle_of(exc)
                if throttle is None:
                    await self.gate.release(lease, used, succeeded=False)
                    raise
                await self.gate.throttled(lease, throttle)
                # The time the refused request took counts as waiting too.
                waited += time.monotonic() - started
                continue
            except BaseException:  # cancelled, or the consumer stopped reading
                renewing.cancel()
                await asyncio.shield(self.gate.release(lease, used, succeeded=False))
                raise
            renewing.cancel()
            await self.gate.release(lease, used, succeeded=True)
            return

    async def _keep(self, lease: Lease) -> None:
        """Renew the lease while the request runs: a dead worker's lapses on its own."""
        period = self.gate.policy.capacity_lease_s / 3
        while True:
            await asyncio.sleep(period)
            try:
                await self.gate.renew(lease)
            except Exception as exc:  # a Redis blip: the next renewal may work
                log.debug("capacity lease renewal failed: %r", exc)


def _usage(event: StreamEvent) -> int | None:
    usage = event.get("metadata", {}).get("usage") if isinstance(event, dict) else None
    if not isinstance(usage, dict):
        return None
    total = usage.get("totalTokens")
    if isinstance(total, int):
        return total
    parts = [usage.get("inputTokens"), usage.get("outputTokens")]
    return sum(p for p in parts if isinstance(p, int)) if any(
        isinstance(p, int) for p in parts) else None
