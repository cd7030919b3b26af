"""From a finished step to the one atomic commit that records it.

Shared by the worker (a step it ran) and by `resume --hitl-response` (a step a human
answered). Pure apart from the clock: the planner decides, then human-in-the-loop
steps become a pause, budgets may pause, artifacts render on completion.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from strands_durable.errors import SpecError, TemplateError
from strands_durable.models import (
    Event,
    EventType,
    SessionStatus,
    StepJob,
    StepKind,
    StepResult,
    iso_of_ms,
    now_ms,
)
from strands_durable.patterns import Decision, PlanContext, planner_for
from strands_durable.patterns.base import HITL_AGENT
from strands_durable.planning.artifacts import TraceSource, render_artifacts
from strands_durable.planning.budgets import Spend, exceeded, limits
from strands_durable.planning.notes import with_notes
from strands_durable.planning.trace import render_trace, traced
from strands_durable.spec.model import Spec
from strands_durable.store.records import CommitRequest, Compaction

FINAL_RESPONSE = "final_response"


@dataclass(frozen=True)
class Snapshot:
    """The session as a commit is planned against it."""

    spec: Spec
    fields: Mapping[str, str]
    results: Mapping[str, StepResult]
    session_id: str

    @property
    def version(self) -> int:
        return int(self.fields.get("version") or 0)

    @property
    def state(self) -> dict[str, Any]:
        return dict(json.loads(self.fields.get("state") or "{}"))

    @property
    def variables(self) -> dict[str, Any]:
        return dict(json.loads(self.fields.get("variables") or "{}"))

    @property
    def waiting(self) -> list[dict[str, Any]]:
        return list(json.loads(self.fields.get("waiting") or "[]"))

    def context(self) -> PlanContext:
        return PlanContext(spec=self.spec, variables=self.variables, state=self.state,
                           results=self.results, session_id=self.session_id)


def session_names(snapshot: Snapshot, result: StepResult) -> dict[str, Any]:
    """What strands-cli's execution context tells every artifact about the run itself
    (the planner's own context wins over these)."""
    f = snapshot.fields
    started_ms = int(f.get("started_ms") or now_ms())
    duration_s = round((now_ms() - started_ms) / 1000, 3)
    tokens = int(f.get("tokens_in") or 0) + int(f.get("tokens_out") or 0) + result.tokens
    return {"session_id": snapshot.session_id, "spec_name": snapshot.spec.name,
            "pattern_type": snapshot.spec.pattern.type, "status": "completed",
            "duration_s": duration_s, "execution_time": duration_s,
            "cumulative_tokens": tokens}


def decide(snapshot: Snapshot, result: StepResult) -> tuple[Decision, dict[str, str]]:
    """The planner's decision and, on completion, the rendered artifacts. A template or
    spec error at run time fails the session, naming the step and the field."""
    ctx = snapshot.context()
    try:
        decision = planner_for(ctx.spec.pattern.type).advance(ctx, result)
        artifacts = (render_artifacts(ctx.spec, {**session_names(snapshot, result),
                                                 **decision.artifact_context},
                                      trace=trace_source(snapshot, result))
                     if decision.status == SessionStatus.COMPLETED else {})
        return decision, artifacts
    except (TemplateError, SpecError) as exc:
        return Decision(state=dict(ctx.state), status=SessionStatus.FAILED,
                        reason=f"step {result.key}: {exc}"), {}


def trace_source(snapshot: Snapshot, result: StepResult) -> TraceSource | None:
    """`{{ TRACE }}` from the spans every committed step carries, this one's last."""
    if not traced(snapshot.spec):
        return None
    traces = [r.trace for r in snapshot.results.values()] + [result.trace]
    return lambda max_bytes: render_trace(snapshot.spec, snapshot.session_id, traces,
                                          max_bytes)


def waiting_entry(job: StepJob, at_ms: int) -> dict[str, Any]:
    timeout_s = int(job.meta.get("timeout_seconds") or 0)
    return {"step": job.key, "prompt": job.meta.get("prompt", job.input),
            "context_display": job.meta.get("context_display", ""),
            "default": job.meta.get("default"),
            "timeout_at_ms": at_ms + timeout_s * 1000 if timeout_s else None,
            "job": job.to_json()}


WAITING_FOR_HUMAN = "waiting for human input"


def waiting_reason(waiting: Sequence[Mapping[str, Any]]) -> str:
    """The paused_reason of a session that waits for a human (resume tells it by this)."""
    return f"{WAITING_FOR_HUMAN} at {waiting[0]['step']}: {waiting[0]['prompt']}"


def timeout_job(job: StepJob) -> StepJob:
    """Travels through the timer set; applies the step's default if still unanswered."""
    return StepJob(session_id=job.session_id, key=job.key, agent=job.agent, input="",
                   kind=StepKind.HITL_TIMEOUT,
                   meta={**job.meta, "default": job.meta.get("default") or ""})


def plan_commit(snapshot: Snapshot, job: StepJob, result: StepResult, *, entry_id: str,
                consumer: str, new_messages: Sequence[dict[str, Any]] = (),
                compaction: Compaction | None = None) -> CommitRequest:
    decision, artifacts = decide(snapshot, result)
    decision, artifacts, result = with_notes(snapshot.spec, snapshot.results, job, result,
                                             decision, artifacts)
    at_ms = now_ms()
    at = iso_of_ms(at_ms)  # one instant for both
    status, reason = decision.status, decision.reason
    runnable = [j for j in decision.schedule if j.kind != StepKind.HITL]
    human = [j for j in decision.schedule if j.kind == StepKind.HITL]

    waiting = [w for w in snapshot.waiting if w["step"] != job.key]
    waiting += [waiting_entry(j, at_ms) for j in human]
    timers = [(w["timeout_at_ms"], timeout_job(StepJob.from_json(w["job"])))
              for w in waiting if w["step"] in {j.key for j in human} and w["timeout_at_ms"]]
    if status == SessionStatus.RUNNING and waiting and not runnable:
        status = SessionStatus.PAUSED
        reason = waiting_reason(waiting)
    if status == SessionStatus.RUNNING:
        f = snapshot.fields
        spend = Spend(
            tokens=int(f.get("tokens_in") or 0) + int(f.get("tokens_out") or 0) + result.tokens,
            steps=int(f.get("steps") or 0) + 1,
            duration_s=(at_ms - int(f.get("started_ms") or at_ms)) / 1000)
        over = exceeded(spend, limits(snapshot.spec,
                                      json.loads(f.get("budget_overrides") or "{}")))
        if over is not None:
            status, reason = SessionStatus.PAUSED, over

    events = [Event(EventType.STEP_COMPLETED, step=job.key, attempt=job.attempt, worker=consumer,
                    at=at)]
    events += [Event(EventType.STEP_SCHEDULED, step=j.key, attempt=j.attempt, at=at)
               for j in decision.schedule]
    if status != SessionStatus.RUNNING:
        events.append(Event(EventType.session_became(status), step=job.key, worker=consumer, at=at,
                            detail=reason))
    state = decision.state
    if status == SessionStatus.COMPLETED and decision.final_response is not None:
        # The session's result (the accepted draft, the reduce step...), which need not
        # be the last step's reply: kept with the final pattern_state.
        state = {**state, FINAL_RESPONSE: decision.final_response}
    return CommitRequest(
        job=job, entry_id=entry_id, consumer=consumer, expected_version=snapshot.version,
        result=result, state=state, status=status, reason=reason,
        new_messages=new_messages, compaction=compaction, next_jobs=runnable,
        artifacts=artifacts, events=events,
        now_iso=at, now_ms=at_ms, waiting=waiting, timers=timers,
        answers_human=job.agent == HITL_AGENT,
    )
