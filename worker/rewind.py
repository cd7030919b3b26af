"""A worker's memory of a session outliving writes that Redis lost.

A failover promotes a replica that may lack the last acknowledged commits (replication is
asynchronous), and a Redis restart may lose its last second of writes. A worker keeps each
session's committed results (step_runner.ResultsCache) and plans a step's commit from
them; after such a loss it could plan, and commit, from a result the store no longer has
(or has again, from another run of that step, with another reply).

Every loss comes with an outage this worker sees: the primary it talked to went away.
So results held from before an outage are checked against the store before a commit is
planned from them; if any is gone or differs, the step runs again from what is stored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from strands_durable.models import StepResult


def history_intact(held: Mapping[str, StepResult], stored: Sequence[StepResult]) -> bool:
    """Every result held is still stored, from the same run of its step (a re-run after a
    lost commit is another worker, attempt or commit time)."""
    by_key = {result.key: result for result in stored}
    return all(_same_run(result, by_key.get(key)) for key, result in held.items())


def _same_run(held: StepResult, stored: StepResult | None) -> bool:
    return stored is not None and (held.committed_at, held.worker, held.attempt) == (
        stored.committed_at, stored.worker, stored.attempt)
