"""store/resp.py: hiredis packs the asyncio connections' commands into the same bytes
redis-py's own Python packer makes, and what redis-py refuses is still refused."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio.connection import Connection
from redis.exceptions import DataError

from strands_durable.store import resp

CASES: list[tuple[Any, ...]] = [
    ("SET", "k", "v"),
    ("EVALSHA", "a" * 40, 2, "{s1}:s:x", "{s1}:steps", -5, 2**70, 0, "", "ünïcødé ✓"),
    ("CONFIG GET", "maxmemory"),  # a command name of two words goes out as two
    (b"CLIENT SETNAME", "worker"),
    ("ZADD", "z", 0.1, "m", 1e16, "n", 5.0, "o"),
    ("HSET", "h", "f", b"\x00\xff raw bytes", "g", memoryview(b"view")),
    ("SET", "big", "x" * 200_000),  # past redis-py's buffer cutoff: it sends chunks
]


def python_packed(*args: Any) -> bytes:
    return b"".join(bytes(chunk) for chunk in resp._python_pack(Connection(), *args))


@pytest.mark.parametrize("args", CASES, ids=lambda a: str(a[0]))
def test_hiredis_packs_the_bytes_redis_py_packs(args: tuple[Any, ...]) -> None:
    assert b"".join(resp._pack(Connection(), *args)) == python_packed(*args)


@pytest.mark.parametrize("bad", [True, None, object(), "\ud800"])
def test_what_redis_py_refuses_is_still_refused(bad: Any) -> None:
    with pytest.raises((DataError, UnicodeEncodeError)) as caught:
        python_packed("SET", "k", bad)
    with pytest.raises(type(caught.value)):
        resp._pack(Connection(), "SET", "k", bad)


def test_install_makes_it_every_asyncio_connections_packer() -> None:
    resp.install()
    assert Connection().pack_command("GET", "k") == [b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"]
    assert Connection.pack_command is resp._pack
