"""Commands packed by hiredis on redis-py's asyncio connections too.

redis-py's blocking connections pack a command into the wire protocol with hiredis
when it is installed (it is: arq requires `redis[hiredis]`); its asyncio connections do
it in Python, one `Encoder.encode` and several byte joins per argument. A commit sends
about 60 arguments, which made packing a tenth of a step's worker CPU. `install()`
gives every asyncio connection (plain, TLS, unix socket, Sentinel's and the cluster
nodes') hiredis's packer; the bytes on the wire are the same.

What hiredis refuses (a bool, None, any other type: redis-py's DataError) goes to
redis-py's own packer, which raises exactly as before.
"""

from __future__ import annotations

from typing import Any

from hiredis import pack_command as _hiredis_pack
from redis.asyncio.connection import AbstractConnection

_python_pack = AbstractConnection.pack_command


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


def install() -> None:
    """Pack with hiredis on every asyncio connection (idempotent)."""
    AbstractConnection.pack_command = _pack  # type: ignore[method-assign]
