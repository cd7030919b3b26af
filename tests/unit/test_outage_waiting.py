"""An outage ends once no command is still retrying (store/outage.py): a command that
succeeds meanwhile (a read while a primary refuses writes, another cluster node) does
not end it, so the worker logs one line when it starts and one when it ends."""

from __future__ import annotations

import asyncio
import logging

import pytest
from redis._parsers.base import BaseParser
from redis.asyncio.cluster import ClusterParser as AsyncClusterParser
from redis.cluster import ClusterParser

from strands_durable.store.outage import (
    OUTAGE_ERRORS,
    REDIS_DOWN,
    NoReplicasError,
    OutageRetry,
    RedisOutage,
)

REFUSED = "NOREPLICAS Not enough good replicas to write."


async def _nothing(error: BaseException) -> None:
    return None


@pytest.mark.parametrize("parser", [BaseParser, ClusterParser, AsyncClusterParser])
def test_the_parser_reads_noreplicas_as_an_outage(parser: type[BaseParser]) -> None:
    plain = parser.parse_error(REFUSED)
    in_script = parser.parse_error(f"{REFUSED} script: abc, on @user_script:1.")
    assert isinstance(plain, NoReplicasError) and str(plain) == REFUSED
    assert isinstance(in_script, NoReplicasError) and str(in_script).startswith(REFUSED)
    assert isinstance(plain, OUTAGE_ERRORS) and isinstance(plain, REDIS_DOWN)
    assert not isinstance(parser.parse_error("ERR wrong"), NoReplicasError)


async def test_a_success_meanwhile_does_not_end_the_outage() -> None:
    lines: list[tuple[int, str]] = []
    outage = RedisOutage(600, "the primary", announce=lambda lv, text: lines.append((lv, text)))
    retry = OutageRetry(outage)
    replica_back = asyncio.Event()

    async def write() -> str:
        if not replica_back.is_set():
            raise NoReplicasError("Not enough good replicas to write.")
        return "OK"

    async def read() -> str:
        return "value"

    writing = asyncio.create_task(retry.call_with_retry(write, _nothing))
    while outage.waiting == 0:
        await asyncio.sleep(0)
    for _ in range(3):
        assert await retry.call_with_retry(read, _nothing) == "value"
    assert not outage.up and outage.waiting == 1  # the write still waits
    replica_back.set()
    assert await writing == "OK"
    assert outage.up and outage.waiting == 0 and outage.outages == 1
    assert [level for level, _ in lines] == [logging.WARNING, logging.INFO]
    assert "NOREPLICAS" in lines[0][1]


async def test_a_cancelled_waiter_leaves_the_count() -> None:
    outage = RedisOutage(600, "the primary", announce=lambda lv, text: None)
    retry = OutageRetry(outage)

    async def write() -> str:
        raise NoReplicasError("Not enough good replicas to write.")

    async def read() -> str:
        return "value"

    writing = asyncio.create_task(retry.call_with_retry(write, _nothing))
    while outage.waiting == 0:
        await asyncio.sleep(0)
    writing.cancel()
    await asyncio.gather(writing, return_exceptions=True)
    assert outage.waiting == 0 and not outage.up
    await retry.call_with_retry(read, _nothing)
    assert outage.up
