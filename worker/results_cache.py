"""The committed results a worker keeps per session, so a step's gate reads only what
is new: bounded by results held, least recently used sessions evicted first."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from strands_durable.models import StepResult


@dataclass
class SessionCache:
    """Committed results of one session, in commit order (they never change). A plain
    dict keeps that order and copies in one C call (a planning snapshot per step)."""

    results: dict[str, StepResult] = field(default_factory=dict)
    count: int = 0  # entries of the session's order list already seen
    tally: Tally | None = None  # the ResultsCache's count of results it holds
    outages: int = 0  # Redis outages this worker had seen when these were read (rewind.py)


@dataclass
class Tally:
    held: int = 0


class ResultsCache:
    """The sessions this worker ran steps of lately, least recently used evicted first,
    bounded by the results held rather than by sessions: a worker serving thousands of
    short sessions keeps them all, so a gate reads only what is new whatever the session
    count, while a few very long sessions cannot hold unbounded memory."""

    def __init__(self, max_results: int = 200_000, max_sessions: int = 20_000) -> None:
        self._sessions: OrderedDict[str, SessionCache] = OrderedDict()
        self._max_results = max_results
        self._max_sessions = max_sessions
        self.tally = Tally()  # results held, all sessions together

    def get(self, session_id: str, outages: int = 0) -> SessionCache:
        """The session's results; read afresh after an outage (it may have lost writes)."""
        cache = self._sessions.get(session_id)
        if cache is not None and cache.outages != outages:
            self.tally.held -= len(cache.results)
            cache.tally = None  # a step still running with it checks it (rewind.py)
            cache = None
        if cache is None:
            cache = self._sessions[session_id] = SessionCache(tally=self.tally,
                                                              outages=outages)
        self._sessions.move_to_end(session_id)
        self._evict()
        return cache

    def _evict(self) -> None:
        # Never the session just asked for (the last one): it is about to run.
        while len(self._sessions) > 1 and (len(self._sessions) > self._max_sessions
                                           or self.tally.held > self._max_results):
            _, evicted = self._sessions.popitem(last=False)
            evicted.tally = None  # one evicted while its step runs no longer counts
            self.tally.held -= len(evicted.results)

    @staticmethod
    def extend(cache: SessionCache, start: int, new: list[StepResult]) -> None:
        """Results read from the session's commit-order list at position `start`. Reads
        overlap when steps of one session run side by side on this worker: the count is
        the furthest position read, never a sum (a sum would skip later commits)."""
        before = len(cache.results)
        for result in new[max(cache.count - start, 0):]:
            cache.results[result.key] = result
        cache.count = max(cache.count, start + len(new))
        if cache.tally is not None:
            cache.tally.held += len(cache.results) - before


def brought(tail: list[str | None], missing: int) -> list[StepResult] | None:
    """The `missing` newest results, when a take brought them all (its `tail`: the
    session's newest results, None for a key without its result); else None."""
    wanted = tail[-missing:] if 0 < missing <= len(tail) else [None]
    if None in wanted:
        return None
    return [StepResult.from_json(r) for r in wanted if r is not None]
