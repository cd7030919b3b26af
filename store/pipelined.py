"""The scripts' connection: many commands in flight on one connection, replies matched
to callers in order (Redis answers a connection's commands in the order they came).

redis-py gives each command a connection of its pool for the whole round trip: a
checkout, a timer for the read, a task woken by its stream reader, a check-in. A worker
runs one script call per step, from up to DURABLE_WORKER_CONCURRENCY steps at once:
through one pipelined connection the call is a write, and its reply is handed to the
caller straight from the protocol's `data_received` (a quarter of a no-op step's CPU
less, measured in bench/).

The connection is one of the client's pool (so it is opened, authenticated and closed
as the pool's are: `Redis.aclose()` closes it too), taken over after its handshake.
Errors are redis-py's: a reply error raises the class redis-py's parser gives it
(NoScriptError, ReadOnlyError, ...); a connection lost, a reply later than the socket
timeout, or a reply nobody asked for closes the connection, fails every command waiting
on it with ConnectionError or TimeoutError, and the next command opens a new one. Each
command runs under the connection's own retry (a worker's rides out Redis outages,
store/outage.py), as redis-py runs it.

Only for a single Redis: a cluster client routes each command to its slot's node and a
Sentinel-managed connection follows failovers, so both keep redis-py's path.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Sequence
from typing import Any, cast

from hiredis import Reader
from redis._parsers.base import BaseParser
from redis.asyncio import Redis
from redis.asyncio.connection import (
    AbstractConnection,
    Connection,
    ConnectionPool,
    SSLConnection,
    UnixDomainSocketConnection,
)
from redis.commands.core import AsyncScript
from redis.exceptions import (
    BusyLoadingError,
    InvalidResponse,
    NoScriptError,
    ReadOnlyError,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

# Connections that talk to one fixed server (not SentinelManagedConnection).
_PLAIN = (Connection, SSLConnection, UnixDomainSocketConnection)
_INCOMPLETE = object()  # hiredis's "no whole reply buffered yet"
# What a connection's transport must offer to be taken over (the protocol swapped in).
_TRANSPORT_CALLS = ("get_protocol", "set_protocol", "writelines", "is_closing", "abort")


class _Link(asyncio.Protocol):
    """One open connection: the callers' futures, oldest first."""

    def __init__(self, connection: AbstractConnection, transport: asyncio.Transport,
                 former: asyncio.BaseProtocol, timeout: float | None) -> None:
        encoder = connection.encoder
        options: dict[str, Any] = {"protocolError": InvalidResponse,
                                   "replyError": BaseParser.parse_error,
                                   "notEnoughData": _INCOMPLETE}
        if encoder.decode_responses:
            options.update(encoding=encoder.encoding, errors=encoder.encoding_errors)
        self.reader = Reader(**options)
        self.transport = transport
        # The stream protocol redis-py opened the connection with: told when it closes,
        # so redis-py's own disconnect (the pool's, Redis.aclose) does not wait forever.
        self.former = former
        self.where = f"{getattr(connection, 'host', '')}:{getattr(connection, 'port', '')}"
        self.timeout = timeout
        self.loop = asyncio.get_running_loop()
        self.waiting: collections.deque[tuple[asyncio.Future[Any], float]] = (
            collections.deque())
        self.closed = False
        self._watchdog: asyncio.TimerHandle | None = None
        self._writable: asyncio.Future[None] | None = None

    async def request(self, packed: list[bytes]) -> Any:
        if self._writable is not None:  # the transport's buffer is past its high-water mark
            try:
                await asyncio.wait_for(asyncio.shield(self._writable), self.timeout)
            except TimeoutError:
                self.close(RedisTimeoutError(f"Timeout writing to {self.where}"))
        if self.closed or self.transport.is_closing():
            raise RedisConnectionError(f"Connection to {self.where} closed")
        reply: asyncio.Future[Any] = self.loop.create_future()
        now = self.loop.time()
        self.waiting.append((reply, now))
        self.transport.writelines(packed)
        if self._watchdog is None and self.timeout is not None:
            self._watchdog = self.loop.call_at(now + self.timeout, self._check_deadline)
        try:
            return await reply
        except (ReadOnlyError, BusyLoadingError) as error:
            # Redis answered as a replica, or while loading: as redis-py, drop this
            # connection (the next one may reach the primary); the other callers on it
            # are told and retried. A reply error of one command alone (NOREPLICAS, a
            # script's error) leaves it be.
            self.close(RedisConnectionError(f"Connection to {self.where} dropped: {error}"))
            raise

    def _check_deadline(self) -> None:
        """Past the socket timeout with the oldest reply still due: the connection is
        gone (or Redis is stuck), as redis-py would take it."""
        self._watchdog = None
        if self.closed or not self.waiting or self.timeout is None:
            return
        due = self.waiting[0][1] + self.timeout
        if self.loop.time() >= due:
            self.close(RedisTimeoutError(f"Timeout reading from {self.where}"))
        else:
            self._watchdog = self.loop.call_at(due, self._check_deadline)

    # -- asyncio.Protocol ---------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while not self.closed:
            try:
                reply = self.reader.gets()
            except InvalidResponse as exc:
                self.close(RedisConnectionError(f"Protocol error from {self.where}: {exc}"))
                return
            if reply is _INCOMPLETE:
                return
            if not self.waiting:
                self.close(RedisConnectionError(f"{self.where} sent a reply nobody asked for"))
                return
            future, _ = self.waiting.popleft()
            if future.done():  # its caller was cancelled: the reply is dropped
                continue
            error = _error_in(reply)
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(reply)

    def eof_received(self) -> bool:
        return False  # the transport closes; connection_lost fails what still waits

    def connection_lost(self, exc: Exception | None) -> None:
        self.close(RedisConnectionError(
            f"Error while reading from {self.where}: {exc}" if exc is not None
            else f"Connection closed by server ({self.where})"))
        self.former.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = self.loop.create_future()

    def resume_writing(self) -> None:
        if self._writable is not None:
            if not self._writable.done():
                self._writable.set_result(None)
            self._writable = None

    def close(self, error: RedisConnectionError | RedisTimeoutError) -> None:
        """Fail every caller still waiting (each with its own `error`) and drop the
        connection."""
        if self.closed:
            return
        self.closed = True
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        waiting, self.waiting = self.waiting, collections.deque()
        for future, _ in waiting:
            if not future.done():
                future.set_exception(type(error)(*error.args))
        self.resume_writing()
        self.transport.abort()


