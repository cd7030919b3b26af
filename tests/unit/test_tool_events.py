"""Tool call events: their fields in Redis, their documents (history, API, SSE) and what
`durable watch` shows for a step that calls tools."""

from __future__ import annotations

from strands_durable.api.watch import step_rows
from strands_durable.models import Event, EventType
from strands_durable.sessions.history import event_doc


def test_other_events_keep_their_six_fields() -> None:
    fields = Event(EventType.STEP_STARTED, step="step:0", attempt=1).to_fields()
    assert set(fields) == {"type", "step", "attempt", "worker", "at", "detail"}
    assert "tool" not in event_doc("1-0", fields)


def test_a_tool_event_carries_tool_call_outcome_and_duration() -> None:
    event = Event(EventType.TOOL_CALL_COMPLETED, step="step:0", attempt=1, worker="w",
                  tool="bump", call=2, outcome="timeout", duration_ms=1234.56)
    doc = event_doc("5-0", event.to_fields())
    assert doc == {"id": "5-0", "type": "tool_call_completed", "step": "step:0", "attempt": 1,
                   "worker": "w", "at": "", "tool": "bump", "call": 2, "outcome": "timeout",
                   "duration_ms": 1234.6}


def test_watch_shows_the_running_and_finished_tool_calls_of_a_step() -> None:
    def ev(kind: EventType, **kw: object) -> tuple[str, dict[str, str]]:
        return "0-0", Event(kind, step="step:0", attempt=1, **kw).to_fields()  # type: ignore[arg-type]

    events = [ev(EventType.STEP_STARTED, worker="w"),
              ev(EventType.TOOL_CALL_STARTED, tool="bump", call=1),
              ev(EventType.TOOL_CALL_COMPLETED, tool="bump", call=1, outcome="ok"),
              ev(EventType.TOOL_CALL_STARTED, tool="fetch", call=2)]
    (row,) = step_rows(events, [])
    assert row.state == "running" and row.tool_calls == 1
    assert row.detail == "tool calls: 1, last fetch #2 running"
    events.append(ev(EventType.TOOL_CALL_COMPLETED, tool="fetch", call=2, outcome="error"))
    (row,) = step_rows(events, [])
    assert row.detail == "tool calls: 2, last fetch #2 error"
