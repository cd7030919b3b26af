"""The tool call a tool is running for: its stable idempotency key, readable by the tool.

Each tool call of a step has a stable identity: (session, step, ordinal), the ordinal
counting the step's tool calls in the order the model asked for them, 1-based. It is
the same however often the step runs, so a tool can hand `idempotency_key` on to the
system it changes (http_executors send it as an `Idempotency-Key` header) and a repeat
after a crash is recognised there.

A tool reads it either from Strands' invocation state (`@tool(context=True)`:
`tool_context.invocation_state["durable_tool_call"]`) or, in any tool, through
`current_tool_call()`.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["INVOCATION_STATE_KEY", "ToolCall", "current_tool_call"]

INVOCATION_STATE_KEY = "durable_tool_call"


@dataclass(frozen=True)
class ToolCall:
    session_id: str
    step: str
    ordinal: int  # 1-based, in the order the model asked for the step's tool calls
    tool: str

    @property
    def idempotency_key(self) -> str:
        return f"{self.session_id}:{self.step}:{self.ordinal}"


_CURRENT: ContextVar[ToolCall | None] = ContextVar("durable_tool_call", default=None)


def current_tool_call() -> ToolCall | None:
    """The tool call running in this context, or None outside a durable tool call."""
    return _CURRENT.get()


def enter_tool_call(call: ToolCall) -> object:
    """Set the current call; returns the token `leave_tool_call` needs."""
    return _CURRENT.set(call)


def leave_tool_call(token: object) -> None:
    _CURRENT.reset(token)  # type: ignore[arg-type]
