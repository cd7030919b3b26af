"""`{{ TRACE }}`: the session's trace as strands-cli's artifact writer renders it, the
pretty JSON of its TraceCollector (telemetry/otel.py, get_trace_data), built from the
spans each committed step carries (StepResult.trace, collected by the worker that ran
it: worker/telemetry/collect.py).

strands-cli has a collector whenever the spec has `telemetry.otel`, so TRACE is then
JSON (its spans may be none: sampled out, or OTEL_SDK_DISABLED), and "" without it.
Its collector keeps the newest STRANDS_MAX_TRACE_SPANS (1000) spans, evicting the
oldest first; so does this, and then evicts more of the oldest until the JSON fits
the byte budget it is given (what DURABLE_MAX_ARTIFACT_BYTES leaves it).
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from strands_durable.models import SpanRecord, StepTrace
from strands_durable.spec.model import Spec

__all__ = ["DEFAULT_MAX_SPANS", "max_trace_spans", "render_trace", "session_trace_id",
           "traced"]

DEFAULT_MAX_SPANS = 1000  # strands-cli's TraceCollector.DEFAULT_MAX_SPANS
_MAX_SPANS_CEILING = 100_000


def session_trace_id(session_id: str) -> int:
    """The session's trace id: its UUID (a trace found in a backend names its session:
    the id without dashes); a stable hash for an id that is not a UUID."""
    try:
        trace_id = uuid.UUID(session_id).int
    except ValueError:  # not a UUID (never from this code's own sessions): still stable
        digest = hashlib.sha256(f"strands-durable:trace:{session_id}".encode()).digest()
        trace_id = int.from_bytes(digest[:16], "big")
    return trace_id or 1  # 0 is the invalid trace id


def max_trace_spans(environ: Mapping[str, str] | None = None) -> int:
    """STRANDS_MAX_TRACE_SPANS, as strands-cli reads it (an unreadable or out-of-range
    value gets the default rather than a crash at completion)."""
    raw = (os.environ if environ is None else environ).get("STRANDS_MAX_TRACE_SPANS", "")
    try:
        value = int(raw) if raw.strip() else DEFAULT_MAX_SPANS
    except ValueError:
        return DEFAULT_MAX_SPANS
    return value if 1 <= value <= _MAX_SPANS_CEILING else DEFAULT_MAX_SPANS


def traced(spec: Spec) -> bool:
    """strands-cli keeps a trace for the artifact when the spec has `telemetry.otel`."""
    return spec.telemetry is not None and spec.telemetry.otel is not None


def render_trace(spec: Spec, session_id: str, traces: Iterable[StepTrace | None],
                 max_bytes: int, max_spans: int | None = None) -> str:
    """The TRACE JSON of these steps' spans (in commit order), at most `max_bytes`
    UTF-8 bytes; "" when the spec has no telemetry.otel."""
    if not traced(spec):
        return ""
    spans: list[SpanRecord] = []
    evicted = 0
    for trace in traces:
        if trace is not None:
            spans += trace["spans"]
            evicted += trace["evicted"]
    keep = min(len(spans), max_spans or max_trace_spans())
    head = {"trace_id": f"{session_trace_id(session_id):032x}", "spec_name": spec.name,
            "pattern": spec.pattern.type}

    def document(kept: int) -> str:
        newest = spans[len(spans) - kept:] if kept else []
        return _dumps(head, newest, evicted + len(spans) - kept)

    text = document(keep)
    if len(text.encode("utf-8")) <= max_bytes:
        return text
    low, high = 0, keep - 1  # the most spans that fit: at least none, fewer than `keep`
    while low < high:
        middle = (low + high + 1) // 2
        if len(document(middle).encode("utf-8")) <= max_bytes:
            low = middle
        else:
            high = middle - 1
    return document(low)


def _dumps(head: dict[str, Any], spans: list[SpanRecord], evicted: int) -> str:
    total = sum(span.get("duration_ms", 0) for span in spans)
    data = {**head, "duration_ms": round(total, 3), "span_count": len(spans),
            "evicted_count": evicted, "spans": spans}
    return json.dumps(data, indent=2, ensure_ascii=False)