def _error_in(reply: Any) -> Exception | None:
    """What redis-py raises for this reply, if anything (its read_response's rules)."""
    if isinstance(reply, ResponseError | RedisConnectionError):
        return reply
    if isinstance(reply, list) and reply and isinstance(reply[0], RedisConnectionError):
        return reply[0]
    return None


class PipelinedConnection:
    """Commands of many tasks on one connection of `pool`."""

    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool
        # What redis-py would run each command under: the connection's retry.
        template = self._template = pool.make_connection()
        self._retry = template.retry
        self._retried = tuple(template.retry_on_error or ())
        self._timeout: float | None = template.socket_timeout
        self._connection: AbstractConnection | None = None
        self._link: _Link | None = None
        self._opening = asyncio.Lock()

    @classmethod
    def of(cls, redis: Any) -> PipelinedConnection | None:
        """For a client of one fixed Redis (not a cluster, Sentinel or fakeredis)."""
        if type(redis) is not Redis or redis.single_connection_client:
            return None
        pool = redis.connection_pool
        if not isinstance(pool, ConnectionPool) or pool.connection_class not in _PLAIN:
            return None
        return cls(pool)

    async def execute(self, *args: Any) -> Any:
        # Packed as every connection of the client packs (hiredis; store/resp.py), with
        # redis-py's DataError for what it cannot send.
        packed = self._template.pack_command(*args)
        return await self._retry.call_with_retry(lambda: self._send(packed), self._failed)

    async def run_script(self, script: AsyncScript, keys: Sequence[Any],
                         args: Sequence[Any]) -> Any:
        """EVALSHA, loading the script first where Redis does not have it (a restart or
        SCRIPT FLUSH), as redis-py's Script does."""
        try:
            return await self.execute("EVALSHA", script.sha, len(keys), *keys, *args)
        except NoScriptError:
            script.sha = await script.registered_client.script_load(script.script)
            return await self.execute("EVALSHA", script.sha, len(keys), *keys, *args)

    async def _send(self, packed: list[bytes]) -> Any:
        link = self._link
        if link is None or link.closed or link.loop is not asyncio.get_running_loop():
            link = await self._open()
        return await link.request(packed)

    async def _failed(self, error: Exception) -> None:
        """As redis-py's: an error it is not told to retry is raised. Nothing to close:
        the connection an error came from closed itself (_Link.request, close)."""
        if not isinstance(error, self._retried):
            raise error

    async def _open(self) -> _Link:
        async with self._opening:
            link = self._link
            if link is not None and not link.closed and link.loop is asyncio.get_running_loop():
                return link
            await self._give_back()
            connection = await self._pool.get_connection()
            self._connection = connection
            writer = getattr(connection, "_writer", None)
            transport = writer.transport if writer is not None else None
            # By what it does, not its class: uvloop's transports are no asyncio.Transport.
            if not all(callable(getattr(transport, name, None)) for name in _TRANSPORT_CALLS):
                await self._give_back()
                raise RedisConnectionError("the pool gave a connection with no transport")
            transport = cast(asyncio.Transport, transport)
            link = _Link(connection, transport, transport.get_protocol(), self._timeout)
            transport.set_protocol(link)
            self._link = link
            return link

    async def _give_back(self) -> None:
        """The pool's connection back, closed (the pool opens it afresh when next used)."""
        connection, self._connection = self._connection, None
        if connection is not None:
            # Opened on another event loop (a client used from a new loop): closing it
            # there may fail, and it is of no use here either way.
            with contextlib.suppress(Exception):
                await connection.disconnect(nowait=True)
            await self._pool.release(connection)
