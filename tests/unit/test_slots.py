"""A worker's step slots (worker/slots.py): the pacing decision, pure, and the slot pool
whose limit can move while steps hold slots."""

from __future__ import annotations

import asyncio

import pytest

from strands_durable.worker.slots import (
    FLOOR,
    ROOMY,
    SATURATED,
    WAIT_BUDGET_S,
    Slots,
    fitting,
    next_limit,
)

SLOW_STEP_S = WAIT_BUDGET_S  # one step's busy time fills the wait budget: FLOOR fits


@pytest.mark.parametrize(("limit", "used", "expected"), [
    (8, 8, 7),   # one below what is in use
    (8, 3, 2),   # from what is in use, not from a limit that does not bind
    (3, 3, FLOOR),
    (FLOOR, FLOOR, FLOOR),  # never below the floor
    (1, 1, 1),   # nor above a ceiling under the floor
])
def test_a_saturated_loop_takes_one_step_fewer(limit: int, used: int, expected: int) -> None:
    ceiling = max(limit, 1)
    assert next_limit(limit, ceiling, used, SATURATED, SLOW_STEP_S) == expected
    assert next_limit(limit, ceiling, used, 1.0, SLOW_STEP_S) == expected
    assert next_limit(limit, ceiling, used, 1.0, 0.0) == expected  # no step ended


def test_how_many_fit_the_wait_budget() -> None:
    # n in flight on a saturated loop: a commit waits about n-1 steps' busy time.
    assert fitting(WAIT_BUDGET_S) == FLOOR
    assert fitting(WAIT_BUDGET_S / 3) == 4
    assert fitting(WAIT_BUDGET_S / 3.5) == 4
    assert fitting(WAIT_BUDGET_S / 100) == 101
    assert fitting(0.0) == FLOOR


def test_a_saturated_loop_keeps_the_steps_that_fit_the_wait_budget() -> None:
    quick = WAIT_BUDGET_S / 3  # 4 fit
    assert next_limit(8, 8, 8, 1.0, quick) == 7
    assert next_limit(5, 8, 5, 1.0, quick) == 4
    assert next_limit(4, 8, 4, 1.0, quick) == 4  # holds: more in flight would wait longer
    assert next_limit(3, 8, 3, 1.0, quick) == 3  # and it does not grow a saturated loop


@pytest.mark.parametrize(("limit", "ceiling", "expected"), [
    (2, 8, 3), (3, 8, 4), (4, 8, 6), (6, 8, 8), (8, 8, 8), (40, 100, 60), (90, 100, 100),
])
def test_room_while_every_slot_is_used_grows_by_half(limit: int, ceiling: int,
                                                      expected: int) -> None:
    assert next_limit(limit, ceiling, limit, 0.0, SLOW_STEP_S) == expected
    assert next_limit(limit, ceiling, limit, ROOMY - 0.01, SLOW_STEP_S) == expected


def test_the_limit_holds_without_demand_or_between_the_thresholds() -> None:
    assert next_limit(4, 8, 2, 0.1, SLOW_STEP_S) == 4  # room, but slots to spare already
    for busy in (ROOMY, (ROOMY + SATURATED) / 2, SATURATED - 0.001):
        assert next_limit(4, 8, 4, busy, SLOW_STEP_S) == 4


async def test_take_free_takes_every_free_slot_and_waits_when_none() -> None:
    slots = Slots(4)
    assert await slots.take_free() == 4
    waiting = asyncio.ensure_future(slots.take_free())
    await asyncio.sleep(0)
    assert not waiting.done()
    slots.give_back(2)
    assert await waiting == 2
    assert slots.used == 4


async def test_a_lowered_limit_takes_slots_back_as_steps_end() -> None:
    slots = Slots(8)
    await slots.take_free()
    slots.set_limit(3)
    assert not slots.keeps_slot()  # a step ending now gives its slot up
    slots.give_back(5)
    assert slots.used == 3 and slots.keeps_slot() and slots.free() == 0
    waiting = asyncio.ensure_future(slots.take_one())
    await asyncio.sleep(0)
    assert not waiting.done()
    slots.set_limit(5)  # a raised limit wakes the waiter
    await waiting
    assert slots.used == 4 and slots.free() == 1


async def test_the_limit_stays_within_one_and_the_ceiling() -> None:
    slots = Slots(6)
    slots.set_limit(0)
    assert slots.limit == 1
    slots.set_limit(60)
    assert slots.limit == 6


async def test_a_cancelled_waiter_leaves_no_trace() -> None:
    slots = Slots(1)
    await slots.take_one()
    waiting = asyncio.ensure_future(slots.take_one())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    slots.give_back()
    assert slots.used == 0
    assert await slots.take_free() == 1


async def test_slots_go_to_the_waiters_in_turn() -> None:
    """A taker arriving while others wait queues behind them, even with a slot free at
    that moment: a read loop whose wait ended empty does not take its slot straight back."""
    slots = Slots(2)
    assert await slots.take_free() == 2
    first = asyncio.ensure_future(slots.take_one())
    second = asyncio.ensure_future(slots.take_free())
    await asyncio.sleep(0)
    slots.give_back()  # handed to `first` at once: counted as used
    assert slots.used == 2 and slots.free() == 0
    late = asyncio.ensure_future(slots.take_one())
    slots.give_back()  # `second` waited longer than `late`
    await asyncio.sleep(0)
    assert first.done() and second.done() and not late.done()
    assert await second == 1
    assert slots.take_now() == 0  # `late` still waits: nothing taken past it
    slots.give_back()
    await late
    assert slots.used == 2


async def test_a_waiter_cancelled_as_it_was_handed_a_slot_passes_it_on() -> None:
    slots = Slots(1)
    await slots.take_one()
    cancelled = asyncio.ensure_future(slots.take_one())
    next_in_line = asyncio.ensure_future(slots.take_one())
    await asyncio.sleep(0)
    slots.give_back()  # handed to `cancelled`, which has not run yet
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    await asyncio.wait_for(next_in_line, timeout=10)  # a slot lost would never come
    assert slots.used == 1
