"""Riding out a Redis outage (restart, failover, network blip) instead of failing.

`OutageRetry` is a redis-py `Retry` given to every connection of a worker's clients (the
store's and arq's own): a command that meets a dropped connection, a refused connect, a
timeout or a replica that just lost its master role waits, reconnecting with jittered
exponential backoff, and runs again once Redis answers. The caller sees a slow command,
not an error, so no loop of the worker (arq's queue poll and health check, our
XREADGROUP, lease renewal, heartbeat, timers, commits) has to survive an exception.

Retrying a command whose reply was lost is safe for what a worker sends: the Lua
scripts are fenced (a commit retried after it applied finds its entry acknowledged and
returns `stale`; its events are not written twice), the rest are reads or idempotent
writes (HSET of a heartbeat, XACK).

On a Redis Cluster (store/cluster_client.py) the same OutageRetry wraps each whole
command and pipeline instead of each connection: a retry must be free to go to another
node (the promoted replica), which redis-py finds by refreshing its slot map; a cluster
between topologies (CLUSTERDOWN, TRYAGAIN, redirects that never settle) is reported as a
ConnectionError and ridden out like a lost connection.

A primary configured with `min-replicas-to-write` refuses every write while too few of
its replicas are in sync (`NOREPLICAS`, after a replica stopped or was cut off). redis-py
has no class for that reply; this module registers `NoReplicasError` (a ResponseError) in
its parser's table, and it counts as an outage everywhere one is handled: a worker
retries, the API answers 503, the scheduler's loop waits. Nothing is half-applied: Redis
refuses a plain write before running it, and a script at its first write, so a refused
script wrote nothing (the status does not change while a script runs).

`RedisOutage` is the process's view, shared by all its clients: it logs one line when
an outage starts and one when it ends (not one per retry; it ends once no command is
retrying, not at the first success: reads answer while writes are refused, and a
cluster's other nodes while one fails over), counts outages and their
seconds for /metrics, and past `limit_s` hands a one-line reason to `on_give_up` (the
worker logs it and exits non-zero).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import ssl
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, NoReturn, TypeVar

from redis._parsers.base import BaseParser
from redis.asyncio.cluster import ClusterParser as AsyncClusterParser
from redis.asyncio.connection import ConnectionPool
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import SentinelConnectionPool
from redis.backoff import EqualJitterBackoff
from redis.cluster import ClusterParser
from redis.exceptions import (
    AuthenticationError,
    AuthorizationError,
    ReadOnlyError,
    RedisError,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from strands_durable.errors import Unavailable
from strands_durable.store.pool import QuickCheckout

log = logging.getLogger("durable.redis")

T = TypeVar("T")


class NoReplicasError(ResponseError):
    """NOREPLICAS: the primary refuses writes until enough replicas are in sync again
    (min-replicas-to-write / min-replicas-max-lag); nothing of the command was applied."""

    def __init__(self, *args: Any) -> None:
        # redis-py strips the error code; keep it so the message reads as Redis wrote it.
        if args and isinstance(args[0], str) and not args[0].startswith("NOREPLICAS"):
            args = (f"NOREPLICAS {args[0]}", *args[1:])
        super().__init__(*args)


# Every parser (RESP2, RESP3, hiredis; sync and asyncio) reads the first table; the
# cluster clients' parsers read copies made when redis-py was imported.
for _table in (BaseParser.EXCEPTION_CLASSES, ClusterParser.EXCEPTION_CLASSES,
               AsyncClusterParser.EXCEPTION_CLASSES):
    _table.setdefault("NOREPLICAS", NoReplicasError)

# ConnectionError covers refused connects, dropped connections, LOADING after a restart
# and Sentinel's "no master"; a ReadOnlyError is a failover seen through a plain URL (the
# retry reconnects, and DNS or a proxy leads to the new master); NOREPLICAS is a primary
# waiting for its replica.
OUTAGE_ERRORS: tuple[type[RedisError], ...] = (RedisConnectionError, RedisTimeoutError,
                                               ReadOnlyError, NoReplicasError)
# Redis unusable, as redis-py reports it to a caller (the API answers 503).
REDIS_DOWN: tuple[type[Exception], ...] = (RedisConnectionError, RedisTimeoutError,
                                           NoReplicasError)
# ... and as a long-running loop (a worker's, the scheduler's) meets it: a socket error
# can also escape while a connection is torn down.
REDIS_DOWN_IN_LOOP: tuple[type[Exception], ...] = (*REDIS_DOWN, OSError)
BACKOFF_BASE_S = 0.05
_depth: ContextVar[int] = ContextVar("durable_redis_retry_depth", default=0)
BACKOFF_CAP_S = 2.0


class RedisOutageExceeded(Unavailable):
    """Redis stayed unreachable past the limit (raised where no `on_give_up` exits)."""

    code = "redis_unavailable"


class RedisOutage:
    def __init__(self, limit_s: float, where: str, *,
                 on_give_up: Callable[[str], NoReturn] | None = None,
                 announce: Callable[[int, str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limit_s = limit_s
        self.where = where  # the redacted URL
        self.on_give_up = on_give_up
        self.announce = announce or (lambda level, message: log.log(level, message))
        self.clock = clock
        self.down_since: float | None = None
        self.outages = 0
        self.past_down_s = 0.0  # seconds of the outages that ended
        self.waiting = 0  # commands retrying now: the outage ends once none is left
        self.stopping = False

    @property
    def up(self) -> bool:
        return self.down_since is None

    @property
    def current_down_s(self) -> float:
        return 0.0 if self.down_since is None else self.clock() - self.down_since

    @property
    def total_down_s(self) -> float:
        return self.past_down_s + self.current_down_s

    def failed(self, error: BaseException) -> None:
        """A command met `error`: the first of an outage is announced; past the limit,
        or once the process is stopping, give up."""
        now = self.clock()
        if self.down_since is None:
            self.down_since = now
            self.outages += 1
            # No limit: a process that never gives up on Redis (the scheduler's loops).
            waiting = (f"waiting up to {self.limit_s:g}s for it, reconnecting with backoff"
                       if math.isfinite(self.limit_s) else "retrying until it is back")
            self.announce(logging.WARNING,
                          f"Redis at {self.where} is unavailable ({_describe(error)}); "
                          f"{waiting}")
        if self.stopping:
            self.give_up(f"stopping while Redis at {self.where} is unavailable "
                         f"({_describe(error)}); running steps stay pending for another "
                         "worker")
        elif now - self.down_since > self.limit_s:
            self.give_up(f"Redis at {self.where} unavailable for {now - self.down_since:.0f}s, "
                         f"past DURABLE_REDIS_OUTAGE_S={self.limit_s:g}: exiting "
                         f"({_describe(error)})")

    def recovered(self) -> None:
        if self.down_since is None:
            return
        took = self.clock() - self.down_since
        self.down_since = None
        self.past_down_s += took
        self.announce(logging.INFO, f"Redis at {self.where} is back after {took:.1f}s")

    def stop(self) -> None:
        """The process is shutting down: stop waiting for Redis (at once if it is down)."""
        self.stopping = True
        if self.down_since is not None:
            self.give_up(f"stopping while Redis at {self.where} is unavailable; running "
                         "steps stay pending for another worker")

    def refused(self, error: BaseException) -> None:
        self.give_up(f"Redis at {self.where} refused this worker ({_describe(error)}); "
                     "check the user, password and TLS options of DURABLE_REDIS_URL")

    def give_up(self, reason: str) -> None:
        if self.on_give_up is not None:
            self.on_give_up(reason)
        raise RedisOutageExceeded(reason)


class OutageRetry(Retry):
    """Retry every command through an outage (see the module docstring). One instance is
    shared by all the connections of a client: redis-py deep-copies a Retry per
    connection, so copies return the same object."""

    def __init__(self, outage: RedisOutage) -> None:
        super().__init__(EqualJitterBackoff(cap=BACKOFF_CAP_S, base=BACKOFF_BASE_S),
                         retries=-1, supported_errors=OUTAGE_ERRORS)
        self.outage = outage

    def __deepcopy__(self, memo: dict[int, Any]) -> OutageRetry:
        return self

    def update_supported_errors(self, specified_errors: list[Any]) -> None:
        return None  # exactly OUTAGE_ERRORS: a connection's retry_on_error adds nothing

    async def call_with_retry(self, do: Callable[[], Awaitable[T]],
                              fail: Callable[[Any], Any], *, confirms: bool = True) -> T:
        """Run `do` until it succeeds. Only a command's success ends an outage: a connect
        (nested in a command's retry, or the pool's) also succeeds against a Redis still
        loading its data after a restart, whose next command answers LOADING."""
        outermost = _depth.get() == 0
        token = _depth.set(_depth.get() + 1)
        try:
            result = await self._until_done(do, fail, outermost)
        finally:
            _depth.reset(token)
        # Not while another command still waits: reads answer while a primary refuses
        # writes (NOREPLICAS), other nodes while one fails over.
        if outermost and confirms and self.outage.waiting == 0:
            self.outage.recovered()
        return result

    async def _until_done(self, do: Callable[[], Awaitable[T]], fail: Callable[[Any], Any],
                          counted: bool) -> T:
        """`counted` (an outermost call): while it retries, it is one of the outage's
        waiting commands."""
        failures = 0
        try:
            while True:
                try:
                    return await do()
                except OUTAGE_ERRORS as error:
                    # `fail` closes the connection; it re-raises errors the connection was
                    # not told to retry, which a client built by `outage_client_kwargs`
                    # never has.
                    with contextlib.suppress(*OUTAGE_ERRORS, OSError):
                        await fail(error)
                    if _refused(error):
                        self.outage.refused(error)
                    if failures == 0 and counted:
                        self.outage.waiting += 1
                    failures += 1
                    self.outage.failed(error)
                    await asyncio.sleep(self._backoff.compute(failures))
        finally:
            if failures and counted:
                self.outage.waiting -= 1


async def _nothing_to_undo(error: BaseException) -> None:
    return None


class _RidesOutOutages:
    """A pool whose `get_connection` (which connects, authenticates and selects the db,
    outside any command's retry) waits through an outage like the commands do."""

    connection_kwargs: dict[str, Any]

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        retry: OutageRetry = self.connection_kwargs["retry"]
        parent = super().get_connection
        return await retry.call_with_retry(lambda: parent(*args, **kwargs), _nothing_to_undo,
                                           confirms=False)


# A clean idle connection goes out at once (store/pool.py); only a connection that
# must be (re)opened goes through the outage's retry.
class OutageConnectionPool(QuickCheckout, _RidesOutOutages, ConnectionPool):
    pass


class OutageSentinelConnectionPool(QuickCheckout, _RidesOutOutages, SentinelConnectionPool):
    pass


def outage_client_kwargs(outage: RedisOutage) -> dict[str, Any]:
    """Client keyword arguments (for `async_redis_client`, `open_store`) that make a
    client ride out outages: its pools and every connection's commands."""
    return {"retry": OutageRetry(outage), "retry_on_error": list(OUTAGE_ERRORS),
            "pool_class": OutageConnectionPool,
            "sentinel_pool_class": OutageSentinelConnectionPool}


def _refused(error: BaseException) -> bool:
    """Redis answered and said no (credentials, ACL, a certificate it or we do not
    trust): waiting will not change that."""
    return isinstance(error, AuthenticationError | AuthorizationError) or isinstance(
        error.__context__, ssl.SSLCertVerificationError)


def _describe(error: BaseException) -> str:
    text = str(error).strip() or "no detail"
    return f"{error.__class__.__name__}: {text}"
