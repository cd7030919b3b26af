"""Redis locks on a real redis-server: exclusion, compare-and-delete, extend, fencing."""

from __future__ import annotations

import asyncio

import pytest
from helpers import wait_for
from helpers.api import chain_spec

from strands_durable.errors import LockLost, LockNotAcquired, SessionNotFound
from strands_durable.sessions.control import pause
from strands_durable.sessions.deletion import delete_locked
from strands_durable.sessions.start import start_session
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.locks import Lock, locked
from strands_durable.store.store import Store

pytestmark = pytest.mark.integration


def make(store: Store, ttl_ms: int = 5_000) -> Lock:
    key = store.keys.lock("op")
    return Lock(store.redis, store.scripts, key, f"{key}:fence", ttl_ms)


async def test_only_one_holder_and_fences_grow(store: Store) -> None:
    a, b = make(store), make(store)
    assert await a.acquire()
    assert not await b.acquire()
    assert await a.release()
    assert await b.acquire()
    assert b.fence > a.fence


async def test_release_never_deletes_someone_elses_lock(store: Store) -> None:
    a, b = make(store, ttl_ms=100), make(store)
    assert await a.acquire()
    # a never renews: once its TTL runs out (the point of the test), b gets the lock.
    await wait_for(b.acquire, timeout_s=10, what="a's lock to expire and b to take it")
    assert not await a.release()  # a's token no longer matches
    assert await b.held()


async def test_extend_fails_once_lost(store: Store) -> None:
    a, b = make(store, ttl_ms=100), make(store)
    assert await a.acquire()
    await a.extend(5_000)
    assert await a.held()
    await store.redis.delete(a.key)
    assert await b.acquire()
    with pytest.raises(LockLost):
        await a.extend()


async def test_context_manager_waits_then_gives_up(store: Store) -> None:
    holder = make(store)
    assert await holder.acquire()
    with pytest.raises(LockNotAcquired, match="lock"):
        async with locked(store.redis, store.scripts, holder.key, wait_s=0.1):
            pass
    await holder.release()
    async with locked(store.redis, store.scripts, holder.key, wait_s=0.1) as lock:
        assert await lock.held()
    assert not await store.redis.exists(holder.key)


async def test_an_action_that_waited_for_a_delete_leaves_nothing_behind(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pause that found the session, then waited for its lock while a delete held it,
    takes the lock after the delete and is refused: the lock it took leaves no key (its
    fencing counter outlived the session, without expiry, 2 times in 5 of a race)."""
    sid, _ = await start_session(store, load_spec_text(chain_spec(1), "locks.yaml"))
    found = asyncio.Event()
    exists = store.exists

    async def seen(session_id: str) -> bool:
        answer = await exists(session_id)
        found.set()
        return answer

    monkeypatch.setattr(store, "exists", seen)
    async with store.locked(f"session:{sid}", shard=store.keys.shard(sid)):
        pausing = asyncio.create_task(pause(store, sid))
        await found.wait()  # past its check: it waits for the lock held here
        await delete_locked(store, sid)
    with pytest.raises(SessionNotFound):
        await pausing
    left = [key async for key in store.redis.scan_iter(match=f"*{sid}*")]
    assert left == []
