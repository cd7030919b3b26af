"""What the store takes and gives: typed requests for its writes and decoded answers
of its reads (the Redis layout stays inside the store)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from strands_durable.models import Event, SessionStatus, StepJob, StepResult, TokenUsage


@dataclass(frozen=True)
class NewSession:
    workflow_name: str
    pattern_type: str
    spec_hash: str  # sha256 of the spec text as submitted (the text itself is not kept)
    spec_json: str  # the effective spec: what every reader rebuilds it from
    spec_digest: str
    source: str
    variables: dict[str, Any]
    state: dict[str, Any]
    jobs: Sequence[StepJob]
    status: SessionStatus
    created_at: str
    created_ms: int
    idempotency_key: str | None = None
    request_digest: str = ""  # what the idempotency key is bound to (sessions/start.py)
    error: str = ""
    paused_reason: str = ""
    waiting: Sequence[dict[str, Any]] = ()
    timers: Sequence[tuple[int, StepJob]] = ()
    # Its share of a busy provider key (worker/capacity.py); None: the default.
    priority: int | None = None
    # The tenant it belongs to (core/access.py); the default one is not written.
    namespace: str = "default"
    # Its webhook subscription (core/webhooks.WebhookSubscription as JSON); '': the
    # fleet default, if any (scheduler/webhooks.py).
    webhook: str = ""


@dataclass(frozen=True)
class SessionRecord:
    """A session's metadata hash, decoded."""

    session_id: str
    status: SessionStatus
    workflow_name: str
    pattern_type: str
    spec_hash: str
    created_at: str
    updated_at: str
    error: str | None
    paused_reason: str | None
    version: int
    state: dict[str, Any]
    variables: dict[str, Any]
    token_usage: TokenUsage
    steps_committed: int
    spec_digest: str
    started_ms: int
    raw: dict[str, str] = field(repr=False)

    @classmethod
    def from_hash(cls, session_id: str, h: dict[str, str]) -> SessionRecord:
        by_agent = {k[4:]: int(v) for k, v in h.items() if k.startswith("tok:")}
        return cls(
            session_id=session_id,
            status=SessionStatus(h["status"]),
            workflow_name=h.get("workflow_name", ""),
            pattern_type=h.get("pattern_type", ""),
            spec_hash=h.get("spec_hash", ""),
            created_at=h.get("created_at", ""),
            updated_at=h.get("updated_at", ""),
            error=h.get("error") or None,
            paused_reason=h.get("paused_reason") or None,
            version=int(h.get("version", 0)),
            state=json.loads(h.get("state") or "{}"),
            variables=json.loads(h.get("variables") or "{}"),
            token_usage=TokenUsage(
                total_input_tokens=int(h.get("tokens_in", 0)),
                total_output_tokens=int(h.get("tokens_out", 0)),
                by_agent=by_agent,
            ),
            steps_committed=int(h.get("steps", 0)),
            spec_digest=h.get("spec_digest", ""),
            started_ms=int(h.get("started_ms", 0)),
            raw=h,
        )

    @property
    def namespace(self) -> str:
        return self.raw.get("namespace") or "default"


# Fields the worker needs to run and plan a step (returned by the gate script).
GATE_FIELDS = ("version", "state", "variables", "spec_digest", "pattern_type", "started_ms",
               "tokens_in", "tokens_out", "steps", "waiting", "budget_overrides",
               "namespace")  # namespace: absent for `default`


@dataclass(frozen=True)
class GateOutcome:
    verdict: Literal["run", "stale", "gone", "committed", "terminal", "held"]
    fields: dict[str, str] = field(default_factory=dict)
    new_results: list[StepResult] = field(default_factory=list)
    journal: dict[str, str] = field(default_factory=dict)  # the step's turns to replay


@dataclass(frozen=True)
class TakenEntry:
    """An entry take.lua made pending under the worker, with its gate already decided;
    `gate` None: not gated there (gate.lua decides, as for a plain read)."""

    entry_id: str
    fields: dict[str, str]
    gate: GateOutcome | None = None
    order_len: int = 0  # the session's commit-order length at the gate ('run')
    # The step's conversation lane at the gate: its length and newest items ('run').
    lane: tuple[int, list[str]] | None = None
    # The session's newest committed results (JSON, commit order; None: a key of the
    # order without its result), when another consumer committed its last step: the
    # ones this worker's cache may lack.
    tail: list[str | None] = field(default_factory=list)


