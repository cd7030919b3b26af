"""`JournaledTool`: one of a step's tools, run at most once per call however often the
step runs.

A call whose result is in the step's journal returns that result (the tool is not run).
Otherwise it writes `tool_call_started`, runs the tool with the call's identity in
Strands' invocation state and in `current_tool_call()`, bounded by the tool timeout,
and journals the result with `tool_call_completed` before the model sees it. A tool that
raises, or runs out of time, returns its error to the model as Strands does. What is
exactly-once: a result, once journaled. What is at-least-once: a tool that was running
when the worker died runs again (with the same idempotency key, for the system it calls
to recognise the repeat).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from strands.types._events import ToolResultEvent
from strands.types.tools import AgentTool, ToolGenerator, ToolResult, ToolSpec, ToolUse

from strands_durable import metrics
from strands_durable.models import Event, EventType, StepJob, now_iso
from strands_durable.worker.journal import StepJournal, encode_tool_result
from strands_durable.worker.tools.context import (
    INVOCATION_STATE_KEY,
    ToolCall,
    enter_tool_call,
    leave_tool_call,
)
from strands_durable.worker.tools.results import error_result

SMALL_PAYLOAD_CHARS = 200  # an input or result this short is shown in its event


class JournaledTool(AgentTool):
    def __init__(self, inner: AgentTool, journal: StepJournal, job: StepJob, worker: str,
                 timeout_s: float, after_result: Callable[[], None]) -> None:
        super().__init__()
        self.inner = inner
        self.journal = journal
        self.job = job
        self.worker = worker
        self.timeout_s = timeout_s
        self.after_result = after_result  # the after_tool crash point

    @property
    def tool_name(self) -> str:
        return self.inner.tool_name

    @property
    def tool_spec(self) -> ToolSpec:
        return self.inner.tool_spec

    @property
    def tool_type(self) -> str:
        return self.inner.tool_type

    async def stream(self, tool_use: ToolUse, invocation_state: dict[str, Any],
                     **kwargs: Any) -> ToolGenerator:
        ordinal = self.journal.ordinal_of(str(tool_use["toolUseId"]))
        recorded = self.journal.recorded_tool(ordinal)
        if recorded is not None:
            self.journal.replayed_tools += 1
            metrics.turn_replayed("tool")
            yield ToolResultEvent({**recorded, "toolUseId": tool_use["toolUseId"]})
            return
        call = ToolCall(self.job.session_id, self.job.key, ordinal, self.tool_name)
        started_event = self._event(EventType.TOOL_CALL_STARTED, call,
                                    detail=_small(tool_use.get("input")))
        if not await self.journal.record("", "", [started_event]):
            # Another worker holds the step now: it runs the call, not this one.
            yield ToolResultEvent(error_result(tool_use, "the step moved to another worker"))
            return
        started = time.perf_counter()
        result, outcome = await self._run(tool_use, invocation_state, call, **kwargs)
        duration_ms = (time.perf_counter() - started) * 1000
        metrics.tool_called(self.tool_name, outcome, duration_ms / 1000)
        done = self._event(EventType.TOOL_CALL_COMPLETED, call, outcome=outcome,
                           duration_ms=duration_ms, detail=_small(_result_text(result)))
        if await self.journal.record(f"t{ordinal}", encode_tool_result(result), [done]):
            self.after_result()
        yield ToolResultEvent(result)

    async def _run(self, tool_use: ToolUse, invocation_state: dict[str, Any], call: ToolCall,
                   **kwargs: Any) -> tuple[ToolResult, str]:
        state = {**invocation_state, INVOCATION_STATE_KEY: call}
        token = enter_tool_call(call)
        try:
            async with asyncio.timeout(self.timeout_s):
                result = await _last_result(self.inner.stream(tool_use, state, **kwargs))
        except TimeoutError:
            return error_result(tool_use, f"tool {self.tool_name} timed out after "
                                          f"{self.timeout_s:g}s"), "timeout"
        except Exception as exc:  # a tool's failure is the model's to handle, as in Strands
            return error_result(tool_use, f"Error: {exc.__class__.__name__}: {exc}"), "error"
        finally:
            leave_tool_call(token)
        if result is None:
            return error_result(tool_use, f"tool {self.tool_name} returned no result"), "error"
        outcome = "error" if result.get("status") == "error" else "ok"
        return {**result, "toolUseId": tool_use["toolUseId"]}, outcome

    def _event(self, kind: EventType, call: ToolCall, *, detail: str = "", outcome: str = "",
               duration_ms: float | None = None) -> Event:
        return Event(kind, step=self.job.key, attempt=self.job.attempt, worker=self.worker,
                     at=now_iso(), detail=detail, tool=self.tool_name, call=call.ordinal,
                     outcome=outcome, duration_ms=duration_ms)


async def _last_result(events: Any) -> ToolResult | None:
    """The tool result a tool's stream ends with (a ToolResultEvent, or a bare dict)."""
    result: ToolResult | None = None
    async for event in events:
        if isinstance(event, ToolResultEvent):
            result = event.tool_result
        elif isinstance(event, dict) and "toolUseId" in event and "status" in event:
            result = event  # type: ignore[assignment]
    return result



def _result_text(result: ToolResult) -> str:
    return "".join(block.get("text", "") for block in result.get("content", []))


def _small(value: Any) -> str:
    """A payload short enough to show in an event, else '' (events stay small)."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= SMALL_PAYLOAD_CHARS else ""
