"""The garbage collector of a worker process.

What a worker loads before its first step (modules, classes, the Strands and Redis
clients, compiled scripts and templates) lives as long as the process, yet every full
collection walks it again: on a worker running steps back to back that was most of
the collector's time and pauses of tens of milliseconds in the middle of commits.
Freezing it once started (`gc.freeze`, meant for long-lived processes) leaves the
collector the objects made since, so the cost of a full collection follows the work
in hand, not the size of the libraries."""

from __future__ import annotations

import gc


def freeze_startup_heap() -> int:
    """Collect what startup left as garbage, then move every object alive now out of
    the collector's reach; the number of objects frozen so far. Only for a process that
    is a worker (its startup heap lives as long as it does): a cycle among these
    objects that became garbage later would never be collected."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
