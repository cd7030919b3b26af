"""Session domain models (seed 001, with `cancelled` added) and the records a step leaves."""

from __future__ import annotations

import json
import json.encoder
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypedDict

from pydantic import BaseModel, Field


def _compact_encoder() -> Callable[[Any], str]:
    """Compact JSON, exactly as json.dumps(value, separators=(",", ":")) writes it, from
    one C encoder made once: `JSONEncoder.encode` makes a new one on every call, a third
    of the cost of the small values a step writes about ten of. No circular-reference
    check: what is encoded comes from JSON or from typed records (a cycle would end in
    RecursionError instead of ValueError)."""
    plain = json.JSONEncoder(separators=(",", ":"))
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # an interpreter without the C accelerator
        return plain.encode
    encode = make(None, plain.default, json.encoder.encode_basestring_ascii, None, ":", ",",
                  False, False, True)

    def compact(value: Any) -> str:
        return "".join(encode(value, 0))

    return compact


compact_json = _compact_encoder()


class SessionStatus(StrEnum):
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in (SessionStatus.COMPLETED, SessionStatus.FAILED, SessionStatus.CANCELLED)


class TokenUsage(BaseModel):
    total_input_tokens: int = 0
    total_output_tokens: int = 0
    by_agent: dict[str, int] = Field(default_factory=dict)


# A session's share of a busy provider key goes with its priority (worker/capacity.py):
# a session of priority 20 has two turns for each of one of the default's.
PRIORITY_MIN, PRIORITY_DEFAULT, PRIORITY_MAX = 1, 10, 100


class EventType(StrEnum):
    SESSION_STARTED = "session_started"
    STEP_SCHEDULED = "step_scheduled"
    STEP_STARTED = "step_started"
    STEP_COMPLETED = "step_completed"
    STEP_FAILED = "step_failed"
    STEP_RETRIED = "step_retried"
    STEP_RECLAIMED = "step_reclaimed"
    STEP_DEAD_LETTERED = "step_dead_lettered"
    STEP_REQUEUED = "step_requeued"
    SESSION_PAUSED = "session_paused"
    SESSION_RESUMED = "session_resumed"
    SESSION_COMPLETED = "session_completed"
    SESSION_FAILED = "session_failed"
    SESSION_CANCELLED = "session_cancelled"
    SESSION_STUCK = "session_stuck"  # the scheduler saw no progress (scheduler/watchdog.py)
    # A worker holding the step stopped beating; the step runs again elsewhere
    # (store/lua/declare_dead.lua).
    WORKER_DECLARED_DEAD = "worker_declared_dead"
    # A model request of the step waits for its provider key's capacity (worker/capacity.py).
    CAPACITY_WAIT = "capacity_wait"
    # ... and has its turn after waiting: the request goes out.
    CAPACITY_GRANTED = "capacity_granted"
    TOOL_CALL_STARTED = "tool_call_started"
    TOOL_CALL_COMPLETED = "tool_call_completed"

    @classmethod
    def session_became(cls, status: SessionStatus) -> EventType:
        """The event that records a session entering `status`."""
        return cls(f"session_{status.value}")


def now_iso() -> str:
    """UTC now to the millisecond, as `2026-11-26T12:00:00.123Z`."""
    return iso_of_ms(now_ms())


def now_ms() -> int:
    return int(time.time() * 1000)


def utc_text(ms: int | None, missing: str = "-") -> str:
    """`ms` since the epoch to the second, as tables show it (`2026-11-28 21:07:13Z`);
    `missing` for none."""
    if ms is None:
        return missing
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


# The second's text, kept: a worker stamps each step with the time two or three times,
# and formatting a datetime every time was a few microseconds each.
_second_text: tuple[int, str] = (-1, "")


def iso_of_ms(ms: int) -> str:
    """`ms` since the epoch as now_iso writes it (UTC, milliseconds, a `Z`)."""
    global _second_text
    second, milli = divmod(ms, 1000)
    kept = _second_text
    if kept[0] != second:
        kept = _second_text = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{kept[1]}.{milli:03d}Z"


