"""The garbage collector of a worker process.

What a worker loads before its first step (modules, classes, the Strands and Redis
clients, compiled scripts and templates) lives as long as the process, yet every full
collection walks it again: on a worker running steps back to back that was most of
the collector's time and pauses of tens of milliseconds in the middle of commits.
Freezing it once started (`gc.freeze`, meant for long-lived processes) leaves the
collector the objects made since, so the cost of a full collection follows the work
in hand, not the size of the libraries.

The work in hand is the steps in flight: a step waiting on its model holds about 300
tracked objects (its task, Strands agent, conversation) for as long as the call takes, so
each of them outlives the young generations and ends in the oldest. CPython collects that
one after 10 collections of the middle one once what was promoted since exceeds a
quarter of what it held: with the startup heap frozen, a quarter of the steps in flight.
A worker with 1,000 steps in flight at 2 s a model call (bench/inflight.py's load) then
ran a full collection every second, each walking every in-flight step's objects (~0.3 s
on the 2-core bench machine): 39% of its CPU (17.4 of 44.0 s over 10,000 steps). After 50
instead of 10 (FULL_AFTER): 24% (8.7 of 36.4 s), 17% less CPU a step and 20% more steps/s;
a full collection comes a fifth as often and pauses longer (at most 0.56 s against 0.38 s
there), the peak RSS 5% higher. With few steps in flight the oldest generation holds
little and its collections stay short either way. After 100 (since the steps themselves
grew cheaper, the collector was again 12% of the worker's CPU there, by py-spy --native):
416-419 steps/s in 3 of 4 runs and 400 in the fourth, against 383-400 after 50 (4 runs
each, the last two pairs interleaved, load 0.5-1.3); 1.20-1.53 ms of CPU a step against
1.39-1.58; the peak RSS 3% higher (189-191 MB against 184 MB).
"""

from __future__ import annotations

import gc

# Collections of the middle generation before the oldest is collected (CPython: 10).
FULL_AFTER = 100


def freeze_startup_heap() -> int:
    """Collect what startup left as garbage, then move every object alive now out of
    the collector's reach, and collect the oldest generation less often (FULL_AFTER); the
    number of objects frozen so far. Only for a process that is a worker (its startup
    heap lives as long as it does): a cycle among these objects that became garbage
    later would never be collected."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_AFTER)
    return gc.get_freeze_count()
