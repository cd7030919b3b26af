"""OpenTelemetry traces of sessions (issue 13, `telemetry.otel` and the OTEL_* variables):
one trace per session, a span per step, Strands' own model and tool spans under it.

`TRACING` is this process's one instance (the OpenTelemetry global tracer provider it
installs, when a session first asks for traces, is per process too). See tracing.py,
routing.py (where spans go), collect.py (each step's spans, committed with it for
`{{ TRACE }}`), redaction.py (`telemetry.redact`) and ids.py (one trace
per session across workers and crashes); the config is resolved in
spec/telemetry.py, where the submit-time endpoint check lives as well.
"""

from __future__ import annotations

from strands_durable.worker.telemetry.collect import StepCollector
from strands_durable.worker.telemetry.tracing import StepFacts, Tracing, mark_failed

__all__ = ["TRACING", "StepCollector", "StepFacts", "Tracing", "mark_failed"]

TRACING = Tracing()
