"""Connection checkout without an event-loop turn.

redis-py's asyncio pool checks every connection it hands out for unread data with a
zero-timeout read (`can_read_destructive`), under the pool's lock. That read always
yields to the event loop and is then cancelled, so each command costs one extra loop
turn, a cancelled timer, and, with several tasks at once, a queue on the lock (a tenth
of a no-op step's CPU when a worker's scripts still took this path; they now take
store/pipelined.py).

`QuickCheckout` first looks at the idle connection it would hand out: connected, its
stream buffer and hiredis reader empty, no end of stream seen. Such a connection goes
out at once. Anything else (a connection never opened, closed by the server, holding
bytes nobody read) takes redis-py's own path, which reconnects it. redis-py itself
closes a connection whose reply was not read (a timeout, a cancelled command), so the
check is the same guard as redis-py's, read from what the event loop has already
received instead of by waiting one more turn for it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hiredis import Reader
from redis.asyncio.connection import AbstractConnection, ConnectionPool
from redis.asyncio.sentinel import SentinelConnectionPool


def idle_and_clean(connection: AbstractConnection) -> bool:
    """The connection is open and nothing has arrived on it that nobody read. False
    for anything this cannot tell (another parser than hiredis's, say)."""
    stream = getattr(connection, "_reader", None)
    parser = getattr(connection, "_parser", None)
    reader = getattr(parser, "_reader", None)
    if not isinstance(stream, asyncio.StreamReader) or not isinstance(reader, Reader):
        return False
    return (getattr(parser, "_connected", False) and connection.is_connected
            and not getattr(stream, "_buffer", b"x") and not stream.at_eof()
            and stream.exception() is None and not reader.has_data())


class QuickCheckout:
    """A pool mixin: hand out a clean idle connection without awaiting anything."""

    _available_connections: list[AbstractConnection]
    _in_use_connections: set[AbstractConnection]

    async def get_connection(self, *args: Any, **kwargs: Any) -> AbstractConnection:
        available = self._available_connections
        if available and idle_and_clean(available[-1]):
            connection = available.pop()
            self._in_use_connections.add(connection)
            return connection
        parent: Any = super()
        return await parent.get_connection(*args, **kwargs)


class QuickConnectionPool(QuickCheckout, ConnectionPool):
    pass


class QuickSentinelConnectionPool(QuickCheckout, SentinelConnectionPool):
    pass
