"""Redis locks (they replace the seed's fcntl): SET NX PX with a random token, released
and extended by compare-and-delete / compare-and-expire, and a fencing token that
only ever grows, so a holder that lost its lock can be told apart from the new one.

A lock never protects a commit by its TTL alone: commits are fenced by the stream
entry they own (see commit.lua).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from redis.asyncio import Redis

from strands_durable.errors import LockLost, LockNotAcquired
from strands_durable.store.codec import as_str
from strands_durable.store.script_operator import LockExtendArgs, LockKeys, LockReleaseArgs
from strands_durable.store.scripts import Scripts


@dataclass
class Lock:
    redis: Redis
    scripts: Scripts
    key: str
    fence_key: str | None  # None: no fencing token (a lock for a short body, `locked`)
    ttl_ms: int = 30_000
    token: str = ""
    fence: int = 0

    async def acquire(self, wait_s: float = 0.0, poll_s: float = 0.05) -> bool:
        """Try to take the lock, waiting up to `wait_s`; on success `fence` is set."""
        token = secrets.token_hex(16)
        deadline = asyncio.get_running_loop().time() + wait_s
        while True:
            if await self.redis.set(self.key, token, nx=True, px=self.ttl_ms):
                self.token = token
                if self.fence_key is not None:
                    self.fence = int(await self.redis.incr(self.fence_key))
                return True
            if asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(poll_s)

    async def release(self) -> bool:
        if not self.token:
            return False
        released = bool(await self.scripts.lock_release(keys=LockKeys(self.key),
                                                          args=LockReleaseArgs(self.token)))
        self.token = ""
        return released

    async def extend(self, ttl_ms: int | None = None) -> None:
        ok = await self.scripts.lock_extend(
            keys=LockKeys(self.key), args=LockExtendArgs(self.token, ttl_ms or self.ttl_ms))
        if not ok:
            raise LockLost(self.key)

    async def held(self) -> bool:
        value = await self.redis.get(self.key)
        return bool(self.token) and as_str(value) == self.token


@asynccontextmanager
async def locked(redis: Redis, scripts: Scripts, key: str, *, ttl_ms: int = 30_000,
                 wait_s: float = 5.0) -> AsyncIterator[Lock]:
    """Hold `key` for the body; LockNotAcquired if someone else keeps it past `wait_s`.
    No fencing token: nothing reads one for a body this short, and a counter written for a
    session by an action that waited for its delete would outlive the session."""
    lock = Lock(redis, scripts, key, None, ttl_ms)
    if not await lock.acquire(wait_s=wait_s):
        raise LockNotAcquired(key)
    try:
        yield lock
    finally:
        await lock.release()
