"""Provider capacity shared by the fleet: a model request waits for its key's turn
instead of meeting the account's limit alone.

Each live model turn of a step (a replayed one costs nothing) takes a lease on its
provider key (provider, model, host) from Redis (store/capacity.py): within the limits
the operator declared (DURABLE_CAPACITY_LIMITS), the lower ones its spec declared
(`runtime.capacity`) and those learned from throttling, after the fleet's shared backoff.
A throttled answer (429, Anthropic's 529, Bedrock's ThrottlingException) is not a
failure: the key backs off for the whole fleet (the provider's Retry-After, else a
second), its learned rate and concurrency shrink, and the turn waits and asks again.
Waiting costs no attempt, no `failure_policy` retry and no delivery; a turn that waited
DURABLE_CAPACITY_MAX_WAIT_S in all fails its step, naming the key and the limit.
Successes grow the learned limits back (AIMD), so the fleet settles just under the
account's limit.

Capacity goes round the sessions that wait for it (fair share, weighted by the priority
each was submitted with): in a process, one poller per key asks Redis for its waiting
requests together, one candidate per session, and the script picks.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import random
import socket
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from strands_durable import metrics
from strands_durable.errors import Unavailable
from strands_durable.models import PRIORITY_DEFAULT
from strands_durable.provider_policy import HOST_PROVIDERS, CapacityPolicy
from strands_durable.store.capacity import (
    Candidate,
    DeclaredLimits,
    Grant,
    ProviderKey,
    SpecScope,
)
from strands_durable.store.keys import is_session_id
from strands_durable.store.store import Store
from strands_durable.worker.providers.transient import Throttle

__all__ = ["CapacityExhausted", "CapacityGate", "Lease", "OnGranted", "OnWait",
           "poll_pause_s"]

log = logging.getLogger("durable.worker")

# Providers with an account to share; `scripted` has none.
LIMITED_PROVIDERS = frozenset(HOST_PROVIDERS)
REGISTER_EVERY_S = 3600.0  # a key in use is named in the fleet's list again this often
REGISTERED_KEPT = 1024  # keys whose naming a process remembers (the rest: named again)
DEFAULT_BACKOFF_S = 1.0  # a throttle that names no Retry-After
DECREASE = 0.7  # a throttle's multiplicative decrease of the learned limits
MIN_RPM = 1
WAIT_CAP_MS = 1_000  # the longest one sleep before asking again (others' leases end)
# How much later than advised a poller may ask again, at most (a fraction of the wait):
# enough that the fleet's pollers do not all ask in the same millisecond, little enough
# that the first of them is there when the capacity is: one that comes late leaves the
# request bucket full and idle (it holds one request), goodput lost for good.
POLL_JITTER = 0.05
CANDIDATES = 16  # sessions a process asks for at once (the rest in later turns)
PRIORITIES_KEPT = 10_000  # sessions whose priority a process remembers
ANONYMOUS = "-"  # requests of no session (a compaction's summary outside a step)
WOKEN_BY_RELEASE = frozenset({"in_flight", "fair_share", "spec_in_flight"})

# Told when a turn starts waiting: (the key's label, why, the advised wait in ms).
OnWait = Callable[[str, str, int], Awaitable[None]]
# Told when a turn that was told to wait has its turn: (the key's label, seconds waited).
OnGranted = Callable[[str, float], Awaitable[None]]


class CapacityExhausted(Unavailable):
    """A model request waited longer than DURABLE_CAPACITY_MAX_WAIT_S for its key."""

    code = "capacity_exhausted"


@dataclass(frozen=True)
class Lease:
    key: ProviderKey
    limits: DeclaredLimits
    lease_id: str
    estimated_tokens: int
    scope: SpecScope | None = None


@dataclass(eq=False)
class _Waiter:
    session: str
    weight: float
    estimate: int
    scope: SpecScope | None
    on_wait: OnWait | None
    lease_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    future: asyncio.Future[Grant] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())
    told: bool = False
    last: Grant | None = None  # the latest refusal


class _KeyQueue:
    """This process's waiters for one key, by session, sessions in turn."""

    def __init__(self) -> None:
        self.sessions: dict[str, deque[_Waiter]] = {}
        self.by_lease: dict[str, _Waiter] = {}
        self.poller: asyncio.Task[None] | None = None
        self.freed = asyncio.Event()

    def add(self, waiter: _Waiter) -> None:
        if waiter.session not in self.sessions:
            self.freed.set()  # a new session may be the one the fleet serves next
        self.sessions.setdefault(waiter.session, deque()).append(waiter)
        self.by_lease[waiter.lease_id] = waiter

    def remove(self, waiter: _Waiter) -> None:
        if self.by_lease.pop(waiter.lease_id, None) is None:
            return
        waiters = self.sessions[waiter.session]
        waiters.remove(waiter)
        if not waiters:
            del self.sessions[waiter.session]

    def served(self, waiter: _Waiter) -> None:
        """Granted: out of the queue, and its session goes to the back of the turn."""
        self.remove(waiter)
        if waiter.session in self.sessions:
            self.sessions[waiter.session] = self.sessions.pop(waiter.session)

    def candidates(self) -> list[Candidate]:
        return [Candidate(session, w.lease_id, w.estimate, w.weight, len(waiters), w.scope)
                for session, waiters in itertools.islice(self.sessions.items(), CANDIDATES)
                for w in (waiters[0],)]


