"""A worker collects its oldest generation less often than CPython's default
(worker/heap.py FULL_AFTER): the objects of its steps in flight end there, and a full
collection walks them all."""

from __future__ import annotations

import gc

from strands_durable.worker.heap import FULL_AFTER, freeze_startup_heap


def test_freezing_the_startup_heap_collects_the_oldest_generation_less_often() -> None:
    before = gc.get_threshold()
    try:
        freeze_startup_heap()
        young, middle, oldest = gc.get_threshold()
        assert (young, middle) == before[:2]  # the young generations as they were
        assert oldest == FULL_AFTER > 10  # CPython's default is 10
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
