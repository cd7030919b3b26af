"""store/pool.py and store/resp.py on a real redis-server: a clean idle connection goes
out and a command is written without an extra event-loop turn, and everything else
(unread bytes, a connection the server closed, a command past the transport's
high-water mark, a health check due) takes redis-py's own path and still gets its own
reply."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from helpers import RedisServer, wait_for
from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection, ConnectionPool

from strands_durable.store import resp
from strands_durable.store.outage import OutageConnectionPool
from strands_durable.store.pool import QuickCheckout, QuickConnectionPool, idle_and_clean
from strands_durable.store.redis_url import async_redis_client


@pytest.fixture
async def client(redis_server: RedisServer) -> AsyncIterator[Redis]:
    redis = async_redis_client(redis_server.url, decode_responses=True,
                               health_check_interval=30)
    yield redis
    await redis.aclose()


def pool_of(client: Redis) -> ConnectionPool:
    pool = client.connection_pool
    assert isinstance(pool, QuickConnectionPool)
    return pool


async def stock_checks(pool: ConnectionPool) -> list[AbstractConnection]:
    """Connections that went through redis-py's own (awaiting) check, from now on."""
    checked: list[AbstractConnection] = []
    stock = ConnectionPool.ensure_connection

    async def counted(self: ConnectionPool, connection: AbstractConnection) -> None:
        checked.append(connection)
        await stock(self, connection)

    pool.ensure_connection = counted.__get__(pool)  # type: ignore[method-assign]
    return checked


async def test_every_client_and_the_outage_pools_check_out_quickly() -> None:
    assert issubclass(OutageConnectionPool, QuickCheckout)
    assert isinstance(async_redis_client("redis://127.0.0.1:1/0").connection_pool,
                      QuickConnectionPool)
    resp.install()
    assert AbstractConnection.send_packed_command is resp._send


async def test_a_clean_idle_connection_goes_out_without_redis_pys_check(client: Redis) -> None:
    pool = pool_of(client)
    assert await client.set("quick:k", "v")
    checked = await stock_checks(pool)
    (idle,) = pool._available_connections
    assert idle_and_clean(idle)
    for n in range(20):
        assert await client.echo(f"m{n}") == f"m{n}"
    assert checked == []
    assert pool._available_connections == [idle]


async def test_a_connection_holding_an_unread_reply_is_reopened(client: Redis) -> None:
    pool = pool_of(client)
    await client.ping()
    conn = await pool.get_connection()
    await conn.send_command("ECHO", "stale")  # its reply is never read
    await wait_for(lambda: _async(not idle_and_clean(conn)), 10, what="the reply to arrive")
    await pool.release(conn)
    checked = await stock_checks(pool)
    # Handed out as it was, this would answer "stale".
    assert await client.echo("fresh") == "fresh"
    assert checked == [conn]
    assert idle_and_clean(conn)


async def test_a_connection_the_server_closed_is_reopened(client: Redis,
                                                         redis_server: RedisServer) -> None:
    pool = pool_of(client)
    doomed = await client.client_id()
    (conn,) = pool._available_connections
    killer = Redis.from_url(redis_server.url)
    try:
        assert await killer.client_kill_filter(_id=doomed) == 1
    finally:
        await killer.aclose()
    await wait_for(lambda: _async(not idle_and_clean(conn)), 10, what="the close to arrive")
    checked = await stock_checks(pool)
    assert await client.echo("after") == "after"
    assert checked == [conn]
    assert await client.client_id() != doomed


async def test_a_command_past_the_high_water_mark_waits_for_the_drain(client: Redis) -> None:
    big = "x" * (8 << 20)  # far past asyncio's 64 KiB high-water mark
    values = await asyncio.gather(*(client.set(f"quick:big{n}", big) for n in range(4)))
    assert values == [True] * 4
    assert await client.strlen("quick:big3") == len(big)
    assert await client.echo("next") == "next"


async def test_a_due_health_check_still_pings(client: Redis) -> None:
    pool = pool_of(client)
    await client.ping()
    (conn,) = pool._available_connections
    before = await _pings(client)
    conn.next_health_check = 0  # due now
    assert await client.echo("checked") == "checked"
    # The health check's PING, then ours reading the stats.
    assert await _pings(client) == before + 2


async def _pings(client: Redis) -> int:
    await client.ping()
    stats = await client.info("commandstats")
    return int(stats["cmdstat_ping"]["calls"])


async def _async(value: bool) -> bool:
    return value
