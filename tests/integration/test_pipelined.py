"""store/pipelined.py on real redis-servers: many callers' commands on one connection,
each reply to its own caller, through cancellations, reply errors, a connection the
server kills, a timeout, a restart of Redis and the client's close."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from attack.test_redis_tls_acl import TlsRedis, tls_redis  # noqa: F401 (a fixture)
from fakeredis import FakeAsyncRedis
from helpers import RedisServer, random_prefix, start_redis, wait_for
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import DataError, NoScriptError, ReadOnlyError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from strands_durable.redis_targets import Timeouts
from strands_durable.store.outage import NoReplicasError, RedisOutage, outage_client_kwargs
from strands_durable.store.pipelined import PipelinedConnection
from strands_durable.store.redis_url import async_redis_client

INCR = "return redis.call('INCRBY', KEYS[1], ARGV[1])"


def wire_of(client: Redis) -> PipelinedConnection:
    wire = PipelinedConnection.of(client)
    assert wire is not None
    return wire


@pytest.fixture
async def client(redis_server: RedisServer) -> AsyncIterator[Redis]:
    redis = async_redis_client(redis_server.url, decode_responses=True)
    yield redis
    await redis.aclose()


async def test_many_callers_share_one_connection_each_with_its_own_reply(client: Redis) -> None:
    wire = wire_of(client)
    replies = await asyncio.gather(*(wire.execute("ECHO", f"m{n}") for n in range(300)))
    assert replies == [f"m{n}" for n in range(300)]
    assert len(client.connection_pool._in_use_connections) == 1
    # ... while the client's other commands keep using the pool's other connections.
    assert await client.echo("pool") == "pool"


async def test_replies_are_decoded_as_the_client_decodes(redis_server: RedisServer) -> None:
    raw = async_redis_client(redis_server.url)
    try:
        assert await wire_of(raw).execute("ECHO", "ünï") == "ünï".encode()
    finally:
        await raw.aclose()


async def test_a_reply_error_raises_redis_pys_class_and_keeps_the_connection(
        client: Redis) -> None:
    wire = wire_of(client)
    await wire.execute("PING")
    link = wire._link
    with pytest.raises(NoScriptError):
        await wire.execute("EVALSHA", "0" * 40, 0)
    with pytest.raises(ResponseError, match="wrong number of arguments"):
        await wire.execute("GET")
    assert await wire.execute("ECHO", "same") == "same"
    assert wire._link is link and not link.closed


async def test_a_replicas_readonly_drops_the_connection_noreplicas_does_not() -> None:
    primary = start_redis()
    replica = start_redis(["--replicaof", "127.0.0.1", str(primary.port)])
    redis = async_redis_client(replica.url, decode_responses=True)
    try:
        wire, key = wire_of(redis), random_prefix()
        await wire.execute("PING")
        with pytest.raises(ReadOnlyError):
            await wire.execute("SET", key, "v")
        assert wire._link is not None and wire._link.closed  # the next may reach a primary
        await redis.replicaof("NO", "ONE")
        assert await wire.execute("SET", key, "v") == "OK"
        link = wire._link
        await redis.config_set("min-replicas-to-write", 1)
        with pytest.raises(NoReplicasError):
            await wire.execute("SET", key, "w")
        assert wire._link is link and not link.closed  # one command's answer, not the link's
        assert await wire.execute("GET", key) == "v"
    finally:
        await redis.aclose()
        replica.stop()
        primary.stop()


async def test_a_script_redis_does_not_have_is_loaded_and_run(client: Redis) -> None:
    wire, key = wire_of(client), random_prefix()
    script = client.register_script(INCR)
    assert await wire.run_script(script, [key], [2]) == 2
    await client.script_flush()
    assert await wire.run_script(script, [key], [3]) == 5


async def test_what_cannot_be_sent_is_refused_before_it_is_sent(client: Redis) -> None:
    wire = wire_of(client)
    with pytest.raises(DataError):
        await wire.execute("SET", "k", object())
    assert await wire.execute("ECHO", "after") == "after"


async def test_a_cancelled_caller_does_not_shift_the_replies(client: Redis) -> None:
    wire, key = wire_of(client), random_prefix()
    blocked = asyncio.create_task(wire.execute("BLPOP", key, "0.3"))
    await wait_for(lambda: _blocked_clients(client), 10, what="the BLPOP to block")
    blocked.cancel()
    echoed = asyncio.create_task(wire.execute("ECHO", "mine"))
    # Its reply (nil, after the BLPOP times out) is dropped; ECHO gets its own.
    assert await echoed == "mine"
    assert blocked.cancelled()


async def test_a_connection_the_server_kills_fails_its_callers_and_reopens(
        client: Redis, redis_server: RedisServer) -> None:
    wire, key = wire_of(client), random_prefix()
    doomed = await wire.execute("CLIENT", "ID")
    blocked = asyncio.create_task(wire.execute("BLPOP", key, "30"))
    await wait_for(lambda: _blocked_clients(client), 10, what="the BLPOP to block")
    killer = Redis.from_url(redis_server.url)
    try:
        assert await killer.client_kill_filter(_id=doomed) == 1
    finally:
        await killer.aclose()
    with pytest.raises(RedisConnectionError):
        await blocked  # this client retries nothing: redis-py's default
    assert await wire.execute("CLIENT", "ID") != doomed
    assert len(client.connection_pool._in_use_connections) == 1


async def test_a_reply_later_than_the_socket_timeout_closes_the_connection(
        redis_server: RedisServer) -> None:
    quick = async_redis_client(redis_server.url, Timeouts(socket_s=0.3), decode_responses=True)
    try:
        wire, key = wire_of(quick), random_prefix()
        first = await wire.execute("CLIENT", "ID")
        with pytest.raises(RedisTimeoutError):
            await wire.execute("BLPOP", key, "5")
        assert wire._link is not None and wire._link.closed
        assert await wire.execute("CLIENT", "ID") != first
    finally:
        await quick.aclose()


async def test_a_command_past_the_high_water_mark_goes_through(client: Redis) -> None:
    wire, key = wire_of(client), random_prefix()
    big = "x" * (8 << 20)
    assert await asyncio.gather(*(wire.execute("SET", f"{key}{n}", big)
                                  for n in range(4))) == ["OK"] * 4
    assert await wire.execute("STRLEN", f"{key}3") == len(big)


async def test_closing_the_client_closes_it_without_waiting() -> None:
    server = start_redis()
    try:
        redis = async_redis_client(server.url, decode_responses=True)
        wire = wire_of(redis)
        await wire.execute("PING")
        await asyncio.wait_for(redis.aclose(), 5)
        assert wire._link is not None and wire._link.closed
    finally:
        server.stop()


async def test_a_worker_client_rides_out_a_redis_restart() -> None:
    server = start_redis()
    lines: list[tuple[int, str]] = []
    outage = RedisOutage(60, "the store", announce=lambda level, text: lines.append((level, text)))
    redis = async_redis_client(server.url, decode_responses=True,
                               **outage_client_kwargs(outage))
    try:
        wire, key = wire_of(redis), random_prefix()
        script = redis.register_script(INCR)
        assert await wire.run_script(script, [key], [1]) == 1
        server.stop()
        during = asyncio.create_task(wire.run_script(script, [key], [1]))
        await wait_for(lambda: _async(outage.waiting > 0), 10, what="the outage to be seen")
        server = start_redis(port=server.port)  # empty: no keys, no scripts
        assert await asyncio.wait_for(during, 30) == 1
        assert len(lines) == 2  # one line as it began, one as it ended
    finally:
        await redis.aclose()
        server.stop()


async def _many_then_killed_then_closed(redis: Redis, killer: Redis) -> None:
    wire, key = wire_of(redis), random_prefix()
    script = redis.register_script(INCR)
    replies = await asyncio.gather(*(wire.run_script(script, [key], [1]) for _ in range(50)))
    assert sorted(replies) == list(range(1, 51))
    doomed = await wire.execute("CLIENT", "ID")
    assert await killer.client_kill_filter(_id=doomed) == 1
    await wait_for(lambda: _async(wire._link is not None and wire._link.closed), 10,
                   what="the kill to be seen")
    assert await wire.run_script(script, [key], [1]) == 51
    await asyncio.wait_for(redis.aclose(), 5)
    assert wire._link is not None and wire._link.closed


async def test_over_tls(tls_redis: TlsRedis) -> None:  # noqa: F811
    url = tls_redis.url(tls_redis.private_ca)
    killer = async_redis_client(url, decode_responses=True)
    try:
        await _many_then_killed_then_closed(async_redis_client(url, decode_responses=True),
                                            killer)
    finally:
        await killer.aclose()


async def test_over_a_unix_socket(tmp_path: Path) -> None:
    socket_path = tmp_path / "redis.sock"
    server = start_redis(["--unixsocket", str(socket_path), "--unixsocketperm", "700"])
    try:
        await wait_for(lambda: _async(socket_path.exists()), 10, what="the socket")
        url = f"unix://{socket_path}?db=0"
        killer = async_redis_client(url, decode_responses=True)
        try:
            await _many_then_killed_then_closed(
                async_redis_client(url, decode_responses=True), killer)
        finally:
            await killer.aclose()
    finally:
        server.stop()


async def test_only_a_client_of_one_fixed_redis_gets_one(redis_server: RedisServer) -> None:
    assert PipelinedConnection.of(FakeAsyncRedis()) is None
    single = Redis.from_url(redis_server.url, single_connection_client=True)
    assert PipelinedConnection.of(single) is None
    await single.aclose()
    sentinel = async_redis_client("redis+sentinel://127.0.0.1:1/mymaster/0")
    assert PipelinedConnection.of(sentinel) is None
    cluster = async_redis_client("redis+cluster://127.0.0.1:1/")
    assert PipelinedConnection.of(cluster) is None


async def _blocked_clients(client: Redis) -> bool:
    info: dict[str, Any] = await client.info("clients")
    return int(info["blocked_clients"]) > 0


async def _async(value: bool) -> bool:
    return value
