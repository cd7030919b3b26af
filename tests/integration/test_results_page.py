"""A worker whose cache lacks a session's results (another worker committed them, or it
just started) reads them in commit order in one round trip (store/lua/results_page.lua),
on a real redis-server: the order and values as committed, any number of them (Lua's
unpack takes a few thousand at most), a position range, and a key without a result
skipped."""

from __future__ import annotations

from strands_durable.models import StepResult
from strands_durable.store.store import Store

SID = "00000000-0000-4000-8000-000000000001"


async def _committed(store: Store, n: int) -> list[StepResult]:
    results = [StepResult(key=f"step:{i}", agent="a", response=f"reply {i}") for i in range(n)]
    keys = store.keys
    await store.redis.rpush(keys.order(SID), *[r.key for r in results])
    await store.redis.hset(keys.results(SID), mapping={r.key: r.to_json() for r in results})
    return results


async def _reads(store: Store) -> int:
    return int((await store.redis.info("stats"))["total_reads_processed"])


async def test_every_result_in_commit_order_in_one_round_trip(store: Store) -> None:
    results = await _committed(store, 2_500)  # past one HMGET's part of 1,000
    await store.results(SID, 0, 0)  # the script loaded and the connection made before
    before = await _reads(store)
    assert await store.results(SID) == results
    # One read for the script call, one for the INFO that counts it.
    assert await _reads(store) - before == 2
    assert await store.results(SID, 2_498, -1) == results[2_498:]
    assert await store.results(SID, 10, 12) == results[10:13]
    assert await store.results(SID, 2_500) == []


async def test_a_key_of_the_order_without_a_result_is_skipped(store: Store) -> None:
    results = await _committed(store, 3)
    await store.redis.hdel(store.keys.results(SID), "step:1")
    assert await store.results(SID) == [results[0], results[2]]
    assert await store.results("00000000-0000-4000-8000-000000000002") == []
