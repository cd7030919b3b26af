"""Operator control of a session: pause, resume (after a failure, a pause, a budget,
or with a human's answer), cancel. Each takes the session's lock, so two operators
never interleave, and ends in one atomic script."""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from strands_durable import metrics
from strands_durable.errors import Conflict, InvalidInput, InvalidTransition, SessionNotFound
from strands_durable.models import (
    Event,
    EventType,
    SessionStatus,
    StepJob,
    StepResult,
    now_iso,
    now_ms,
)
from strands_durable.planning.advance import WAITING_FOR_HUMAN, Snapshot, plan_commit
from strands_durable.planning.budgets import BUDGET_NAMES, Spend, exceeded, limits
from strands_durable.sessions.start import spec_digest, spec_json
from strands_durable.spec.loader import LoadedSpec
from strands_durable.spec.model import parse_spec
from strands_durable.spec.problems import clipped
from strands_durable.spec.variables import check_variables_size
from strands_durable.store.locks import Lock
from strands_durable.store.store import SessionRecord, Store

OPERATOR = "operator"
MAX_REPLANS = 20


class NothingToResume(Conflict):
    """A failed session with nothing to retry: it failed outside any step."""

    code = "nothing_to_resume"


class AnswerNotRecorded(Conflict):
    """A human's answer could not be committed (the session moved on, or kept changing)."""


@dataclass(frozen=True)
class ResumeOutcome:
    status: str
    notes: list[str] = field(default_factory=list)


@asynccontextmanager
async def session_lock(store: Store, session_id: str) -> AsyncIterator[Lock]:
    # An unknown id is refused before the lock writes its fencing counter for it.
    if not await store.exists(session_id):
        raise SessionNotFound(session_id)
    async with store.locked(f"session:{session_id}", shard=store.keys.shard(session_id),
                            ttl_ms=30_000, wait_s=10) as lock:
        yield lock


def _checked(session_id: str, action: str, verdict: str, detail: str) -> str:
    if verdict == "gone":
        raise SessionNotFound(session_id)
    if verdict == "invalid":
        raise InvalidTransition(session_id, detail, action)
    if verdict == "nothing":
        raise NothingToResume(f"session {session_id}: nothing to retry; it failed outside "
                              f"any step ({detail})")
    return detail


async def pause(store: Store, session_id: str, reason: str = "paused by operator") -> str:
    async with session_lock(store, session_id):
        at = now_iso()
        verdict, detail = await store.control(
            session_id, "pause", reason=reason, now_iso=at, now_ms=now_ms(),
            events=[Event(EventType.SESSION_PAUSED, worker=OPERATOR, at=at, detail=reason)])
        return _checked(session_id, "pause", verdict, detail)


async def cancel(store: Store, session_id: str, reason: str = "cancelled by operator") -> str:
    async with session_lock(store, session_id):
        at = now_iso()
        verdict, detail = await store.control(
            session_id, "cancel", reason=reason, now_iso=at, now_ms=now_ms(),
            events=[Event(EventType.SESSION_CANCELLED, worker=OPERATOR, at=at, detail=reason)])
        return _checked(session_id, "cancel", verdict, detail)


def parse_budget_sets(items: Mapping[str, str]) -> dict[str, int]:
    """Budget overrides (`budgets.max_tokens` = "20000"; the `budgets.` prefix is
    optional)."""
    parsed: dict[str, int] = {}
    for key, value in items.items():
        name = key.removeprefix("budgets.").removeprefix("runtime.budgets.")
        if name not in BUDGET_NAMES:
            raise InvalidInput(f"budget override {key}: only budgets can be set "
                               f"({', '.join('budgets.' + n for n in BUDGET_NAMES)})")
        try:
            parsed[name] = int(value)
        except ValueError:
            raise InvalidInput(f"budget override {key}={value}: not a whole number"
                               ) from None
        if parsed[name] < 1:
            raise InvalidInput(f"budget override {key}={value}: a budget must be at least 1")
    return parsed


def parse_sets(items: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, int]]:
    """`--set K=V`: budgets (`budgets.max_steps=50`, or a bare budget name) and, for
    anything else, input variables (`topic=x`, also `inputs.values.topic=x`)."""
    budgets: dict[str, str] = {}
    variables: dict[str, Any] = {}
    for key, value in items.items():
        name = key.removeprefix("runtime.").removeprefix("budgets.")
        if key.startswith(("budgets.", "runtime.budgets.")) or name in BUDGET_NAMES:
            budgets[key] = value
        else:
            variables[key.removeprefix("inputs.values.")] = value
    return variables, parse_budget_sets(budgets)