class CapacityGate:
    """One per worker process: takes and gives back leases on provider keys."""

    def __init__(self, store: Store, policy: CapacityPolicy, process: str = "") -> None:
        self.store = store
        self.policy = policy
        # Named in the fleet's view of who waits (a worker names it its consumer).
        self.process = process or f"{socket.gethostname()[:64]}-{os.getpid()}"
        # Key digest -> when this process last named it in the fleet's list (monotonic).
        self._registered: OrderedDict[str, float] = OrderedDict()
        self._queues: dict[str, _KeyQueue] = {}
        self._weights: OrderedDict[str, float] = OrderedDict()
        self._told: set[asyncio.Task[None]] = set()

    def applies_to(self, provider: str) -> bool:
        return self.policy.capacity_enabled and provider in LIMITED_PROVIDERS

    def limits(self, key: ProviderKey) -> DeclaredLimits:
        declared = self.policy.declared(key.provider, key.model, key.host)
        if declared is None:
            return DeclaredLimits()
        return DeclaredLimits(declared.rpm, declared.tpm, declared.in_flight)

    def waiting(self, key: ProviderKey) -> int:
        queue = self._queues.get(key.digest)
        return len(queue.by_lease) if queue else 0

    async def weight(self, session_id: str) -> float:
        """The session's share: its priority over the default's, times its namespace's
        weight in fair dispatch (read once per process)."""
        if not session_id or session_id == ANONYMOUS or not is_session_id(session_id):
            return 1.0
        weight = self._weights.get(session_id)
        if weight is None:
            priority, namespace = await self.store.capacity_share(session_id)
            weight = ((priority or PRIORITY_DEFAULT) / PRIORITY_DEFAULT
                      * self.store.fair_weight(namespace))
            self._weights[session_id] = weight
            if len(self._weights) > PRIORITIES_KEPT:
                self._weights.popitem(last=False)
        return weight

    async def acquire(self, key: ProviderKey, estimated_tokens: int, waited_s: float,
                      on_wait: OnWait | None, session: str = "",
                      scope: SpecScope | None = None) -> tuple[Lease, float]:
        """A lease on `key`, after waiting as long as the fleet's state says; the time
        waited in all (with `waited_s` before); CapacityExhausted past the bound."""
        await self._register(key)
        started = time.monotonic()
        waiter = _Waiter(session or ANONYMOUS, await self.weight(session), estimated_tokens,
                         scope, on_wait)
        queue = self._queues.setdefault(key.digest, _KeyQueue())
        queue.add(waiter)
        if queue.poller is None:
            queue.poller = asyncio.create_task(self._poll(key, queue))
        metrics.capacity_waiting(key.provider, key.model, 1)
        try:
            grant = await self._granted(key, queue, waiter,
                                        self.policy.capacity_max_wait_s - waited_s)
        finally:
            metrics.capacity_waiting(key.provider, key.model, -1)
        waited = waited_s + time.monotonic() - started
        if waited > 0:
            metrics.capacity_waited(key.provider, key.model, waited)
        metrics.capacity_in_flight(key.provider, key.model, 1)
        return Lease(key, self.limits(key), grant.lease_id, estimated_tokens, scope), waited

    async def _register(self, key: ProviderKey) -> None:
        """Name `key` in the fleet's list once an hour while this process uses it (the
        list drops a key unused for a day); a bounded memory of the keys named."""
        named = self._registered.get(key.digest)
        if named is not None and time.monotonic() - named < REGISTER_EVERY_S:
            return
        await self.store.capacity_register(key)
        self._registered[key.digest] = time.monotonic()
        self._registered.move_to_end(key.digest)
        while len(self._registered) > REGISTERED_KEPT:
            self._registered.popitem(last=False)

    async def _granted(self, key: ProviderKey, queue: _KeyQueue, waiter: _Waiter,
                       left_s: float) -> Grant:
        try:
            try:
                return await asyncio.wait_for(asyncio.shield(waiter.future), max(0.0, left_s))
            except TimeoutError:
                if waiter.future.done() and waiter.future.exception() is None:
                    return waiter.future.result()  # its turn came as the time ran out
                raise self._exhausted(key, waiter) from None
        except BaseException:
            queue.remove(waiter)
            future = waiter.future
            if future.done() and not future.cancelled() and future.exception() is None:
                await asyncio.shield(self.store.capacity_release(
                    key, self.limits(key), future.result().lease_id, 0, False, waiter.scope))
            future.cancel()
            raise

    def _exhausted(self, key: ProviderKey, waiter: _Waiter) -> CapacityExhausted:
        grant = waiter.last
        why = (f"{_reason_text(grant.reason)}; {grant.rpm:g} requests/min and "
               f"{grant.in_flight_limit or 'no'} at once in force" if grant else "no turn yet")
        return CapacityExhausted(
            f"{key.label}: waited {self.policy.capacity_max_wait_s:g}s for provider capacity "
            f"({why}), past DURABLE_CAPACITY_MAX_WAIT_S="
            f"{self.policy.capacity_max_wait_s:g}")

    async def _poll(self, key: ProviderKey, queue: _KeyQueue) -> None:
        """Ask for this process's waiters of `key` until none is left: a grant goes to
        its waiter at once, a refusal tells each waiter once and waits as advised."""
        limits = self.limits(key)
        ttl_ms = int(self.policy.capacity_lease_s * 1000)
        try:
            while queue.by_lease:
                queue.freed.clear()
                candidates = queue.candidates()
                asked = {c.lease_id: c.scope for c in candidates}
                grant = await self.store.capacity_acquire(
                    key, limits, candidates, ttl_ms, WAIT_CAP_MS, self.process,
                    len(queue.by_lease))
                metrics.capacity_state(key.provider, key.model, grant.rpm,
                                       grant.in_flight_limit, grant.learned_rpm)
                if grant.granted:
                    await self._hand_over(key, queue, grant, asked.get(grant.lease_id))
                    continue
                self._tell(key, queue, grant)
                pause = poll_pause_s(grant.wait_ms, random.random())
                if grant.reason in WOKEN_BY_RELEASE:  # a lease given back here ends it
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(queue.freed.wait(), pause)
                else:
                    await asyncio.sleep(pause)
        except Exception as exc:  # Redis gone past its outage bound: every waiter fails
            for waiter in list(queue.by_lease.values()):
                queue.remove(waiter)
                if not waiter.future.done():
                    waiter.future.set_exception(exc)
        finally:
            queue.poller = None
            # Nothing is kept for a key no request of this process waits for: specs may
            # name models without end.
            if not queue.by_lease and self._queues.get(key.digest) is queue:
                del self._queues[key.digest]

    async def _hand_over(self, key: ProviderKey, queue: _KeyQueue, grant: Grant,
                         scope: SpecScope | None) -> None:
        waiter = queue.by_lease.get(grant.lease_id)
        if waiter is None or waiter.future.done():  # it stopped waiting meanwhile
            await self.store.capacity_release(key, self.limits(key), grant.lease_id, 0, False,
                                              scope)
            return
        queue.served(waiter)
        waiter.future.set_result(grant)

    def _tell(self, key: ProviderKey, queue: _KeyQueue, grant: Grant) -> None:
        for waiter in queue.by_lease.values():
            waiter.last = grant
            if waiter.told or waiter.on_wait is None:
                continue
            waiter.told = True
            task = asyncio.create_task(_told(waiter.on_wait, key.label, grant))
            self._told.add(task)
            task.add_done_callback(self._told.discard)

    async def renew(self, lease: Lease) -> None:
        until = int(time.time() * 1000 + self.policy.capacity_lease_s * 1000)
        await self.store.capacity_renew(lease.key, lease.lease_id, until, lease.scope)

    async def release(self, lease: Lease, used_tokens: int | None, succeeded: bool,
                      told_rpm: int | None = None) -> None:
        """Give the lease back; `told_rpm`: the requests-a-minute limit the provider named
        in its answer (worker/providers/told.py), believed as a throttle's is."""
        extra = 0 if used_tokens is None else used_tokens - lease.estimated_tokens
        metrics.capacity_in_flight(lease.key.provider, lease.key.model, -1)
        try:
            await self.store.capacity_release(lease.key, lease.limits, lease.lease_id, extra,
                                              succeeded, lease.scope, told_rpm or 0)
        finally:
            if (queue := self._queues.get(lease.key.digest)) is not None:
                queue.freed.set()

    async def throttled(self, lease: Lease, throttle: Throttle) -> None:
        backoff_s = throttle.retry_after_s if throttle.retry_after_s is not None else \
            DEFAULT_BACKOFF_S
        metrics.capacity_throttled(lease.key.provider, lease.key.model)
        metrics.capacity_in_flight(lease.key.provider, lease.key.model, -1)
        rpm, in_flight = await self.store.capacity_throttled(
            lease.key, lease.lease_id, int(backoff_s * 1000), throttle.limit_rpm or 0,
            DECREASE, MIN_RPM, lease.scope)
        log.info("%s throttled: the fleet backs off %.2fs; now %g requests/min, %d at once",
                 lease.key.label, backoff_s, rpm, in_flight)


def poll_pause_s(wait_ms: int, draw: float) -> float:
    """How long a poller sleeps when told to wait `wait_ms`: that, and a jitter of at
    most POLL_JITTER of it (`draw`: uniform in [0, 1)), never less than advised."""
    return wait_ms / 1000 * (1.0 + POLL_JITTER * min(max(draw, 0.0), 1.0))


async def _told(on_wait: OnWait, label: str, grant: Grant) -> None:
    try:
        await on_wait(label, grant.reason, grant.wait_ms)
    except Exception as exc:  # the event is a courtesy: the wait goes on without it
        log.debug("capacity wait event not written: %r", exc)


def _reason_text(reason: str) -> str:
    return {"backoff": "the provider asked the fleet to back off",
            "in_flight": "the requests-at-once limit",
            "requests_per_minute": "the requests-per-minute limit",
            "tokens_per_minute": "the tokens-per-minute limit",
            "fair_share": "other sessions' turns (fair share)",
            "spec_in_flight": "the spec's runtime.capacity.in_flight",
            "spec_requests_per_minute": "the spec's runtime.capacity.rpm",
            "spec_tokens_per_minute": "the spec's runtime.capacity.tpm"}.get(reason, reason)