class StepKind(StrEnum):
    """What runs a step: an agent, a human's answer, or the timer that applies a human
    step's default when nobody answered in time."""

    AGENT = "agent"
    HITL = "hitl"
    HITL_TIMEOUT = "hitl_timeout"


@dataclass(frozen=True)
class StepJob:
    """One step to run, as it travels on the stream; its input is rendered already."""

    session_id: str
    key: str
    agent: str
    input: str
    system_prompt: str = ""  # the agent's prompt, rendered like the input
    attempt: int = 1
    lane: str = ""  # conversation lane; "" means the agent's own
    kind: StepKind = StepKind.AGENT
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def conversation_lane(self) -> str:
        return self.lane or self.agent

    def gate_fields(self) -> tuple[str, str, str, str]:
        """What its stream entry carries beside its JSON, so that a take gates it without
        decoding the job (store/lua/_lib.lua enqueue): step, attempt, lane, kind."""
        return self.key, str(self.attempt), self.conversation_lane, self.kind.value

    def to_fields(self) -> dict[str, str]:
        step, attempt, lane, kind = self.gate_fields()
        return {"sid": self.session_id, "step": step, "attempt": attempt, "lane": lane,
                "kind": kind, "job": self.to_json()}

    def to_json(self) -> str:
        # Its fields as they are: the same JSON as asdict's, without its deep copy.
        return compact_json(vars(self))

    @classmethod
    def from_json(cls, text: str | bytes) -> StepJob:
        fields = json.loads(text)
        return cls(**{**fields, "kind": StepKind(fields.get("kind", StepKind.AGENT))})

    def retry(self) -> StepJob:
        return StepJob(**{**asdict(self), "attempt": self.attempt + 1})


class SpanStatus(TypedDict):
    status_code: str  # UNSET | OK | ERROR
    description: str | None


class SpanEvent(TypedDict):
    name: str
    timestamp: str
    attributes: dict[str, Any]


class SpanRecord(TypedDict):
    """One finished span in strands-cli's trace format (its TraceCollector.add_span)."""

    name: str
    start_time: str  # ISO 8601, milliseconds
    end_time: str
    duration_ms: float
    attributes: dict[str, Any]
    events: list[SpanEvent]
    status: SpanStatus


class StepTrace(TypedDict):
    """The spans of the run that committed a step (its span last), for `{{ TRACE }}`:
    already redacted per telemetry.redact, oldest first, `evicted` dropped by its bounds."""

    spans: list[SpanRecord]
    evicted: int


@dataclass(frozen=True)
class StepResult:
    """What a committed step leaves behind (append-only, one per step key)."""

    key: str
    agent: str
    response: str
    input_tokens: int = 0
    output_tokens: int = 0
    attempt: int = 1
    worker: str = ""
    committed_at: str = ""
    duration_ms: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)
    # Only for a session whose spec has telemetry.otel, when sampled (left out of the
    # JSON otherwise: an untraced step's record is unchanged).
    trace: StepTrace | None = None

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_json(self) -> str:
        # Its fields as they are (asdict would deep-copy a trace of many spans first).
        fields = dict(vars(self))
        if self.trace is None:
            del fields["trace"]
        return compact_json(fields)

    @classmethod
    def from_json(cls, text: str | bytes) -> StepResult:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class Event:
    type: EventType
    step: str = ""
    attempt: int = 0
    worker: str = ""
    at: str = ""
    detail: str = ""
    # Tool call events only (left out of other events' fields): the tool, the call's
    # ordinal within the step, its outcome (ok | error | timeout) and duration.
    tool: str = ""
    call: int = 0
    outcome: str = ""
    duration_ms: float | None = None

    def to_fields(self) -> dict[str, str]:
        fields = {"type": str(self.type), "step": self.step, "attempt": str(self.attempt),
                  "worker": self.worker, "at": self.at, "detail": self.detail}
        if self.tool:
            fields.update(tool=self.tool, call=str(self.call), outcome=self.outcome)
            if self.duration_ms is not None:
                fields["duration_ms"] = f"{self.duration_ms:.1f}"
        return fields
