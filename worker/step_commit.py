"""What the worker does once a step's commit answered: its metrics, and (an `ok`
commit only, so a step is counted once) its model tokens in its namespace's day for
the quota of tokens per day (sessions/token_quota.py). The count comes after the
commit, in its own key (another slot on a cluster), added up in the worker and written
once a second (worker/token_tally.py): a crash in between misses it."""

from __future__ import annotations

from strands_durable import metrics
from strands_durable.metrics.namespaces import namespace_tokens
from strands_durable.models import StepResult, now_ms
from strands_durable.sessions.token_quota import utc_day
from strands_durable.spec.model import Spec
from strands_durable.store.store import Store
from strands_durable.worker.token_tally import tally_of


async def commit_answered(store: Store, spec: Spec, outcome_verdict: str, bytes_written: int,
                          result: StepResult, fields: dict[str, str], started: float) -> None:
    """The commit's metrics; an `ok` commit's tokens counted in its namespace's day."""
    metrics.commit_timed(started, outcome_verdict, bytes_written)
    if outcome_verdict == "conflict":
        return
    metrics.step_committed(spec.pattern.type, outcome_verdict, result)
    if outcome_verdict != "ok":
        return
    tokens = result.input_tokens + result.output_tokens
    if tokens <= 0:  # a step without a model call (a human's answer, a no-op)
        return
    namespace = fields.get("namespace") or "default"
    namespace_tokens(namespace, tokens)
    # Added up in the worker and written once a second (worker/token_tally.py).
    tally_of(store).add(namespace, utc_day(now_ms()), tokens)


