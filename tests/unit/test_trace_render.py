"""The pure parts of `{{ TRACE }}`: strands-cli's trace JSON from the steps' committed
spans (FIFO span limit, byte budget), a step's span collector and its bounds, and a
StepResult without a trace serialized as before."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import Event, ReadableSpan, Span, TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import SpanContext, TraceFlags

from strands_durable.models import SpanRecord, StepResult, StepTrace
from strands_durable.planning.artifacts import render_artifacts
from strands_durable.planning.trace import max_trace_spans, render_trace
from strands_durable.settings import Limits
from strands_durable.spec.loader import load_spec_data
from strands_durable.spec.model import Spec
from strands_durable.worker.telemetry.collect import (
    MAX_VALUE_CHARS,
    Collectors,
    StepCollector,
    span_record,
)
from strands_durable.worker.telemetry.redaction import REDACTED

SID = "267fb40e-2aeb-4938-bcc7-4dbfd7072669"


def spec(telemetry: dict[str, Any] | None = None, template: str = "{{ TRACE }}") -> Spec:
    data: dict[str, Any] = {
        "version": 0, "name": "traced", "runtime": {"provider": "scripted", "model_id": "m"},
        "agents": {"a": {"prompt": "p"}},
        "pattern": {"type": "chain", "config": {"steps": [{"agent": "a", "input": "x"}]}},
        "outputs": {"artifacts": [{"path": "trace.json", "from": template}]}}
    if telemetry is not None:
        data["telemetry"] = telemetry
    return load_spec_data(data).spec


def record(name: str, filler: str = "") -> SpanRecord:
    return SpanRecord(name=name, start_time="", end_time="", duration_ms=1.5,
                      attributes={"filler": filler}, events=[],
                      status={"status_code": "UNSET", "description": None})


def step(*names: str, evicted: int = 0, filler: str = "") -> StepTrace:
    return StepTrace(spans=[record(n, filler) for n in names], evicted=evicted)


def test_no_telemetry_otel_renders_nothing() -> None:
    assert render_trace(spec(), SID, [step("a")], 10**6) == ""
    # The operator's endpoint alone does not make one either: the spec decides.
    assert render_trace(spec({"redact": {"tool_inputs": True}}), SID, [], 10**6) == ""


def test_strands_clis_document_in_commit_order() -> None:
    text = render_trace(spec({"otel": {}}), SID, [step("x", "s0"), None, step("s1")], 10**6)
    data = json.loads(text)
    assert data == {"trace_id": SID.replace("-", ""), "spec_name": "traced",
                    "pattern": "chain", "duration_ms": 4.5, "span_count": 3,
                    "evicted_count": 0, "spans": [record("x"), record("s0"), record("s1")]}
    assert text == json.dumps(data, indent=2, ensure_ascii=False)


def test_the_span_limit_keeps_the_newest_and_counts_the_rest() -> None:
    traces = [step("a", "b", evicted=2), step("c", "d")]
    data = json.loads(render_trace(spec({"otel": {}}), SID, traces, 10**6, max_spans=3))
    assert [s["name"] for s in data["spans"]] == ["b", "c", "d"]
    assert (data["span_count"], data["evicted_count"]) == (3, 3)


def test_the_byte_budget_keeps_the_most_newest_spans_that_fit() -> None:
    traces = [step(*(f"s{i}" for i in range(40)), filler="z" * 300)]
    whole = render_trace(spec({"otel": {}}), SID, traces, 10**6)
    budget = len(whole.encode()) // 3
    text = render_trace(spec({"otel": {}}), SID, traces, budget)
    data = json.loads(text)
    kept = data["span_count"]
    assert len(text.encode()) <= budget and 0 < kept < 40
    assert data["evicted_count"] == 40 - kept
    assert [s["name"] for s in data["spans"]] == [f"s{i}" for i in range(40 - kept, 40)]
    one_more = render_trace(spec({"otel": {}}), SID, traces, 10**6, max_spans=kept + 1)
    assert len(one_more.encode()) > budget  # maximal: one more span would not fit
    assert json.loads(render_trace(spec({"otel": {}}), SID, traces, 300))["spans"] == []


@pytest.mark.parametrize(("raw", "expected"), [("", 1000), ("7", 7), ("x", 1000),
                                               ("0", 1000), ("-3", 1000), ("9999999", 1000)])
def test_strands_max_trace_spans(raw: str, expected: int) -> None:
    assert max_trace_spans({"STRANDS_MAX_TRACE_SPANS": raw}) == expected


def test_trace_gets_what_the_rest_of_the_artifact_leaves() -> None:
    asked: list[int] = []

    def source(room: int) -> str:
        asked.append(room)
        return "T" * room

    limits = Limits(max_artifact_bytes=2048)
    traced = spec({"otel": {}}, "head {{ TRACE }} tail")
    assert render_artifacts(traced, {}, limits, trace=source) == {
        "trace.json": "head " + "T" * 2038 + " tail"}
    assert asked == [2038]
    # A variable named TRACE wins, as in strands-cli; without a source TRACE is "".
    assert render_artifacts(traced, {"TRACE": "mine"}, limits, trace=source) == {
        "trace.json": "head mine tail"}
    assert render_artifacts(traced, {}, limits) == {"trace.json": "head  tail"}


def test_a_result_without_a_trace_is_serialized_as_before() -> None:
    plain = StepResult(key="step:0", agent="a", response="r")
    assert "trace" not in json.loads(plain.to_json())
    assert StepResult.from_json(plain.to_json()) == plain
    traced = StepResult(key="step:0", agent="a", response="r", trace=step("s"))
    assert StepResult.from_json(traced.to_json()) == traced


def live_span(name: str = "step step:0", parent: Span | None = None) -> Span:
    tracer = TracerProvider(sampler=ALWAYS_ON).get_tracer("test")
    context = trace_api.set_span_in_context(parent) if parent is not None else None
    span = tracer.start_span(name, context=context)
    assert isinstance(span, Span)
    return span


def finished(name: str, attributes: dict[str, Any], events: list[Event] | None = None
             ) -> ReadableSpan:
    context = SpanContext(1, 2, is_remote=False, trace_flags=TraceFlags(1))
    return ReadableSpan(name=name, context=context, attributes=attributes,
                        events=events or [], start_time=1_000_000, end_time=3_500_000)


def test_a_span_record_is_strands_clis_span_dict_with_values_capped() -> None:
    made = span_record(finished("chat", {"long": "x" * (MAX_VALUE_CHARS + 5), "n": 3,
                                         "list": ("a", "b")},
                                [Event("e", {"k": "v"}, timestamp=2_000_000)]))
    assert list(made) == ["name", "start_time", "end_time", "duration_ms", "attributes",
                          "events", "status"]
    assert made["duration_ms"] == 2.5
    assert made["start_time"] == "1970-01-01T00:00:00.001+00:00"
    assert made["attributes"]["long"].endswith("... [5 more characters]")
    assert (made["attributes"]["n"], made["attributes"]["list"]) == (3, ["a", "b"])
    assert made["events"] == [{"name": "e", "timestamp": "1970-01-01T00:00:00.002+00:00",
                               "attributes": {"k": "v"}}]
    assert made["status"] == {"status_code": "UNSET", "description": None}


def test_a_step_keeps_its_newest_spans_and_its_own_last() -> None:
    collector = StepCollector(live_span(), inputs=True, outputs=False, max_spans=3)
    for i in range(4):
        collector.add(finished(f"s{i}", {}))
    trace = collector.trace()
    assert trace is not None
    assert [s["name"] for s in trace["spans"]] == ["s2", "s3", "step step:0"]
    assert trace["evicted"] == 2
    small = StepCollector(live_span(), True, False, max_bytes=1500)
    for i in range(6):
        small.add(finished(f"s{i}", {"filler": "z" * 200}))
    trace = small.trace()
    assert trace is not None and trace["spans"][-1]["name"] == "step step:0"
    sizes = [len(json.dumps(s, ensure_ascii=False).encode()) for s in trace["spans"]]
    assert sum(sizes) <= 1500 and trace["evicted"] > 0


def test_spans_under_a_step_go_to_its_collector_and_nowhere_else() -> None:
    collectors = Collectors()
    step_span = live_span()
    collector = StepCollector(step_span, inputs=True, outputs=False)
    collectors.open(collector)
    child = live_span("execute_tool calc", parent=step_span)
    grandchild = live_span("chat", parent=child)
    stranger = live_span("elsewhere")
    for span in (child, grandchild, stranger):
        collectors.on_start(span)
    for span in (grandchild, child, stranger, step_span):
        span.end()
        collectors.on_end(span)
    trace = collector.trace()
    assert trace is not None
    assert [s["name"] for s in trace["spans"]] == ["chat", "execute_tool calc",
                                                   "step step:0"]
    collectors.close(collector)
    assert collector.live == set()


def test_the_step_span_is_redacted_like_every_span() -> None:
    span = live_span()
    span.set_attribute("gen_ai.tool.call.arguments", "secret")
    span.update_name("execute_tool x")  # a tool span: its input is blanked
    trace = StepCollector(span, inputs=True, outputs=False).trace()
    assert trace is not None
    assert trace["spans"][-1]["attributes"]["gen_ai.tool.call.arguments"] == REDACTED
