"""After an outage a worker plans only from results the store still holds, as committed."""

from __future__ import annotations

import dataclasses

from strands_durable.models import StepResult
from strands_durable.worker.rewind import history_intact


def result(key: str, worker: str = "w1", at: str = "2026-11-25T10:00:00.000Z",
           attempt: int = 1) -> StepResult:
    return StepResult(key=key, agent="a", response=f"reply of {key}", worker=worker,
                      committed_at=at, attempt=attempt)


def test_results_still_stored_as_committed_are_intact() -> None:
    held = {"step:0": result("step:0"), "step:1": result("step:1")}
    stored = [result("step:0"), result("step:1"), result("step:2", worker="w2")]
    assert history_intact(held, stored)  # a later commit by another worker is fine


def test_a_lost_commit_is_not_intact() -> None:
    held = {"step:0": result("step:0"), "step:1": result("step:1")}
    assert not history_intact(held, [result("step:0")])


def test_a_lost_commit_run_again_elsewhere_is_not_intact() -> None:
    held = {"step:0": result("step:0"), "step:1": result("step:1")}
    again = [result("step:0"), result("step:1", worker="w2", at="2026-11-25T10:00:05.000Z")]
    assert not history_intact(held, again)
    same_worker_later = [result("step:0"), dataclasses.replace(
        result("step:1"), committed_at="2026-11-25T10:00:09.000Z")]
    assert not history_intact(held, same_worker_later)


def test_nothing_held_is_intact() -> None:
    assert history_intact({}, [])
