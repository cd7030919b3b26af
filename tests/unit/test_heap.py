"""A worker's startup heap is frozen out of the garbage collector's generations
(worker/heap.py): every full collection would walk it again otherwise."""

from __future__ import annotations

import gc

from strands_durable.worker.heap import freeze_startup_heap


def _tracked(obj: object) -> bool:
    return any(o is obj for o in gc.get_objects())


def test_what_is_alive_at_startup_leaves_the_generations_and_garbage_is_collected_first(
) -> None:
    alive = {"loaded": ["at", "startup"]}
    cycle: list[object] = []
    cycle.append(cycle)  # garbage only a collection finds
    cycle_id = id(cycle)
    del cycle
    assert _tracked(alive)
    try:
        frozen = freeze_startup_heap()
        # Frozen objects leave the count only when freed, which another thread of this
        # process (xdist's channel, a test's leftover thread) may do meanwhile.
        assert 0 < gc.get_freeze_count() <= frozen
        assert not _tracked(alive)  # frozen: no generation holds it
        assert all(id(o) != cycle_id for o in gc.get_objects())
        made_after = [["made", "after"]]
        assert _tracked(made_after)  # what comes later is collected as before
    finally:
        gc.unfreeze()
    assert _tracked(alive)
