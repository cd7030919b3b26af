"""The bench's arithmetic: per-step CPU over a window, percentiles, ratios and the
verdicts of the new targets (no timing is asserted: the inputs are made up)."""

from __future__ import annotations

import math
from typing import Any
from unittest.mock import MagicMock

from bench.latency import LatencyResult, Probe, Window, percentile, ratio
from bench.report_scale import resume_targets, scale_targets
from bench.resume import ResumeResult
from bench.scale import ScaleResult
from bench.specs import chain_spec, chain_text
from strands_durable.store.store import CommitOutcome


def probe() -> Probe:
    return Probe(MagicMock())


def test_cpu_per_step_divides_the_cpu_between_a_windows_commits_by_every_commit_between() -> None:
    p = probe()
    # (process CPU seconds, commits so far) at each commit of a step.
    p.cpu[5] = [(1.000, 10), (1.004, 14)]
    p.cpu[6] = [(1.010, 20)]
    p.cpu[7] = [(9.0, 99)]  # outside the window
    # From the first commit (10) to the last (20): 10 ms over 10 commits.
    assert math.isclose(p.cpu_per_step_us((5, 6)), 1000.0)


async def test_the_cpu_clock_is_read_only_at_commits_of_the_windows_steps() -> None:
    """Reading the process's CPU time is a system call (tens of microseconds on a VM):
    at every commit it inflated what it measured, so only the windows' steps read it."""
    store = MagicMock()

    async def commit(req: Any, take_next: int = 0) -> CommitOutcome:
        return CommitOutcome("ok")

    store.commit = commit
    p = Probe(store, cpu_spans=((2, 3), (9, 9)))
    p.install()
    try:
        for n in range(1, 11):
            req = MagicMock()
            req.job.meta = {"index": n - 1}
            await store.commit(req)
    finally:
        p.uninstall()
    assert sorted(p.commits) == list(range(1, 11))
    assert sorted(p.cpu) == [2, 3, 9]
    assert [count for _, count in p.cpu[3]] == [3]


def test_cpu_per_step_needs_two_commits() -> None:
    p = probe()
    p.cpu[5] = [(1.0, 1)]
    assert math.isnan(p.cpu_per_step_us((5, 6)))
    assert math.isnan(p.cpu_per_step_us((100, 200)))


def test_windows_gather_the_samples_of_their_steps() -> None:
    p = probe()
    p.commits.update({1: [1.0], 2: [2.0, 3.0], 3: [50.0]})
    p.plans.update({2: [0.5]})
    w = p.window("early", (1, 2))
    assert sorted(w.samples) == [1.0, 2.0, 3.0] and w.p50 == 2.0
    assert p.window("early", (1, 2), plans=True).samples == [0.5]


def test_percentile_is_nearest_rank_and_ratio_refuses_a_zero_base() -> None:
    assert percentile([3.0, 1.0, 2.0, 4.0], 50) == 2.0
    assert percentile([3.0, 1.0, 2.0, 4.0], 99) == 4.0
    assert math.isnan(percentile([], 50))
    assert ratio(3.0, 2.0) == 1.5
    assert math.isnan(ratio(1.0, 0.0)) and math.isnan(ratio(1.0, float("nan")))


def run(sessions: int, commit_ms: float, plan_ms: float, cpu_us: float) -> LatencyResult:
    every = Window("all", 1, 3, [commit_ms])
    return LatencyResult(sessions, 3, 1.0, every, every, commit_ms, commit_ms, 8, 0, 0.0, 0.0,
                         Window("all", 1, 3, [plan_ms]), Window("all", 1, 3, [plan_ms]),
                         cpu_us, cpu_us)


def test_scale_targets_pass_within_1_2x_and_miss_beyond() -> None:
    flat = ScaleResult(run(100, 1.0, 0.1, 500.0), run(10_000, 1.1, 0.12, 600.0))
    assert [t["pass"] for t in scale_targets(flat)] == [True, True, True]
    assert "10,000 sessions" in scale_targets(flat)[0]["target"]
    grows = ScaleResult(run(100, 1.0, 0.1, 500.0), run(10_000, 1.3, 0.1, 700.0))
    assert [t["pass"] for t in scale_targets(grows)] == [False, True, False]
    assert scale_targets(None) == []


def test_resume_target_is_on_the_median_of_resume_to_next_step() -> None:
    fast = ResumeResult(3, 1000, to_next_step_ms=[4.0, 60.0, 5.0], call_ms=[3.0, 3.0, 4.0])
    assert fast.p50_ms == 5.0 and fast.max_ms == 60.0
    assert resume_targets(fast)[0]["pass"] is True
    slow = ResumeResult(1, 1000, to_next_step_ms=[51.0], call_ms=[50.0])
    assert resume_targets(slow)[0]["pass"] is False


def test_a_long_bench_chain_loads_past_the_default_spec_limits() -> None:
    # 4,000 steps are more YAML values than DURABLE_MAX_SPEC_NODES allows by default;
    # the bench raises the limits for its own specs only.
    loaded = chain_spec(4000)
    assert len(loaded.spec.pattern.config.steps) == 4000
    assert chain_text(4000) == loaded.text
