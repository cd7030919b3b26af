"""A real OTLP/HTTP trace receiver for tests: an HTTP server on a free loopback port that
decodes each POST to /v1/traces as an `ExportTraceServiceRequest` (opentelemetry-proto)
and keeps its spans, flattened. Tests wait on it for a condition, never for a time.
`operator_receiver` makes it the operator's collector; `run_traced` runs a session to
its end on the test's in-process worker and exports what it queued.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from helpers import wait_for
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from strands_durable.models import SessionStatus
from strands_durable.sessions.start import start_session
from strands_durable.spec.loader import load_spec_data
from strands_durable.store.store import Store
from strands_durable.worker.telemetry import TRACING

PATH = "/v1/traces"
# What a test clears before it sets its own: the operator's OpenTelemetry variables and
# strands-cli's span bound.
OTEL_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                  "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_TRACES_SAMPLER",
                  "OTEL_SERVICE_NAME", "OTEL_EXPORTER_OTLP_HEADERS", "STRANDS_MAX_TRACE_SPANS")


@dataclass(frozen=True)
class Received:
    """One span as the receiver decoded it (ids in hex, as backends show them)."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    service: str
    status: int  # 0 unset, 1 ok, 2 error
    status_message: str
    start_ns: int
    end_ns: int
    headers: dict[str, str] = field(default_factory=dict)


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return getattr(value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


def decode(body: bytes, headers: dict[str, str]) -> list[Received]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        service = str(_attributes(resource_spans.resource.attributes).get("service.name", ""))
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(Received(
                    trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                    parent_id=span.parent_span_id.hex(), name=span.name,
                    attributes=_attributes(span.attributes),
                    events=[(event.name, _attributes(event.attributes))
                            for event in span.events],
                    service=service, status=span.status.code,
                    status_message=span.status.message,
                    start_ns=span.start_time_unix_nano, end_ns=span.end_time_unix_nano,
                    headers=headers))
    return spans


class OtlpReceiver:
    """`status`: what every export is answered with (an error: the spans are refused)."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.spans: list[Received] = []
        self.requests = 0
        self._changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path != PATH:
                    self.send_response(404)
                    self.end_headers()
                    return
                headers = {key.lower(): value for key, value in self.headers.items()}
                receiver._add(decode(body, headers) if receiver.status == 200 else [])
                if receiver.status != 200:
                    self.send_error(receiver.status, "refused by the test")
                    return
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The endpoint as OTEL_EXPORTER_OTLP_ENDPOINT takes it (no signal path)."""
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def traces_url(self) -> str:
        return self.url + PATH

    def _add(self, spans: list[Received]) -> None:
        with self._changed:
            self.spans.extend(spans)
            self.requests += 1
            self._changed.notify_all()

    def wait_for(self, check: Callable[[list[Received]], bool], timeout_s: float = 60.0,
                 what: str = "spans") -> list[Received]:
        """The spans once `check` holds of them; AssertionError after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not check(self.spans):
                left = deadline - time.monotonic()
                if left <= 0:
                    names = sorted(span.name for span in self.spans)
                    raise AssertionError(f"timed out waiting for {what}; received {names}")
                self._changed.wait(left)
            return list(self.spans)

    def of_trace(self, trace_id: str) -> list[Received]:
        with self._changed:
            return [span for span in self.spans if span.trace_id == trace_id]


@contextmanager
def otlp_receiver(status: int = 200) -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver(status)
    receiver.thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
        receiver.thread.join(timeout=10)


def span_tree(spans: list[Received]) -> str:
    """The spans as an indented tree (parents first, siblings by start), with their
    attributes: for a person reading a trace dump."""
    by_parent: dict[str, list[Received]] = {}
    ids = {span.span_id for span in spans}
    for span in spans:
        parent = span.parent_id if span.parent_id in ids else ""
        by_parent.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(parent: str, depth: int) -> None:
        for span in sorted(by_parent.get(parent, []), key=lambda s: s.start_ns):
            pad = "  " * depth
            orphan = " (parent " + span.parent_id + ")" if (
                depth == 0 and span.parent_id) else ""
            lines.append(f"{pad}{span.name}  [{span.service}] span {span.span_id}{orphan}")
            for key, value in sorted(span.attributes.items()):
                lines.append(f"{pad}    {key} = {str(value)[:160]!s}")
            for name, attributes in span.events:
                shown = {k: str(v)[:120] for k, v in attributes.items()}
                lines.append(f"{pad}    event {name} {shown}")
            walk(span.span_id, depth + 1)

    walk("", 0)
    return "\n".join(lines)


@contextmanager
def operator_receiver(monkeypatch: Any) -> Iterator[OtlpReceiver]:
    """A receiver as the operator's OTEL_EXPORTER_OTLP_ENDPOINT (workers started by the
    test inherit it), every other OpenTelemetry variable cleared."""
    for name in OTEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with otlp_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        yield receiver


async def run_traced(store: Store, data: dict[str, Any]) -> str:
    """Run the session on the test's in-process worker to completion, then export every
    span it queued (while the receiver is up)."""
    sid, _ = await start_session(store, load_spec_data(data))

    async def ended() -> bool:
        return (await store.get_session(sid)).status != SessionStatus.RUNNING

    await wait_for(ended, timeout_s=60, what="the session to end")
    assert (await store.get_session(sid)).status == SessionStatus.COMPLETED
    assert await asyncio.to_thread(TRACING.flush, 30)
    return sid
