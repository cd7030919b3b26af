"""Checkpoints (seed 002): every commit is one. List them, inspect one (with the
pattern_state at that point), and fork a new session from one.

Checkpoint k is the k-th commit: the k-th entry of the session's commit order, with
the pattern_state the planner decided then, and (since commit.lua records it) the
length of the step's conversation lane. A fork copies the results, checkpoints,
token usage and conversations up to checkpoint n into a new session, then re-plans
what follows n by replaying the planner over results 1..n with the (possibly
overridden) variables: the steps scheduled by then and not yet committed are the
ones the fork runs. The original is only read.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from strands_durable.errors import Conflict, NotFound, SpecError, TemplateError
from strands_durable.models import (
    Event,
    EventType,
    SessionStatus,
    StepJob,
    StepResult,
    TokenUsage,
    now_iso,
    now_ms,
)
from strands_durable.patterns import PlanContext, planner_for
from strands_durable.planning.advance import timeout_job, waiting_entry, waiting_reason
from strands_durable.planning.budgets import Spend, exceeded, limits
from strands_durable.sessions.control import session_lock
from strands_durable.spec.model import Spec, parse_spec
from strands_durable.spec.variables import check_variables_size
from strands_durable.store.store import NewFork, SessionRecord, Store

# Events that make the step they name (and every checkpoint after it) not clean.
UNCLEAN_EVENTS = frozenset({EventType.STEP_FAILED, EventType.STEP_RETRIED,
                            EventType.STEP_RECLAIMED, EventType.STEP_DEAD_LETTERED,
                            EventType.STEP_REQUEUED})
# Meta fields a fork copies unchanged: the spec snapshot.
SPEC_FIELDS = ("workflow_name", "pattern_type", "spec_hash", "spec_json",
               "spec_digest", "source")
# Kept by a fork when the original has them (a fork stays in its original's namespace).
INHERITED_FIELDS = ("namespace",)


class CheckpointNotFound(NotFound):
    code = "checkpoint_not_found"

    def __init__(self, session_id: str, n: int, count: int) -> None:
        self.session_id = session_id
        self.n = n
        self.count = count
        have = f"checkpoints 1..{count}" if count else "no checkpoints yet"
        super().__init__(f"session {session_id}: there is no checkpoint {n} ({have})")

    def details(self) -> dict[str, object]:
        return {"session_id": self.session_id, "n": self.n, "count": self.count}


class ForkError(Conflict):
    """The session cannot be forked from that checkpoint (nothing follows it, the
    re-plan fails with the new variables, a budget is already spent...)."""

    code = "fork_refused"


class Checkpoint(BaseModel):
    """One commit (seed 002): clean when it and all before it committed at the first
    attempt with no failure, retry, re-claim or requeue."""

    model_config = ConfigDict(extra="allow")

    n: int
    type: str
    step: str
    attempt: int
    agent: str
    at: str
    status: str
    clean: bool
    tokens: int
    tokens_total: int
    resumable: bool = Field(description="Something follows it: a fork can start here.")
    description: str


class CheckpointDetail(Checkpoint):
    session_id: str
    state: dict[str, Any] = Field(description="The stored pattern_state at this point.")
    pattern_state: dict[str, Any] = Field(description="Its view, as the status shows it.")
    token_usage: TokenUsage
    steps_committed: int


# -- pure ---------------------------------------------------------------------------
def unclean_steps(events: Sequence[tuple[str, Mapping[str, str]]]) -> set[str]:
    return {f.get("step", "") for _, f in events if f.get("type") in UNCLEAN_EVENTS}


def describe(raws: Sequence[Mapping[str, Any]], results: Sequence[StepResult],
             unclean: set[str]) -> list[Checkpoint]:
    """The listing: one entry per checkpoint, numbered from 1. A checkpoint is clean when
    it and every one before it committed at the first attempt with no failure, retry,
    re-claim or requeue of its step (seed 002's is_clean)."""
    out: list[Checkpoint] = []
    clean = True
    tokens = 0
    by_key = {r.key: r for r in results}
    for n, raw in enumerate(raws, start=1):
        step = str(raw.get("step", ""))
        result = by_key.get(step)
        attempt = int(raw.get("attempt") or 1)
        clean = clean and bool(raw.get("clean", True)) and attempt == 1 and step not in unclean
        tokens += result.tokens if result else 0
        status = str(raw.get("status", ""))
        out.append(Checkpoint(
            n=n, type=str(raw.get("type", "step")), step=step, attempt=attempt,
            agent=result.agent if result else "", at=str(raw.get("at", "")),
            status=status, clean=clean,
            tokens=result.tokens if result else 0, tokens_total=tokens,
            # A fork needs something to follow the checkpoint.
            resumable=status != SessionStatus.COMPLETED.value,
            description=f"{step} committed (attempt {attempt}); session {status}",
        ))
    return out


def token_usage(results: Sequence[StepResult]) -> TokenUsage:
    by_agent: dict[str, int] = {}
    for r in results:
        by_agent[r.agent] = by_agent.get(r.agent, 0) + r.tokens
    return TokenUsage(total_input_tokens=sum(r.input_tokens for r in results),
                      total_output_tokens=sum(r.output_tokens for r in results),
                      by_agent=by_agent)


def lane_lengths(raws: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Each conversation lane's length as of the last of `raws` (the latest wins)."""
    lengths: dict[str, int] = {}
    for raw in raws:
        if "lane" in raw and "lane_len" in raw:
            lengths[str(raw["lane"])] = int(raw["lane_len"])
    return lengths


@dataclass(frozen=True)
class Replan:
    """What follows checkpoint n, re-planned with the fork's variables."""

    state: dict[str, Any]
    runnable: tuple[StepJob, ...]
    human: tuple[StepJob, ...]


def replan(spec: Spec, variables: Mapping[str, Any], states: Sequence[Mapping[str, Any]],
           results: Sequence[StepResult], session_id: str, n: int) -> Replan:
    """Replay the planner: start, then each committed result k from the state stored at
    checkpoint k-1, as the worker planned it. The steps scheduled on the way and not
    committed by checkpoint n are the ones still to run."""
    planner = planner_for(spec.pattern.type)
    committed: OrderedDict[str, StepResult] = OrderedDict()
    try:
        decision = planner.start(PlanContext(spec=spec, variables=variables, state={},
                                             results=committed, session_id=session_id))
        scheduled = {j.key: j for j in decision.schedule}
        state: Mapping[str, Any] = decision.state
        for k, result in enumerate(results):
            decision = planner.advance(PlanContext(spec=spec, variables=variables, state=state,
                                                   results=committed, session_id=session_id),
                                       result)
            committed[result.key] = result
            scheduled.update({j.key: j for j in decision.schedule})
            state = states[k]
    except (TemplateError, SpecError) as exc:
        raise ForkError(f"re-planning what follows checkpoint {n} fails: {exc}") from None
    if decision.status == SessionStatus.COMPLETED:
        raise ForkError(f"checkpoint {n} completed the session: nothing follows it; fork "
                        f"from an earlier checkpoint")
    if decision.status == SessionStatus.FAILED:
        raise ForkError(f"re-planning what follows checkpoint {n} fails: {decision.reason}")
    outstanding = [j for key, j in scheduled.items() if key not in committed]
    runnable = tuple(j for j in outstanding if j.kind != "hitl")
    human = tuple(j for j in outstanding if j.kind == "hitl")
    if not runnable and not human:
        raise ForkError(f"nothing is scheduled after checkpoint {n}")
    return Replan(dict(decision.state), runnable, human)


def fork_record(original: SessionRecord, *, n: int, raws: Sequence[Mapping[str, Any]],
                results: Sequence[StepResult], lanes: Mapping[str, Sequence[str]],
                plan: Replan, variables: Mapping[str, Any], budget_overrides: Mapping[str, int],
                clean: Sequence[bool], at: str, at_ms: int) -> NewFork:
    """The new session, as fork.lua writes it (pure)."""
    usage = token_usage(results)
    waiting = [waiting_entry(j, at_ms) for j in plan.human]
    status = SessionStatus.RUNNING
    paused_reason = ""
    if waiting and not plan.runnable:
        status = SessionStatus.PAUSED
        paused_reason = waiting_reason(waiting)
    fields: dict[str, Any] = {name: original.raw.get(name, "") for name in SPEC_FIELDS}
    fields.update({name: original.raw[name] for name in INHERITED_FIELDS
                   if original.raw.get(name)})
    fields.update({
        "variables": json.dumps(dict(variables)), "state": json.dumps(plan.state),
        "created_at": at, "updated_at": at, "started_ms": at_ms, "error": "",
        "paused_reason": paused_reason, "waiting": json.dumps(waiting),
        "tokens_in": usage.total_input_tokens, "tokens_out": usage.total_output_tokens,
        "steps": len(results), "idempotency_key": "",
        "budget_overrides": json.dumps(dict(budget_overrides)),
        "forked_from": original.session_id, "forked_at_checkpoint": n,
    })
    fields.update({f"tok:{agent}": tokens for agent, tokens in usage.by_agent.items()})
    detail = f"forked from {original.session_id} at checkpoint {n} ({raws[-1].get('step')})"
    events = [Event(EventType.SESSION_STARTED, at=at, detail=detail)]
    events += [Event(EventType.STEP_SCHEDULED, step=j.key, attempt=j.attempt, at=at)
               for j in plan.runnable]
    if status == SessionStatus.PAUSED:
        events.append(Event(EventType.SESSION_PAUSED, at=at, detail=paused_reason))
    return NewFork(
        fields=fields,
        results=[(r.key, r.to_json()) for r in results],
        checkpoints=[json.dumps({**raw, "clean": ok}, separators=(",", ":"))
                     for raw, ok in zip(raws, clean, strict=True)],
        lanes=sorted(lanes.items()),
        jobs=plan.runnable,
        events=events,
        status=status,
        created_ms=at_ms,
        timers=[(w["timeout_at_ms"], timeout_job(StepJob.from_json(w["job"])))
                for w in waiting if w["timeout_at_ms"]],
    )


# -- I/O ----------------------------------------------------------------------------
async def _checked_count(store: Store, session_id: str, n: int) -> int:
    count = await store.checkpoint_count(session_id)
    if not 1 <= n <= count:
        raise CheckpointNotFound(session_id, n, count)
    return count


async def _history(store: Store, session_id: str, n: int
                   ) -> tuple[list[dict[str, Any]], list[StepResult]]:
    """Checkpoints 1..n and the results they committed, checked against each other."""
    raws = [json.loads(t) for t in await store.checkpoint_texts(session_id, n)]
    order = await store.step_order(session_id, n)
    if [r.get("step") for r in raws] != order:
        raise Conflict(f"session {session_id}: its checkpoints and its committed steps "
                       f"disagree before checkpoint {n}; it cannot be read as a history")
    return raws, await store.results_of(session_id, order)


async def list_checkpoints(store: Store, session_id: str) -> list[Checkpoint]:
    """Every checkpoint, numbered 1..n: n, type, step, attempt, agent, at, status, clean,
    tokens, tokens_total, resumable, description. SessionNotFound."""
    await store.get_session(session_id)
    count = await store.checkpoint_count(session_id)
    raws, results = await _history(store, session_id, count)
    return describe(raws, results, unclean_steps(await store.events(session_id)))


async def get_checkpoint(store: Store, session_id: str, n: int) -> CheckpointDetail:
    """Checkpoint n as listed, plus `state` (stored pattern_state), `pattern_state` (its
    view, as `status` shows it) and `token_usage` at that point.
    SessionNotFound, CheckpointNotFound."""
    record = await store.get_session(session_id)
    await _checked_count(store, session_id, n)
    raws, results = await _history(store, session_id, n)
    entry = describe(raws, results, unclean_steps(await store.events(session_id)))[-1]
    spec = parse_spec(await store.spec_json(session_id))
    state = dict(raws[-1].get("state") or {})
    ctx = PlanContext(spec=spec, variables=record.variables, state=state,
                      results=OrderedDict((r.key, r) for r in results), session_id=session_id)
    return CheckpointDetail(**entry.model_dump(), session_id=session_id, state=state,
                            pattern_state=planner_for(record.pattern_type).view(ctx),
                            token_usage=token_usage(results), steps_committed=n)


async def fork_from_checkpoint(store: Store, session_id: str, n: int, *,
                               variables: Mapping[str, Any] | None = None,
                               budget_sets: Mapping[str, int] | None = None) -> str:
    """A new session with the original's spec, its results, pattern_state, token usage
    and conversations up to checkpoint n, `variables` overriding the original's, and
    the steps that follow n scheduled. Returns its id; the original is untouched.
    SessionNotFound, CheckpointNotFound, ForkError."""
    async with session_lock(store, session_id):  # no delete of the original mid-read
        original = await store.get_session(session_id)
        await _checked_count(store, session_id, n)
        raws, results = await _history(store, session_id, n)
        lanes = {lane: await store.conversation_head(session_id, lane, length)
                 for lane, length in lane_lengths(raws).items()}
        unclean = unclean_steps(await store.events(session_id))
        spec = parse_spec(await store.spec_json(session_id))
    merged_vars = {**original.variables, **(variables or {})}
    check_variables_size(merged_vars, f"session {session_id}, checkpoint {n}")
    overrides = {**json.loads(original.raw.get("budget_overrides") or "{}"),
                 **(budget_sets or {})}
    usage = token_usage(results)
    over = exceeded(Spend(tokens=usage.total_input_tokens + usage.total_output_tokens,
                          steps=n, duration_s=0.0), limits(spec, overrides))
    if over is not None:
        raise ForkError(f"session {session_id}, checkpoint {n}: {over}")
    new_sid = store.fresh_session_id()
    try:
        # Replaying the planner renders templates: CPU work, kept off the event loop.
        plan = await asyncio.to_thread(replan, spec, merged_vars,
                                       [r.get("state") or {} for r in raws], results,
                                       new_sid, n)
    except ForkError as exc:
        raise ForkError(f"session {session_id}: {exc}") from None
    clean = [entry.clean for entry in describe(raws, results, unclean)]
    fork = fork_record(original, n=n, raws=raws, results=results, lanes=lanes, plan=plan,
                       variables=merged_vars, budget_overrides=overrides, clean=clean,
                       at=now_iso(), at_ms=now_ms())
    await store.create_fork(new_sid, fork)
    return new_sid
