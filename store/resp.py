"""Commands packed by hiredis, and written without an extra event-loop turn, on
redis-py's asyncio connections.

redis-py's blocking connections pack a command into the wire protocol with hiredis
when it is installed (it is: arq requires `redis[hiredis]`); its asyncio connections do
it in Python, one `Encoder.encode` and several byte joins per argument. A commit sends
about 60 arguments, which made packing a tenth of a step's worker CPU. `install()`
gives every asyncio connection (plain, TLS, unix socket, Sentinel's and the cluster
nodes') hiredis's packer; the bytes on the wire are the same.

What hiredis refuses (a bool, None, any other type: redis-py's DataError) goes to
redis-py's own packer, which raises exactly as before.

redis-py writes a command with `asyncio.wait_for(writer.drain(), socket_timeout)`,
which makes a task and a timer and waits one loop turn for them, even when the socket
took every byte at once. `_send` writes at once
when nothing is queued on the transport; it waits for the drain (with redis-py's
timeout and errors) only when the transport says it must (its buffer past the high-water
mark, or the connection closing), and anything else (a health check due, a connection to
open) takes redis-py's own path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from hiredis import pack_command as _hiredis_pack
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

_python_pack = AbstractConnection.pack_command
_python_send = AbstractConnection.send_packed_command


def _pack(self: AbstractConnection, *args: Any) -> list[bytes]:
    # As redis-py: a command name with spaces ('CONFIG GET') goes out as its words.
    head = args[0]
    if isinstance(head, str):
        args = (*head.encode().split(), *args[1:])
    elif b" " in head:
        args = (*head.split(), *args[1:])
    try:
        return [_hiredis_pack(args)]
    except (TypeError, ValueError):
        return _python_pack(self, *args)


async def _send(self: AbstractConnection, command: bytes | str | Iterable[bytes],
                check_health: bool = True) -> None:
    writer = self._writer
    if (writer is None or not isinstance(command, list) or (
            check_health and self.health_check_interval
            and asyncio.get_running_loop().time() > self.next_health_check)):
        return await _python_send(self, command, check_health)
    transport = getattr(writer, "transport", None)  # fakeredis's writer has none
    if (not isinstance(transport, asyncio.WriteTransport) or transport.is_closing()
            or transport.get_write_buffer_size()):
        return await _python_send(self, command, check_health)
    try:
        writer.writelines(command)
        if transport.is_closing() or (transport.get_write_buffer_size()
                                      > transport.get_write_buffer_limits()[1]):
            # What redis-py would wait for: the drain (raising what the connection
            # met), within the socket timeout.
            await asyncio.wait_for(writer.drain(), self.socket_timeout)
    except TimeoutError:
        await self.disconnect(nowait=True)
        raise RedisTimeoutError("Timeout writing to socket") from None
    except OSError as exc:
        await self.disconnect(nowait=True)
        raise RedisConnectionError(f"Error while writing to socket: {exc}") from exc
    except BaseException:
        # As redis-py: a command half sent leaves the connection unusable.
        await self.disconnect(nowait=True)
        raise


def install() -> None:
    """Pack with hiredis and write without an extra loop turn on every asyncio
    connection (idempotent)."""
    AbstractConnection.pack_command = _pack  # type: ignore[method-assign]
    AbstractConnection.send_packed_command = _send  # type: ignore[method-assign]