@metrics.timed_resume
async def resume(store: Store, session_id: str, *, hitl_response: str | None = None,
                 variables: Mapping[str, Any] | None = None,
                 budget_sets: Mapping[str, int] | None = None,
                 new_spec: LoadedSpec | None = None) -> ResumeOutcome:
    async with session_lock(store, session_id):
        record = await store.get_session(session_id)
        if record.status not in (SessionStatus.PAUSED, SessionStatus.FAILED) and not (
                hitl_response is not None and record.status == SessionStatus.RUNNING):
            raise InvalidTransition(session_id, record.status.value, "resume")
        sets, notes = _settings_changes(record, variables, budget_sets, new_spec)
        spec = parse_spec(sets.get("spec_json") or await store.spec_json(session_id))
        waiting = json.loads(record.raw.get("waiting") or "[]")
        if hitl_response is not None:
            if not waiting:
                raise Conflict(f"session {session_id} is not waiting for human input")
            await store.set_fields(session_id, sets)
            status = await _answer(store, session_id, spec, waiting[0], hitl_response)
            return ResumeOutcome(status, notes)
        if waiting and record.status == SessionStatus.PAUSED and \
                (record.paused_reason or "").startswith(WAITING_FOR_HUMAN):
            raise Conflict(f"session {session_id} waits for human input at "
                           f"{waiting[0]['step']}: {waiting[0]['prompt']!r}; it goes on "
                           f"once a human's answer is given")
        overrides = {**json.loads(record.raw.get("budget_overrides") or "{}"),
                     **(budget_sets or {})}
        spend = Spend(tokens=record.token_usage.total_input_tokens
                      + record.token_usage.total_output_tokens,
                      steps=record.steps_committed,
                      duration_s=(now_ms() - record.started_ms) / 1000)
        if record.status == SessionStatus.PAUSED and record.raw.get("paused_at_ms"):
            spend = Spend(spend.tokens, spend.steps,
                          (int(record.raw["paused_at_ms"]) - record.started_ms) / 1000)
        over = exceeded(spend, limits(spec, overrides))
        if over is not None:
            raise Conflict(f"session {session_id}: {over}")
        at = now_iso()
        verdict, detail = await store.control(
            session_id, "resume", now_iso=at, now_ms=now_ms(), sets=sets,
            reason=record.paused_reason or "",
            events=[Event(EventType.SESSION_RESUMED, worker=OPERATOR, at=at,
                          detail="; ".join(notes))])
        # A new spec hash is indexed by the same script (`run --auto-resume` finds it).
        return ResumeOutcome(_checked(session_id, "resume", verdict, detail), notes)


def _settings_changes(record: SessionRecord, variables: Mapping[str, Any] | None,
                      budget_sets: Mapping[str, int] | None,
                      new_spec: LoadedSpec | None) -> tuple[dict[str, str], list[str]]:
    sets: dict[str, str] = {}
    notes: list[str] = []
    if variables:
        merged = {**record.variables, **variables}
        check_variables_size(merged, f"session {record.session_id}")
        sets["variables"] = json.dumps(merged)
        # The event says what changed, not the values whole (a value may be long).
        notes.append("variables: " + ", ".join(f"{k}={clipped(str(v), 80)}"
                                              for k, v in variables.items()))
    if budget_sets:
        merged = {**json.loads(record.raw.get("budget_overrides") or "{}"), **budget_sets}
        sets["budget_overrides"] = json.dumps(merged)
        notes.append("budgets: " + ", ".join(f"{k}={v}" for k, v in budget_sets.items()))
    if new_spec is not None:
        if new_spec.spec.pattern.type != record.pattern_type:
            raise InvalidInput(f"session {record.session_id}: the new spec is a "
                               f"{new_spec.spec.pattern.type} workflow, the session a "
                               f"{record.pattern_type} one")
        if new_spec.spec_hash != record.spec_hash:
            text = spec_json(new_spec)
            sets.update(spec_json=text, spec_hash=new_spec.spec_hash,
                        spec_digest=spec_digest(text))
            notes.append(f"spec changed ({record.spec_hash[:12]} -> "
                         f"{new_spec.spec_hash[:12]}); continuing with the new one")
    return sets, notes


async def _answer(store: Store, session_id: str, spec: Any, waiting: Mapping[str, Any],
                  response: str) -> str:
    """Commit a human's answer as the waiting step's result, then plan what follows."""
    job = StepJob.from_json(waiting["job"])
    result = StepResult(key=job.key, agent="hitl", response=response, worker=OPERATOR,
                        committed_at=now_iso(), meta={**job.meta, "prompt": waiting["prompt"]})
    for _ in range(MAX_REPLANS):
        fields = await store.plan_fields(session_id)
        results = OrderedDict((r.key, r) for r in await store.results(session_id))
        snapshot = Snapshot(spec=spec, fields=fields, results=results, session_id=session_id)
        # Planning renders the next steps' templates: CPU work, kept off the event loop.
        request = await asyncio.to_thread(plan_commit, snapshot, job, result, entry_id="",
                                          consumer=OPERATOR)
        request = _with_resumed_event(request)
        outcome = await store.commit(request)
        if outcome.verdict == "ok":
            return outcome.status
        if outcome.verdict != "conflict":
            raise AnswerNotRecorded(f"session {session_id}: could not record the answer to "
                                 f"{job.key} ({outcome.verdict})")
    raise AnswerNotRecorded(f"session {session_id}: too many concurrent changes; try again")


def _with_resumed_event(request: Any) -> Any:
    from dataclasses import replace

    event = Event(EventType.SESSION_RESUMED, step=request.job.key, worker=OPERATOR,
                  at=request.now_iso, detail="human input received")
    return replace(request, events=[event, *request.events])
