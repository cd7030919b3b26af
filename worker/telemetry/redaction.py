"""`telemetry.redact`: tool inputs (default) and tool outputs blanked from the spans
Strands' own instrumentation writes (strands/telemetry/tracer.py), before export.

Where Strands puts them:
- tool spans (`execute_tool <name>`): the input as the `content` of the
  `gen_ai.tool.message` event, the output as the `message` of the `gen_ai.choice`
  event; under OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental the
  `gen_ai.tool.call.arguments` / `gen_ai.tool.call.result` attributes and the
  `gen_ai.input.messages` / `gen_ai.output.messages` of the operation-details event
  (or span attributes);
- model, cycle and agent spans: inside the conversation they record (JSON messages), as
  a `toolUse`'s `input` and a `toolResult`'s `content` (latest conventions: a
  `tool_call` part's `arguments`, a `tool_call_response` part's `response`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.util.types import Attributes

__all__ = ["REDACTED", "redact_span"]

REDACTED = "[REDACTED]"  # Strands' own placeholder
_TOOL_INPUT_KEYS = ("gen_ai.tool.call.arguments", "gen_ai.input.messages")
_TOOL_OUTPUT_KEYS = ("gen_ai.tool.call.result", "gen_ai.output.messages")
_MARKERS = ("toolUse", "toolResult", "tool_call")


def redact_span(span: ReadableSpan, inputs: bool, outputs: bool) -> ReadableSpan:
    """`span` with tool inputs and/or outputs blanked (the span itself when neither)."""
    if not inputs and not outputs:
        return span
    tool = _is_tool_span(span)
    attributes = _attributes(span.attributes, tool, "", inputs, outputs)
    events = [Event(event.name, _attributes(event.attributes, tool, event.name, inputs,
                                            outputs), event.timestamp)
              for event in span.events]
    return ReadableSpan(
        name=span.name, context=span.context, parent=span.parent, resource=span.resource,
        attributes=attributes, events=events, links=span.links, kind=span.kind,
        status=span.status, start_time=span.start_time, end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope or InstrumentationScope("unknown"))


def _is_tool_span(span: ReadableSpan) -> bool:
    attributes = span.attributes or {}
    return (span.name.startswith("execute_tool")
            or attributes.get("gen_ai.operation.name") == "execute_tool")


def _attributes(attributes: Attributes, tool: bool, event: str, inputs: bool,
                outputs: bool) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in (attributes or {}).items():
        if tool and _whole_value(key, event, inputs, outputs):
            result[key] = REDACTED
        elif isinstance(value, str) and any(marker in value for marker in _MARKERS):
            result[key] = _redact_json(value, inputs, outputs)
        else:
            result[key] = value
    return result


def _whole_value(key: str, event: str, inputs: bool, outputs: bool) -> bool:
    """On a tool span: is this attribute the tool's input or output as a whole?"""
    if inputs and (key in _TOOL_INPUT_KEYS or (event == "gen_ai.tool.message"
                                                and key == "content")):
        return True
    return outputs and (key in _TOOL_OUTPUT_KEYS or (event == "gen_ai.choice"
                                                      and key == "message"))


def _redact_json(text: str, inputs: bool, outputs: bool) -> str:
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return json.dumps(_walk(value, inputs, outputs), ensure_ascii=False)


def _walk(value: Any, inputs: bool, outputs: bool) -> Any:
    if isinstance(value, list):
        return [_walk(item, inputs, outputs) for item in value]
    if not isinstance(value, Mapping):
        return value
    blanked = _blanked_keys(value, inputs, outputs)
    return {key: REDACTED if key in blanked else _walk(item, inputs, outputs)
            for key, item in value.items()}


def _blanked_keys(node: Mapping[str, Any], inputs: bool, outputs: bool) -> set[str]:
    """Which keys of this JSON object hold a tool's input or output."""
    kind = node.get("type")
    keys: set[str] = set()
    if inputs and kind == "tool_call":
        keys.add("arguments")
    if outputs and kind == "tool_call_response":
        keys.add("response")
    if inputs and "toolUseId" in node and "name" in node and "input" in node:
        keys.add("input")  # a toolUse block
    if outputs and "toolUseId" in node and "content" in node and "status" in node:
        keys.add("content")  # a toolResult block
    return keys
