"""The status document of a session (`durable status --json`, GET /v1/sessions/{id}) and
its summary (`durable sessions list`, GET /v1/sessions): one typed model each, shared by
the CLI and the API."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from strands_durable.models import PRIORITY_DEFAULT, SessionStatus, TokenUsage
from strands_durable.patterns import PlanContext, planner_for
from strands_durable.planning.advance import FINAL_RESPONSE
from strands_durable.spec.model import parse_spec
from strands_durable.store.store import SessionRecord, Store

WAITING_FIELDS = ("step", "prompt", "context_display", "default", "timeout_at_ms")
# The newest events read for the steps waiting on provider capacity (a wait older than
# this many of the session's events is not shown; the session is running all the same).
CAPACITY_EVENTS = 1000
# Events after a step's capacity_wait that say it no longer waits.
ENDS_WAIT = frozenset({"capacity_granted", "step_started", "step_reclaimed", "step_completed",
                       "step_failed", "step_retried", "step_dead_lettered",
                       "worker_declared_dead"})


class SessionSummary(BaseModel):
    model_config = ConfigDict(extra="allow")

    session_id: str
    status: SessionStatus
    workflow_name: str
    pattern_type: str
    spec_hash: str
    created_at: str
    updated_at: str
    error: str | None = None
    paused_reason: str | None = None
    steps_committed: int
    token_usage: TokenUsage
    namespace: str = Field(default="default", description="The tenant the session "
                           "belongs to; found only within it.")


class WaitingStep(BaseModel):
    step: str
    prompt: str
    context_display: str = Field(description="The step's context_display, rendered.")
    default: str | None = Field(description="Applied when the timeout passes.")
    timeout_at_ms: int | None


class CapacityWait(BaseModel):
    """A running step whose model request waits for its provider key's capacity (the
    fleet's limits, its spec's, the shared backoff or other sessions' turns). It is
    not failing: waiting spends no attempt (worker/capacity.py)."""

    step: str
    key: str = Field(description="provider/model[@host]")
    reason: str = Field(description="backoff, in_flight, requests_per_minute, "
                        "tokens_per_minute, fair_share or spec_*")
    since: str = Field(description="When it started waiting (ISO 8601).")


def capacity_waits(events: Sequence[tuple[str, dict[str, str]]]) -> list[CapacityWait]:
    """The steps whose latest word is a capacity_wait, from the session's events."""
    waits: dict[str, CapacityWait] = {}
    for _, f in events:
        kind, step = f.get("type", ""), f.get("step", "")
        if kind == "capacity_wait" and step:
            label, _, rest = f.get("detail", "").rpartition(": ")
            waits[step] = CapacityWait(step=step, key=label, reason=rest.split(",")[0],
                                       since=f.get("at", ""))
        elif kind in ENDS_WAIT:
            waits.pop(step, None)
    return list(waits.values())


class SessionDetail(SessionSummary):
    """The status document of `durable status --json`."""

    variables: dict[str, Any]
    pattern_state: dict[str, Any]
    final_response: str | None = Field(
        default=None, description="What the session produced, once completed.")
    waiting: list[WaitingStep] = Field(
        default_factory=list, description="Human-in-the-loop steps waiting for an answer "
        "(POST .../signal gives it).")
    priority: int = Field(default=PRIORITY_DEFAULT, description="Its share of a busy "
                          "provider key, as submitted (--priority).")
    waiting_for_capacity: list[CapacityWait] = Field(
        default_factory=list, description="Running steps waiting for their provider "
        "key's capacity: the session is running, not stuck or failing.")


async def pattern_state_view(store: Store, record: SessionRecord) -> dict[str, Any]:
    spec = parse_spec(await store.spec_json(record.session_id))
    results = OrderedDict((r.key, r) for r in await store.results(record.session_id))
    ctx = PlanContext(spec=spec, variables=record.variables, state=record.state,
                      results=results, session_id=record.session_id,
                      failed_steps=frozenset(await store.failed_steps(record.session_id)))
    try:
        return planner_for(record.pattern_type).view(ctx)
    except NotImplementedError:
        return dict(record.state)


def summary_fields(record: SessionRecord) -> dict[str, Any]:
    return {
        "session_id": record.session_id,
        "status": record.status,
        "workflow_name": record.workflow_name,
        "pattern_type": record.pattern_type,
        "spec_hash": record.spec_hash,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "error": record.error,
        "paused_reason": record.paused_reason,
        "steps_committed": record.steps_committed,
        "token_usage": record.token_usage,
        "namespace": record.namespace,
    }


def summary(record: SessionRecord) -> SessionSummary:
    return SessionSummary(**summary_fields(record))


async def session_status(store: Store, session_id: str) -> SessionDetail:
    record = await store.get_session(session_id)
    waiting = [WaitingStep.model_validate({k: w.get(k) for k in WAITING_FIELDS})
               for w in json.loads(record.raw.get("waiting") or "[]")]
    return SessionDetail(
        **summary_fields(record),
        variables=record.variables,
        pattern_state=await pattern_state_view(store, record),
        # What the session produced, once completed (see planning/advance.py).
        final_response=record.state.get(FINAL_RESPONSE),
        # What a paused session waits for: the human's prompt and rendered context.
        waiting=waiting,
        priority=int(record.raw.get("priority") or PRIORITY_DEFAULT),
        waiting_for_capacity=capacity_waits(await store.recent_events(
            session_id, CAPACITY_EVENTS)) if record.status == SessionStatus.RUNNING else [])
