"""This process's tracing: a span per step, parented to its session's deterministic span,
with Strands' own agent, cycle, model and tool spans nested under it; the session span
itself once the session completes.

Nothing is set up until a session asks for traces (its spec's `telemetry.otel`, or the
operator's OTEL_EXPORTER_OTLP_* endpoint): a worker that never meets one installs no
tracer provider and each step pays one config resolution. Then the OpenTelemetry global
tracer provider is set once, sampling by parent only (a session's decision travels in
its session span context; a root span nobody parented, such as Strands' spans in an
untraced session, is dropped), with the Router as its one processor.

Why the session span is emitted when the session completes: a span is exported once,
whole, with its start and end; at creation its end is unknown, and a session that
pauses or fails may be resumed later (emitting then would send the same span id twice).
At completion the worker that committed the last step knows both ends (created_at,
now) and the outcome. Until then, and for a session that never completes, its step
spans already share the trace and name the session span as their parent.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import ReadableSpan, Span, TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode
from opentelemetry.trace import TraceFlags as Flags

from strands_durable.models import StepJob
from strands_durable.planning.trace import traced
from strands_durable.settings import TelemetryPolicy
from strands_durable.spec.model import Spec
from strands_durable.spec.telemetry import (
    OtelEnv,
    TraceConfig,
    is_local_run,
    resolve_trace_config,
)
from strands_durable.store.records import SessionRecord
from strands_durable.worker.telemetry.collect import Collectors, StepCollector
from strands_durable.worker.telemetry.ids import sampled, session_span_id, session_trace_id
from strands_durable.worker.telemetry.routing import Router

__all__ = ["SCOPE", "StepCollector", "StepFacts", "Tracing"]

log = logging.getLogger("durable.telemetry")

SCOPE = "strands_durable.worker"


class StepFacts:
    """What a step span says about where its run stands (seed 000's names)."""

    def __init__(self, worker: str, reclaimed: bool, replayed: int, checkpoints: int) -> None:
        self.worker = worker
        # Resumed: this run picks up what an earlier run of the step left (it was
        # re-claimed from a worker that stopped, or its journal holds turns to replay).
        self.resumed = reclaimed or replayed > 0
        self.replayed = replayed  # journaled model turns and tool results not run again
        self.checkpoints = checkpoints  # the session's commits so far (one checkpoint each)


class Tracing:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._router: Router | None = None
        self._collectors = Collectors()
        self._tracer: trace_api.Tracer | None = None

    def config_for(self, spec: Spec, policy: TelemetryPolicy) -> TraceConfig | None:
        return resolve_trace_config(spec.telemetry, OtelEnv.read(),
                                    policy.allowed_endpoints, is_local_run())

    @contextmanager
    def step_span(self, spec: Spec, job: StepJob, facts: StepFacts,
                  policy: TelemetryPolicy) -> Iterator[StepCollector | None]:
        """The step's span, current while the body runs (nothing when untraced). It
        yields the step's span collector when the spec has telemetry.otel and the
        session is sampled (strands-cli keeps a trace for `{{ TRACE }}` then), else None."""
        opened = self._open(spec, job, facts, policy)
        if opened is None:
            yield None
            return
        span, config = opened
        collector = self._collector(spec, span, config)
        try:
            with trace_api.use_span(span, end_on_exit=True):
                yield collector
        finally:
            if collector is not None:
                self._collectors.close(collector)

    def _collector(self, spec: Spec, span: trace_api.Span,
                   config: TraceConfig) -> StepCollector | None:
        # A sampled-out session's span records nothing: nothing to collect either.
        if not traced(spec) or not isinstance(span, Span) or not span.is_recording():
            return None
        try:
            collector = StepCollector(span, config.redact_tool_inputs,
                                      config.redact_tool_outputs, mask_pii=config.mask_pii)
            self._collectors.open(collector)
        except Exception:  # telemetry never fails a step
            log.warning("step spans not kept for the trace artifact", exc_info=True)
            return None
        return collector

    def _open(self, spec: Spec, job: StepJob, facts: StepFacts,
              policy: TelemetryPolicy) -> tuple[trace_api.Span, TraceConfig] | None:
        try:
            config = self.config_for(spec, policy)
            if config is None:
                return None
            tracer = self._install(policy)
            sid = job.session_id
            self._route(sid, config)
            parent = trace_api.set_span_in_context(NonRecordingSpan(
                _session_context(sid, config, remote=True)))
            attributes = {**_session_attributes(spec, sid), "step.key": job.key,
                          "agent.id": job.agent, "attempt": job.attempt,
                          "worker.id": facts.worker, "session.resumed": facts.resumed,
                          "session.steps_skipped": facts.replayed,
                          "session.checkpoint_count": facts.checkpoints}
            return tracer.start_span(f"step {job.key}", context=parent,
                                     kind=SpanKind.INTERNAL, attributes=attributes), config
        except Exception:  # telemetry never fails a step
            log.warning("no span for step %s of session %s", job.key, job.session_id,
                        exc_info=True)
            return None

    def session_completed(self, spec: Spec, record: SessionRecord,
                          policy: TelemetryPolicy) -> None:
        """Emit the session span (its id is the one every step span names as parent)."""
        try:
            config = self.config_for(spec, policy)
            if config is None or not sampled(record.session_id, config.sample_ratio):
                return
            self._install(policy)
            router = self._route(record.session_id, config)
            usage = record.token_usage
            attributes = {**_session_attributes(spec, record.session_id),
                          "session.status": record.status.value,
                          "session.checkpoint_count": record.steps_committed,
                          "session.tokens_in": usage.total_input_tokens,
                          "session.tokens_out": usage.total_output_tokens}
            end = time.time_ns()
            span = ReadableSpan(
                name=f"session {spec.name}",
                context=_session_context(record.session_id, config, remote=False),
                attributes=attributes, kind=SpanKind.INTERNAL, status=Status(StatusCode.OK),
                start_time=min(_ns(record.created_at) or end, end), end_time=end,
                instrumentation_scope=InstrumentationScope(SCOPE))
            router.export(span, config)
        except Exception:  # telemetry never fails a step
            log.warning("no session span for %s", record.session_id, exc_info=True)

    def flush(self, timeout_s: float) -> bool:
        router = self._router
        return router.force_flush(int(timeout_s * 1000)) if router is not None else True

    def close(self, timeout_s: float) -> None:
        """Export what is queued within `timeout_s`, then close the exporters (the next
        traced step opens them again)."""
        router = self._router
        if router is not None:
            router.close(timeout_s)

    def _route(self, session_id: str, config: TraceConfig) -> Router:
        router = self._router
        assert router is not None  # installed first
        router.register(session_trace_id(session_id), config)
        return router

    def _install(self, policy: TelemetryPolicy) -> trace_api.Tracer:
        with self._lock:
            if self._tracer is not None:
                return self._tracer
            router = Router(policy, self._collectors)
            current = trace_api.get_tracer_provider()
            if isinstance(current, TracerProvider):
                # Someone set an SDK provider first: route through it (its sampler rules).
                log.warning("a tracer provider was already set; session traces are added "
                            "to it")
                current.add_span_processor(router)
                provider = current
            else:
                provider = TracerProvider(sampler=ParentBased(root=ALWAYS_OFF))
                provider.add_span_processor(router)
                trace_api.set_tracer_provider(provider)
            self._router = router
            self._tracer = provider.get_tracer(SCOPE)
            return self._tracer


def mark_failed(problem: str) -> None:
    """The current step span (if any) ends in error, saying why."""
    span = trace_api.get_current_span()
    if span.is_recording():
        span.set_status(Status(StatusCode.ERROR, problem[:1000]))


def _session_context(session_id: str, config: TraceConfig, remote: bool) -> SpanContext:
    flags = Flags(Flags.SAMPLED if sampled(session_id, config.sample_ratio) else 0)
    return SpanContext(session_trace_id(session_id), session_span_id(session_id),
                       is_remote=remote, trace_flags=flags)


def _session_attributes(spec: Spec, session_id: str) -> dict[str, Any]:
    return {"session.id": session_id, "spec.name": spec.name,
            "pattern.type": spec.pattern.type}


def _ns(iso: str) -> int | None:
    try:
        return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1e9)
    except ValueError:
        return None
