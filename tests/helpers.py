"""Shared test helpers: a private redis-server, free ports, waiting for conditions."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

# One private redis-server implementation for tests and benchmarks.
from bench.redis_server import PrivateRedis as RedisServer  # noqa: F401
from bench.redis_server import free_port, start_redis  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
T = TypeVar("T")


def random_prefix() -> str:
    return f"t{secrets.token_hex(4)}"


async def poll_until(check: Callable[[], Awaitable[T]], timeout_s: float,
                     interval_s: float = 0.02) -> T | None:
    """Poll `check` until it returns something truthy; None once `timeout_s` passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() >= deadline:
            return None
        await asyncio.sleep(interval_s)


async def wait_for(check: Callable[[], Awaitable[T]], timeout_s: float = 30.0,
                   interval_s: float = 0.02, what: str = "condition") -> T:
    """Poll `check` until it returns something truthy, or fail naming `what`."""
    value = await poll_until(check, timeout_s, interval_s)
    if not value:
        raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
    return value


def wait_for_sync(check: Callable[[], T], timeout_s: float = 30.0, interval_s: float = 0.05,
                  what: str = "condition") -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(interval_s)
