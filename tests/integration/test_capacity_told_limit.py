"""What a throttle teaches the fleet when the provider names its limit
(`x-ratelimit-limit-requests`), on a real redis-server (store/lua/capacity_throttled.lua,
capacity_release.lua): the rate goes just under it and successes grow it no further (the
fleet does not climb into the limit, paying a whole Retry-After each time), never up from
a lower rate, and a throttle the rate explains teaches no requests-at-once limit; one it
does not explain does."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import wait_for

from strands_durable.store.capacity import Candidate, DeclaredLimits, ProviderKey
from strands_durable.store.store import Store

KEY = ProviderKey("openai", "gpt-told", "http://127.0.0.1:1/v1")
NOTHING = DeclaredLimits()


async def _take(store: Store, lease: str) -> Any:
    return await store.capacity_acquire(KEY, NOTHING, [Candidate("s", lease, 1)], 30_000,
                                        1_000)


async def _taken(store: Store, lease: str) -> None:
    async def granted() -> bool:
        return bool((await _take(store, lease)).granted)

    await wait_for(granted, timeout_s=10, what=f"{lease} to be granted")


async def _learned_in_flight(store: Store) -> float:
    await store.capacity_register(KEY)
    return {s.key: s for s in await store.capacity_states()}[KEY].learned_in_flight


async def test_successes_never_grow_the_rate_past_the_named_limit(store: Store) -> None:
    await _taken(store, "a")
    rpm, _ = await store.capacity_throttled(KEY, "a", 1, 600, 0.7, 1)
    assert rpm == pytest.approx(570)
    for lease in ("b", "c"):
        await _taken(store, lease)
        await store.capacity_release(KEY, NOTHING, lease, 0, succeeded=True)
    assert (await _take(store, "d")).rpm == pytest.approx(570)


async def test_a_throttle_the_rate_explains_learns_no_concurrency(store: Store) -> None:
    for i in range(20):  # a burst, nothing learned: the rate was over the named limit
        await _taken(store, f"l{i}")
    rpm, in_flight = await store.capacity_throttled(KEY, "l0", 1, 600, 0.7, 1)
    assert rpm == pytest.approx(570) and in_flight == 0
    assert await _learned_in_flight(store) == 0


async def test_a_throttle_within_the_named_rate_is_the_concurrency(store: Store) -> None:
    await _taken(store, "a")
    await store.capacity_throttled(KEY, "a", 1, 600, 0.7, 1)
    for i in range(10):
        await _taken(store, f"l{i}")

    async def decreased() -> tuple[float, int] | None:
        # Once a window has passed since the last decrease: then this one counts. A
        # lease not held: the ten stay held whichever call that is.
        rpm, in_flight = await store.capacity_throttled(KEY, "not-held", 1, 600, 0.7, 1)
        return (rpm, in_flight) if in_flight > 0 else None

    rpm, in_flight = await wait_for(decreased, timeout_s=10, what="a second decrease")
    assert rpm == pytest.approx(570)  # the rate stays where the provider put it
    assert in_flight == 7  # 10 held at the throttle: 0.7 of it


async def test_a_named_limit_never_raises_a_lower_rate_but_lifts_the_ceiling(
        store: Store) -> None:
    await _taken(store, "a")
    low, _ = await store.capacity_throttled(KEY, "a", 1, 400, 0.7, 1)
    assert low == pytest.approx(380)
    await _taken(store, "b")

    async def told_again() -> float | None:
        rpm, in_flight = await store.capacity_throttled(KEY, "b", 1, 600, 0.7, 1)
        return rpm if in_flight > 0 else None  # the decrease came (concurrency learned)

    assert await wait_for(told_again, timeout_s=10, what="a second decrease") == \
        pytest.approx(380)
    # The account's limit went up: successes may now grow the rate past the old one.
    await _taken(store, "c")
    await store.capacity_release(KEY, NOTHING, "c", 0, succeeded=True)
    assert (await _take(store, "d")).rpm == pytest.approx(381)
