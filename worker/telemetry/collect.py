"""The spans of one step's run, kept for `{{ TRACE }}` (planning/trace.py): each
finished span under the step's span, redacted as it is for export, in strands-cli's
span-dict format (TraceCollector.add_span), travels with the step's commit
(StepResult.trace). A step that runs again after a crash commits only the spans of the
run that commits, so no span is counted twice.

Bounds: a step keeps its newest STRANDS_MAX_TRACE_SPANS spans (strands-cli's FIFO rule)
and at most STEP_TRACE_BYTES of them; a string value is cut at MAX_VALUE_CHARS. With
`telemetry.redact` written, PII in their attributes is masked as strands-cli masks it
(worker/telemetry/pii.py).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from datetime import UTC, datetime
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, Span
from opentelemetry.util.types import Attributes

from strands_durable.models import SpanEvent, SpanRecord, StepTrace
from strands_durable.planning.trace import max_trace_spans
from strands_durable.worker.telemetry.pii import mask_attributes
from strands_durable.worker.telemetry.redaction import redact_span

__all__ = ["MAX_VALUE_CHARS", "STEP_TRACE_BYTES", "Collectors", "StepCollector",
           "span_record"]

log = logging.getLogger("durable.telemetry")

STEP_TRACE_BYTES = 1024 * 1024  # one step's spans, as JSON, in its committed result
MAX_VALUE_CHARS = 16 * 1024  # one attribute value (a conversation can be long)


class StepCollector:
    """One step's finished spans, oldest first; the step span's own record is added
    when the step's result is built (its end is then the commit's time)."""

    def __init__(self, step_span: Span, inputs: bool, outputs: bool,
                 max_spans: int | None = None, max_bytes: int = STEP_TRACE_BYTES,
                 mask_pii: bool = False) -> None:
        self.step_span = step_span
        self.inputs, self.outputs = inputs, outputs
        self.mask_pii = mask_pii
        self.max_spans = max_spans or max_trace_spans()
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._spans: deque[tuple[SpanRecord, int]] = deque()
        self._bytes = 0
        self._evicted = 0
        self.live: set[int] = set()  # span ids under the step, not yet ended

    def add(self, span: ReadableSpan) -> None:
        """A finished (already redacted) span of this step."""
        record = self._masked(span_record(span))
        size = _size(record)
        with self._lock:
            self._spans.append((record, size))
            self._bytes += size
            self._bound()

    def trace(self) -> StepTrace | None:
        """Everything collected, and the step span as it stands now (None if that fails:
        telemetry never fails a step)."""
        try:
            return self._trace()
        except Exception:
            log.warning("step spans not kept for the trace artifact", exc_info=True)
            return None

    def _trace(self) -> StepTrace:
        span = self.step_span
        now = time.time_ns()
        snapshot = ReadableSpan(
            name=span.name, context=span.get_span_context(), parent=span.parent,
            resource=span.resource,  # (none given, ReadableSpan would detect one: slow)
            attributes=span.attributes, events=span.events, kind=span.kind,
            status=span.status, start_time=span.start_time, end_time=now,
            instrumentation_scope=span.instrumentation_scope)
        own = self._masked(span_record(redact_span(snapshot, self.inputs, self.outputs)))
        with self._lock:
            kept = deque(self._spans)
            evicted = self._evicted
        total = sum(size for _, size in kept) + _size(own)
        # Room for the step's own record: it is the one span always kept.
        while kept and (len(kept) + 1 > self.max_spans or total > self.max_bytes):
            total -= kept.popleft()[1]
            evicted += 1
        return StepTrace(spans=[*(record for record, _ in kept), own], evicted=evicted)

    def _masked(self, record: SpanRecord) -> SpanRecord:
        # strands-cli masks PII in its trace artifact's span attributes; its events (the
        # messages, where PII mostly is) too here, or the mask would miss what it is for.
        if self.mask_pii:
            record["attributes"] = mask_attributes(record["attributes"])
            for event in record["events"]:
                event["attributes"] = mask_attributes(event["attributes"])
        return record

    def _bound(self) -> None:
        # strands-cli's rule: past the limit, the oldest span goes first.
        while self._spans and (len(self._spans) > self.max_spans
                               or self._bytes > self.max_bytes):
            _, size = self._spans.popleft()
            self._bytes -= size
            self._evicted += 1


class Collectors:
    """Which step collects a span: the step span's id, then every span started under an
    id already known (Strands' agent, cycle, model and tool spans nest under it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: dict[int, StepCollector] = {}

    def open(self, collector: StepCollector) -> None:
        span_id = collector.step_span.get_span_context().span_id
        with self._lock:
            self._owner[span_id] = collector
            collector.live.add(span_id)

    def close(self, collector: StepCollector) -> None:
        with self._lock:
            for span_id in collector.live:
                self._owner.pop(span_id, None)
            collector.live.clear()

    def on_start(self, span: Span) -> None:
        parent = span.parent
        if parent is None or not self._owner:
            return
        with self._lock:
            collector = self._owner.get(parent.span_id)
            if collector is not None:
                span_id = span.get_span_context().span_id
                self._owner[span_id] = collector
                collector.live.add(span_id)

    def on_end(self, span: ReadableSpan) -> None:
        """`span` is the redacted copy of a span that ended."""
        context = span.context
        if context is None or not self._owner:
            return
        with self._lock:
            collector = self._owner.get(context.span_id)
            if collector is None or collector.step_span.get_span_context().span_id \
                    == context.span_id:
                return  # not under a step, or the step span (its record is taken live)
            del self._owner[context.span_id]
            collector.live.discard(context.span_id)
        collector.add(span)


def span_record(span: ReadableSpan) -> SpanRecord:
    """strands-cli's span dict (TraceCollector.add_span), values capped."""
    start, end = span.start_time, span.end_time
    status = span.status
    return SpanRecord(
        name=span.name, start_time=_iso(start), end_time=_iso(end),
        duration_ms=(end - start) / 1_000_000 if end and start else 0,
        attributes=_capped(span.attributes),
        events=[SpanEvent(name=event.name, timestamp=_iso(event.timestamp),
                          attributes=_capped(event.attributes))
                for event in span.events or ()],
        status={"status_code": status.status_code.name if status else "UNSET",
                "description": status.description if status and status.description
                else None})


def _size(record: SpanRecord) -> int:
    return len(json.dumps(record, ensure_ascii=False).encode("utf-8"))


def _iso(ns: int | None) -> str:
    if ns is None:
        return ""
    return datetime.fromtimestamp(ns / 1_000_000_000, tz=UTC).isoformat(
        timespec="milliseconds")


def _capped(attributes: Attributes) -> dict[str, Any]:
    return {key: _value(value) for key, value in (attributes or {}).items()}


def _value(value: Any) -> Any:
    if isinstance(value, str):
        if len(value) <= MAX_VALUE_CHARS:
            return value
        return f"{value[:MAX_VALUE_CHARS]}... [{len(value) - MAX_VALUE_CHARS} more characters]"
    if isinstance(value, (tuple, list)):
        return [_value(item) for item in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return str(value)  # the commit's JSON must never fail on a span
