"""The worker's per-session cache of committed results: positions in the session's
commit-order list, read by steps of one session running side by side."""

from __future__ import annotations

from strands_durable.models import StepResult
from strands_durable.worker.results_cache import ResultsCache, SessionCache


def r(key: str) -> StepResult:
    return StepResult(key=key, agent="a", response=key)


def test_overlapping_reads_count_positions_once() -> None:
    cache = SessionCache()
    # Two steps of the session gated at the same time both read from position 0.
    ResultsCache.extend(cache, 0, [r("a"), r("b")])
    ResultsCache.extend(cache, 0, [r("a"), r("b")])
    assert cache.count == 2
    # A later read from where the cache stands brings the next commit, in order.
    ResultsCache.extend(cache, cache.count, [r("c")])
    assert cache.count == 3
    assert list(cache.results) == ["a", "b", "c"]


def test_a_stale_read_that_reaches_further_still_advances() -> None:
    cache = SessionCache()
    ResultsCache.extend(cache, 0, [r("a")])
    ResultsCache.extend(cache, 0, [r("a"), r("b"), r("c")])  # began earlier, saw more
    assert cache.count == 3 and list(cache.results) == ["a", "b", "c"]
    ResultsCache.extend(cache, 1, [r("b")])  # began earlier, saw less: changes nothing
    assert cache.count == 3 and list(cache.results) == ["a", "b", "c"]
