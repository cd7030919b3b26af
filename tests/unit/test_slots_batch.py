"""A read loop's batch (worker/consumer.py READ_BATCH): however many slots are free, one
turn takes at most that many, so one take.lua call gates at most that many entries; the
rest stay free for the loop's next turn."""

from __future__ import annotations

from strands_durable.worker.consumer import READ_BATCH
from strands_durable.worker.slots import Slots


async def test_take_free_takes_at_most_the_batch_and_leaves_the_rest_free() -> None:
    slots = Slots(1000)
    assert await slots.take_free(READ_BATCH) == READ_BATCH
    assert slots.free() == 1000 - READ_BATCH
    assert await slots.take_free(READ_BATCH) == READ_BATCH  # the next turn, at once
    assert slots.used == 2 * READ_BATCH


async def test_a_hold_adds_free_slots_up_to_what_the_batch_leaves() -> None:
    slots = Slots(1000)
    hold = slots.hold(await slots.take_free(READ_BATCH))
    hold.keep(1)  # as before a blocking read: one slot kept
    assert hold.add_free(READ_BATCH - hold.count) == READ_BATCH - 1
    assert hold.count == READ_BATCH and slots.used == READ_BATCH
    assert hold.add_free(0) == 0


async def test_without_a_cap_every_free_slot_is_taken() -> None:
    slots = Slots(300)
    assert await slots.take_free() == 300