@dataclass(frozen=True)
class Compaction:
    """A step's compaction of its lane: `summary` (a user message) stands for every
    message of the lane but the `keep` newest ones before it (store/conversation.py)."""

    summary: dict[str, Any]
    keep: int

    def __post_init__(self) -> None:
        if self.keep < 0:
            raise ValueError(f"Compaction.keep must be >= 0, got {self.keep}")


@dataclass(frozen=True)
class CommitRequest:
    job: StepJob
    entry_id: str
    consumer: str
    expected_version: int
    result: StepResult
    state: dict[str, Any]
    status: SessionStatus
    reason: str = ""
    new_messages: Sequence[dict[str, Any]] = ()
    replace_conversation: bool = False
    # The lane compacted by this step (after its new messages), or None.
    compaction: Compaction | None = None
    next_jobs: Sequence[StepJob] = ()
    artifacts: dict[str, str] = field(default_factory=dict)
    events: Sequence[Event] = ()
    now_iso: str = ""
    now_ms: int = 0
    # Human-in-the-loop steps still unanswered after this commit, and their timeouts.
    waiting: Sequence[dict[str, Any]] = ()
    timers: Sequence[tuple[int, StepJob]] = ()
    # A human's answer (or its default after the timeout): a session paused waiting for
    # it runs again, with what was held back. The planner knows; the script is told.
    answers_human: bool = False


@dataclass(frozen=True)
class ClaimedEntries:
    cursor: str  # where the next call goes on
    entries: list[tuple[str, dict[str, str]]]  # (entry id, fields) now pending under us
    at_end: bool  # nothing left to look at after the cursor


@dataclass(frozen=True)
class CommitOutcome:
    verdict: Literal["ok", "stale", "gone", "duplicate", "conflict"]
    version: int = 0
    status: str = ""
    bytes_written: int = 0  # the checkpoint's size, when written (see commit_bytes)
    position: int = 0  # 'ok': the result's 1-based place in the session's commit order
    # 'ok': what the commit took (take_next); 'stale': what it took when it applied
    # before, its reply lost and the commit sent again
    taken: tuple[TakenEntry, ...] = ()
    result_json: str = ""  # 'ok': the result as stored


def commit_bytes(result_json: str, state_json: str, messages: Sequence[str],
                 jobs: Sequence[str], artifacts: Mapping[str, str]) -> int:
    """What a commit writes: the result, the state (twice: meta and the checkpoint),
    the new conversation turns, the next jobs and the artifacts."""
    return (len(result_json) + 2 * len(state_json) + sum(map(len, messages))
            + sum(map(len, jobs)) + sum(len(k) + len(v) for k, v in artifacts.items()))


# A session's event stream keeps about this many of its newest events (DURABLE_EVENTS_MAX).
DEFAULT_EVENTS_MAX = 10_000


@dataclass(frozen=True)
class NewFork:
    """A session forked from a checkpoint, as fork.lua writes it."""

    fields: dict[str, Any]  # meta hash fields (spec snapshot, state, tokens, ...)
    results: Sequence[tuple[str, str]]  # (step, result JSON) in commit order
    checkpoints: Sequence[str]  # checkpoint JSON texts, 1..n
    lanes: Sequence[tuple[str, Sequence[str]]]  # (lane, message JSON texts)
    jobs: Sequence[StepJob]
    events: Sequence[Event]
    status: SessionStatus
    created_ms: int
    timers: Sequence[tuple[int, StepJob]] = ()


class IndexEntry(NamedTuple):
    """A session in a sorted index, with its score (last update, epoch ms)."""

    session_id: str
    score: float


# A stream entry: (entry id, fields).
StreamEntry = tuple[str, dict[str, str]]


@dataclass(frozen=True)
class AutoClaimed:
    """What one XAUTOCLAIM round took over: entries whose fields are None were deleted
    from the stream while pending."""

    cursor: str  # "0-0" once the whole pending list was looked through
    entries: list[tuple[str, dict[str, str] | None]]


@dataclass(frozen=True)
class RunningFields:
    """What the duration watchdog reads of a running session's meta hash."""

    session_id: str
    started_ms: int
    spec_digest: str
    budget_overrides: str  # JSON object, '' when never set
