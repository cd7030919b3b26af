"""The outage policy on its own: one line per outage, the limit, stopping, refusals, and
only a command's success ends an outage. (tests/attack/test_redis_outage.py does it with
a real redis-server and real workers.)"""

from __future__ import annotations

import logging
from typing import NoReturn

import pytest
from redis.exceptions import AuthenticationError, BusyLoadingError
from redis.exceptions import ConnectionError as RedisConnectionError

from strands_durable.store.outage import OutageRetry, RedisOutage, RedisOutageExceeded


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def tracker(limit_s: float = 10) -> tuple[RedisOutage, Clock, list[tuple[int, str]]]:
    clock, lines = Clock(), []
    outage = RedisOutage(limit_s, "redis://u:***@h:1/0", clock=clock,
                         announce=lambda level, text: lines.append((level, text)))
    return outage, clock, lines


def test_one_line_when_it_starts_and_one_when_it_ends() -> None:
    outage, clock, lines = tracker()
    for _ in range(50):
        outage.failed(RedisConnectionError("Connection refused"))
        clock.now += 0.1
    assert not outage.up and outage.current_down_s == pytest.approx(5)
    outage.recovered()
    outage.recovered()
    assert outage.up and outage.outages == 1 and outage.total_down_s == pytest.approx(5)
    assert [level for level, _ in lines] == [logging.WARNING, logging.INFO]
    assert "redis://u:***@h:1/0 is unavailable (ConnectionError: Connection refused)" in lines[0][1]
    assert "is back after 5.0s" in lines[1][1]


def test_past_the_limit_it_gives_up_in_one_line() -> None:
    outage, clock, _ = tracker(limit_s=3)
    reasons: list[str] = []

    def give_up(reason: str) -> NoReturn:
        reasons.append(reason)
        raise SystemExit(75)

    outage.on_give_up = give_up
    outage.failed(RedisConnectionError("x"))
    clock.now += 3
    outage.failed(RedisConnectionError("x"))  # at the limit: still waiting
    clock.now += 0.5
    with pytest.raises(SystemExit):
        outage.failed(RedisConnectionError("gone"))
    assert reasons == ["Redis at redis://u:***@h:1/0 unavailable for 4s, past "
                       "DURABLE_REDIS_OUTAGE_S=3: exiting (ConnectionError: gone)"]


def test_without_a_give_up_hook_it_raises() -> None:
    outage, clock, _ = tracker(limit_s=0)
    outage.failed(RedisConnectionError("x"))
    clock.now += 1
    with pytest.raises(RedisOutageExceeded, match="past DURABLE_REDIS_OUTAGE_S=0"):
        outage.failed(RedisConnectionError("x"))


def test_stopping_during_an_outage_gives_up_at_once() -> None:
    outage, _, _ = tracker()
    outage.stop()  # Redis up: only remembered
    assert outage.stopping
    with pytest.raises(RedisOutageExceeded, match="stopping while Redis"):
        outage.failed(RedisConnectionError("x"))
    outage, _, _ = tracker()
    outage.failed(RedisConnectionError("x"))
    with pytest.raises(RedisOutageExceeded, match="stopping while Redis"):
        outage.stop()


async def test_a_refusal_is_no_outage() -> None:
    outage, _, _ = tracker()

    async def wrong_password() -> None:
        raise AuthenticationError("invalid username-password pair")

    with pytest.raises(RedisOutageExceeded, match="refused this worker"):
        await OutageRetry(outage).call_with_retry(wrong_password, lambda e: _nothing())


async def _nothing() -> None:
    return None


async def test_only_a_command_success_ends_the_outage() -> None:
    """After a restart, a connect succeeds while Redis still loads its data: the command
    then answers LOADING. That is the same outage, not a second one."""
    outage, _, lines = tracker()
    retry = OutageRetry(outage)
    replies = iter([RedisConnectionError("refused"), "connected", BusyLoadingError("loading"),
                    "connected", "OK"])

    async def connect() -> str:
        return await retry.call_with_retry(step, lambda e: _nothing())

    async def step() -> str:
        reply = next(replies)
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def command() -> str:
        await connect()  # nested, as redis-py connects inside a command's retry
        return await step()

    assert await retry.call_with_retry(command, lambda e: _nothing()) == "OK"
    assert outage.outages == 1 and outage.up
    assert [level for level, _ in lines] == [logging.WARNING, logging.INFO]


def test_every_connection_shares_one_retry() -> None:
    import copy

    retry = OutageRetry(tracker()[0])
    assert copy.deepcopy(retry) is retry
