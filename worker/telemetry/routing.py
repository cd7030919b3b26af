"""One tracer provider per process, many destinations: each finished span goes to the
exporter of its session's endpoint, with its session's service name and redaction.

Sessions on one worker may name different endpoints and service names, while the
OpenTelemetry global tracer provider (the one Strands' instrumentation uses) can be set
once. So the provider has a single processor, this router: it looks the span's trace
(= its session) up, rewrites the span for that session and hands it to a bounded
BatchSpanProcessor per distinct endpoint. Export runs on those processors' threads,
bounded by a timeout and a queue; a failure is logged by the exporter and never
reaches a step.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.util.re import parse_env_headers

from strands_durable.settings import TelemetryPolicy
from strands_durable.spec.telemetry import TraceConfig
from strands_durable.worker.telemetry.collect import Collectors
from strands_durable.worker.telemetry.redaction import redact_span

__all__ = ["Router"]

log = logging.getLogger("durable.telemetry")

MAX_SESSIONS = 4096  # sessions whose config a worker remembers (its running steps' at least)


class Router(SpanProcessor):
    def __init__(self, policy: TelemetryPolicy, collectors: Collectors | None = None) -> None:
        self.policy = policy
        # Steps whose spans are kept for their commit (`{{ TRACE }}`), fed redacted spans.
        self.collectors = collectors or Collectors()
        self._lock = threading.Lock()
        self._sessions: OrderedDict[int, TraceConfig] = OrderedDict()
        self._exporters: OrderedDict[tuple[str, bool], _Destination] = OrderedDict()
        self._resources: dict[str, Resource] = {}

    def register(self, trace_id: int, config: TraceConfig) -> None:
        """Spans of trace `trace_id` go where `config` says (until it is forgotten)."""
        with self._lock:
            self._sessions[trace_id] = config
            self._sessions.move_to_end(trace_id)
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.collectors.on_start(span)

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None or not context.trace_flags.sampled:
            return
        with self._lock:
            config = self._sessions.get(context.trace_id)
        if config is None:
            return  # not a traced session's span (another library's root span)
        try:
            span = redact_span(span, config.redact_tool_inputs, config.redact_tool_outputs)
            try:
                self.collectors.on_end(span)  # the step's copy for `{{ TRACE }}`
            finally:
                self._send(span, config)
        except Exception:  # a span that cannot be exported never fails a step
            log.warning("span %r of trace %032x not exported", span.name, context.trace_id,
                        exc_info=True)

    def export(self, span: ReadableSpan, config: TraceConfig) -> None:
        self._send(redact_span(span, config.redact_tool_inputs, config.redact_tool_outputs),
                   config)

    def _send(self, span: ReadableSpan, config: TraceConfig) -> None:
        span = _with_resource(span, self._resource(config.service_name))
        self._processor(config).on_end(span)

    def _resource(self, service_name: str) -> Resource:
        with self._lock:
            resource = self._resources.get(service_name)
            if resource is None:
                resource = self._resources[service_name] = Resource.create(
                    {"service.name": service_name})
            return resource

    def _processor(self, config: TraceConfig) -> BatchSpanProcessor:
        key = (config.endpoint, config.operator_endpoint)
        timeout_s = self.policy.otel_export_timeout_s
        with self._lock:
            destination = self._exporters.get(key)
            if destination is not None:
                self._exporters.move_to_end(key)
                return destination.processor
            destination = self._exporters[key] = _Destination(
                _exporter(config, timeout_s), self.policy.otel_queue_size, timeout_s)
            evicted = (self._exporters.popitem(last=False)[1]
                       if len(self._exporters) > self.policy.otel_max_endpoints else None)
        if evicted is not None:  # flushed and closed off this thread: it may take a while
            threading.Thread(target=evicted.close, args=(timeout_s,), name="otel-evict",
                             daemon=True).start()
        log.info("traces export to %s", config.endpoint)
        return destination.processor

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        with self._lock:
            destinations = list(self._exporters.values())
        return all([d.processor.force_flush(timeout_millis) for d in destinations])

    def shutdown(self) -> None:
        self.close(self.policy.otel_export_timeout_s)

    def close(self, timeout_s: float) -> None:
        """Export what is queued within `timeout_s`, then stop every exporter (a later
        span opens them again): an unreachable collector costs at most that long."""
        with self._lock:
            destinations = list(self._exporters.values())
            self._exporters.clear()
        for destination in destinations:
            destination.close(timeout_s)


class _Destination:
    """One endpoint: its batch processor and the exporter under it."""

    def __init__(self, exporter: OTLPSpanExporter, queue_size: int, timeout_s: float) -> None:
        self.exporter = _Abortable(exporter)
        self.processor = BatchSpanProcessor(
            self.exporter, max_queue_size=queue_size,
            max_export_batch_size=min(512, queue_size),
            export_timeout_millis=timeout_s * 1000)

    def close(self, timeout_s: float) -> None:
        # The processor's flush exports in this thread, retrying until the exporter's
        # own deadline: past `timeout_s` the exporter is shut down, which ends its
        # backoff waits, so an unreachable collector costs `timeout_s`, not more.
        deadline = threading.Timer(timeout_s, self.exporter.shutdown)
        deadline.daemon = True
        deadline.start()
        try:
            self.processor.force_flush(int(timeout_s * 1000))
        finally:
            deadline.cancel()
        self.exporter.shutdown()
        self.processor.shutdown()


class _Abortable(SpanExporter):
    """The OTLP exporter, shut down once (a second shutdown would log a warning)."""

    def __init__(self, inner: OTLPSpanExporter) -> None:
        self.inner = inner
        self._closed = False
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._closed:
            return SpanExportResult.FAILURE
        return self.inner.export(spans)

    def shutdown(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _exporter(config: TraceConfig, timeout_s: float) -> OTLPSpanExporter:
    exporter = OTLPSpanExporter(endpoint=config.endpoint, timeout=timeout_s)
    if not config.operator_endpoint:
        # The exporter always adds OTEL_EXPORTER_OTLP_*HEADERS: the operator's
        # credentials for its own collector, never to be sent to another endpoint.
        client = getattr(exporter, "_client", None)
        headers = getattr(client, "_headers", None)
        if isinstance(headers, dict):
            for key in _operator_header_names():
                headers.pop(key, None)
    return exporter


def _operator_header_names() -> set[str]:
    names: set[str] = set()
    for variable in ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"):
        names |= {key.lower() for key in parse_env_headers(os.environ.get(variable, ""),
                                                           liberal=True)}
    return names


def _with_resource(span: ReadableSpan, resource: Resource) -> ReadableSpan:
    return ReadableSpan(
        name=span.name, context=span.context, parent=span.parent, resource=resource,
        attributes=span.attributes, events=span.events, links=span.links, kind=span.kind,
        status=span.status, start_time=span.start_time, end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope)
