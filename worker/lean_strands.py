"""Strands' tracer without the work nobody records.

Strands' `Tracer` JSON-encodes the whole conversation into span events on every agent
call, cycle and model call, even when the span does not record (an untraced session:
our provider samples it out, `ParentBased(ALWAYS_OFF)`), which was about 0.5 ms of a
step. `LeanTracer` skips exactly that work when, and only when, the span does not
record; a recording span gets Strands' own methods unchanged (the trace artifact and
OTLP export see the same spans and events as before).
"""

from __future__ import annotations

from typing import Any

import strands.telemetry.tracer as strands_tracer
from opentelemetry.trace import Span
from strands.telemetry.tracer import Tracer


def _recording(span: Span | None) -> bool:
    return span is not None and span.is_recording()


class LeanTracer(Tracer):
    def _add_event_messages(self, span: Span, messages: Any) -> None:
        if _recording(span):
            super()._add_event_messages(span, messages)

    def _add_system_prompt_event(self, span: Span, system_prompt: str | None = None,
                                 system_prompt_content: list[Any] | None = None) -> None:
        if _recording(span):
            super()._add_system_prompt_event(span, system_prompt, system_prompt_content)

    # It only adds attributes and events to the span before ending it, and ending a
    # span that does not record is a no-op (Strands' own `_end_span` returns first).
    def end_agent_span(self, span: Span, response: Any = None,
                       error: Exception | None = None) -> None:
        if _recording(span):
            super().end_agent_span(span, response, error)


def install() -> None:
    """Make Strands' process-wide tracer a LeanTracer (once; Strands reads it back
    through `get_tracer()` on every agent, event loop and tool call)."""
    if not isinstance(strands_tracer._tracer_instance, LeanTracer):
        strands_tracer._tracer_instance = LeanTracer()  # type: ignore[assignment]
