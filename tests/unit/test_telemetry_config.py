"""Telemetry, the pure parts: a session's trace config from its spec's `telemetry` and the
operator's OTEL_* variables; the submit-time check of a spec's endpoint against the
fleet's policy; one trace id per session and a sampling decision every worker agrees
on; redaction of tool inputs and outputs in Strands' spans."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import SpanContext

from strands_durable.errors import SpecError
from strands_durable.settings import TelemetryPolicy
from strands_durable.spec.loader import load_spec_data
from strands_durable.spec.sections import OtelConfig, Redaction, Telemetry
from strands_durable.spec.telemetry import (
    DEFAULT_SERVICE_NAME,
    DEFAULT_TRACES_URL,
    OtelEnv,
    TraceConfig,
    check_telemetry,
    resolve_trace_config,
    traces_url,
)
from strands_durable.worker.telemetry.ids import sampled, session_span_id, session_trace_id
from strands_durable.worker.telemetry.redaction import REDACTED, redact_span

OPERATOR = "http://collector.internal:4318"


def telemetry(endpoint: str | None = None, **otel: Any) -> Telemetry:
    return Telemetry(otel=OtelConfig(endpoint=endpoint, **otel))


def resolve(spec: Telemetry | None, env: OtelEnv | None = None,
            allowed: tuple[str, ...] = (), local: bool = False) -> TraceConfig | None:
    return resolve_trace_config(spec, env or OtelEnv(), allowed, local)


# -- the operator's variables ---------------------------------------------------------
VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT",
             "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_SERVICE_NAME",
             "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG")


def test_the_process_variables_are_read_again_as_soon_as_one_changes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """OtelEnv.read() keeps its parse while the variables stay as they were (a worker
    reads them at every step), and sees every change, set or unset, at the next read."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert OtelEnv.read() == OtelEnv()
    assert OtelEnv.read() is OtelEnv.read()  # unchanged: the same parse
    steps = [("OTEL_EXPORTER_OTLP_ENDPOINT", OPERATOR,
              OtelEnv(traces_endpoint=OPERATOR + "/v1/traces")),
             ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", OPERATOR + "/t",
              OtelEnv(traces_endpoint=OPERATOR + "/t")),
             ("OTEL_SERVICE_NAME", "fleet",
              OtelEnv(traces_endpoint=OPERATOR + "/t", service_name="fleet")),
             ("OTEL_TRACES_SAMPLER", "traceidratio",
              OtelEnv(traces_endpoint=OPERATOR + "/t", service_name="fleet",
                      sample_ratio=1.0)),
             ("OTEL_TRACES_SAMPLER_ARG", "0.25",
              OtelEnv(traces_endpoint=OPERATOR + "/t", service_name="fleet",
                      sample_ratio=0.25)),
             ("OTEL_TRACES_EXPORTER", "none",
              OtelEnv(traces_endpoint=OPERATOR + "/t", service_name="fleet",
                      sample_ratio=0.25, disabled=True))]
    for name, value, expected in steps:
        monkeypatch.setenv(name, value)
        assert OtelEnv.read() == expected, name
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0.5")  # a value changed, not added
    assert OtelEnv.read().sample_ratio == 0.5
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert OtelEnv.read() == OtelEnv(disabled=True)
    monkeypatch.delenv("OTEL_SDK_DISABLED")
    assert OtelEnv.read() == OtelEnv()


def test_a_replaced_environ_is_read_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.setattr(os, "environ", {"OTEL_SERVICE_NAME": "elsewhere"})
    assert OtelEnv.read() == OtelEnv(service_name="elsewhere")


def test_the_standard_variables_are_read_as_the_otel_sdk_reads_them() -> None:
    env = OtelEnv.read({"OTEL_EXPORTER_OTLP_ENDPOINT": OPERATOR + "/",
                        "OTEL_SERVICE_NAME": "fleet", "OTEL_TRACES_SAMPLER": "traceidratio",
                        "OTEL_TRACES_SAMPLER_ARG": "0.25"})
    assert env == OtelEnv(OPERATOR + "/v1/traces", "fleet", 0.25, False)
    # The signal's own variable is the full URL, used as it is.
    assert OtelEnv.read({"OTEL_EXPORTER_OTLP_ENDPOINT": OPERATOR,
                         "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:1/x"}
                        ).traces_endpoint == "http://t:1/x"
    assert OtelEnv.read({"OTEL_TRACES_SAMPLER": "always_off"}).sample_ratio == 0.0
    assert OtelEnv.read({"OTEL_TRACES_SAMPLER": "traceidratio",
                         "OTEL_TRACES_SAMPLER_ARG": "lots"}).sample_ratio == 1.0
    assert OtelEnv.read({"OTEL_SDK_DISABLED": "true"}).disabled
    assert OtelEnv.read({"OTEL_TRACES_EXPORTER": "none"}).disabled
    assert OtelEnv.read({}) == OtelEnv()


def test_nothing_is_traced_unless_the_spec_or_the_operator_asks() -> None:
    assert resolve(None) is None
    assert resolve(Telemetry(redact=Redaction(tool_outputs=True))) is None
    assert resolve(telemetry(), OtelEnv(traces_endpoint=OPERATOR, disabled=True)) is None
    assert resolve(None, OtelEnv(service_name="fleet")) is None  # a name is no endpoint


def test_the_operator_alone_traces_every_session_with_the_default_redaction() -> None:
    config = resolve(None, OtelEnv(traces_endpoint=OPERATOR + "/v1/traces",
                                   service_name="fleet", sample_ratio=0.5))
    assert config == TraceConfig(endpoint=OPERATOR + "/v1/traces", operator_endpoint=True,
                                 service_name="fleet", sample_ratio=0.5,
                                 redact_tool_inputs=True, redact_tool_outputs=False)


def test_the_spec_wins_for_its_service_name_ratio_and_redaction() -> None:
    spec = Telemetry(otel=OtelConfig(service_name="mine", sample_ratio=0.1),
                     redact=Redaction(tool_inputs=False, tool_outputs=True))
    config = resolve(spec, OtelEnv(traces_endpoint=OPERATOR + "/v1/traces",
                                   service_name="fleet", sample_ratio=1.0))
    assert config is not None
    assert (config.endpoint, config.service_name, config.sample_ratio) == (
        OPERATOR + "/v1/traces", "mine", 0.1)
    assert (config.redact_tool_inputs, config.redact_tool_outputs) == (False, True)


def test_no_endpoint_anywhere_is_the_otlp_default() -> None:
    config = resolve(telemetry())
    assert config is not None
    assert (config.endpoint, config.service_name) == (DEFAULT_TRACES_URL, DEFAULT_SERVICE_NAME)


def test_a_spec_endpoint_is_used_where_allowed_and_never_gets_the_operators_headers() -> None:
    env = OtelEnv(traces_endpoint=OPERATOR + "/v1/traces")
    mine = "https://traces.example.com:4318"
    local = resolve(telemetry(mine), env, local=True)
    allowed = resolve(telemetry(mine), env, allowed=(mine + "/v1/traces",))
    assert local == allowed
    assert local is not None and local.endpoint == mine + "/v1/traces"
    assert not local.operator_endpoint
    # Naming the operator's own endpoint is using it, with its headers.
    own = resolve(telemetry(OPERATOR), env)
    assert own is not None and own.operator_endpoint and own.endpoint == OPERATOR + "/v1/traces"
    # On the fleet, an endpoint nobody allowed is not where the spans go.
    refused = resolve(telemetry(mine), env)
    assert refused is not None and refused.endpoint == OPERATOR + "/v1/traces"
    assert resolve(telemetry(mine), env, allowed=("*",)) == local


def test_an_endpoint_gets_the_traces_path_unless_it_has_one() -> None:
    assert traces_url("http://h:4318") == "http://h:4318/v1/traces"
    assert traces_url("http://h:4318/") == "http://h:4318/v1/traces"
    assert traces_url("http://h/otlp/v1/traces") == "http://h/otlp/v1/traces"


# -- the submit-time check ------------------------------------------------------------
def spec_with(endpoint: str) -> dict[str, Any]:
    return {"version": 0, "name": "traced", "runtime": {"provider": "scripted"},
            "telemetry": {"otel": {"endpoint": endpoint, "service_name": "s"}},
            "agents": {"a": {"prompt": "A."}},
            "pattern": {"type": "chain", "config": {"steps": [{"agent": "a", "input": "x"}]}}}


def test_the_fleet_refuses_a_spec_endpoint_it_does_not_allow(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    with pytest.raises(SpecError) as caught:
        load_spec_data(spec_with("http://user:secret@evil.example:4318"))
    error = caught.value
    assert error.path == "telemetry.otel.endpoint"
    assert "http://evil.example:4318/v1/traces" in error.problem
    assert "DURABLE_OTEL_ENDPOINTS" in error.problem and "secret" not in str(error)


def test_the_allow_list_and_the_operators_endpoint_pass() -> None:
    assert load_with_policy("http://traces.example:4318",
                            allowed="http://traces.example:4318") == "ok"
    assert load_with_policy("http://traces.example:4318/v1/traces", allowed="*") == "ok"
    assert load_with_policy("http://collector.internal:4318/v1/traces", allowed="",
                            env=OtelEnv(traces_endpoint=OPERATOR + "/v1/traces")) == "ok"
    assert load_with_policy("http://traces.example:4318", allowed="http://other:4318") \
        == "telemetry.otel.endpoint"


def load_with_policy(endpoint: str, allowed: str, env: OtelEnv | None = None) -> str:
    from strands_durable.spec.model import Spec

    spec = Spec.model_validate(spec_with(endpoint))
    try:
        check_telemetry(spec, "s", TelemetryPolicy(otel_endpoints=allowed), env or OtelEnv(),
                        local=False)
    except SpecError as exc:
        return exc.path
    return "ok"


@pytest.mark.parametrize("endpoint", ["localhost:4318", "ftp://h/x", "http://h:port",
                                      "http://[::1"])
def test_an_endpoint_that_is_no_http_url_is_refused_even_locally(endpoint: str) -> None:
    from strands_durable.spec.model import Spec

    spec = Spec.model_validate(spec_with(endpoint))
    with pytest.raises(SpecError) as caught:
        check_telemetry(spec, "s", TelemetryPolicy(otel_endpoints="*"), OtelEnv(), local=True)
    assert caught.value.path == "telemetry.otel.endpoint"


@pytest.mark.parametrize("endpoint", ["ftp://user:s3cret@h/x", "http://user:s3cret@h:99999",
                                      "http://user:s3cret@[::1", "http://u:pa/s3cret@h:x"])
def test_a_refused_endpoint_never_shows_its_password(endpoint: str) -> None:
    from strands_durable.spec.model import Spec

    spec = Spec.model_validate(spec_with(endpoint))
    with pytest.raises(SpecError) as caught:
        check_telemetry(spec, "s", TelemetryPolicy(otel_endpoints="*"), OtelEnv(), local=True)
    assert "s3cret" not in str(caught.value) and "user" not in str(caught.value)


def test_a_huge_endpoint_gets_a_bounded_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    with pytest.raises(SpecError) as caught:
        load_spec_data(spec_with("http://evil.example/" + "a" * 100_000))
    assert caught.value.path == "telemetry.otel.endpoint"
    assert len(str(caught.value)) < 1_000


def test_durable_run_on_the_users_machine_honours_the_spec_endpoint() -> None:
    from strands_durable.spec.model import Spec

    spec = Spec.model_validate(spec_with("http://anywhere.example:4318"))
    check_telemetry(spec, "s", TelemetryPolicy(), OtelEnv(), local=True)


# -- ids and sampling -------------------------------------------------------------------
def test_the_trace_id_is_the_session_uuid_and_the_parent_span_id_is_stable() -> None:
    sid = str(uuid.uuid4())
    assert f"{session_trace_id(sid):032x}" == sid.replace("-", "")
    assert session_span_id(sid) == session_span_id(sid) != session_span_id(str(uuid.uuid4()))
    assert 0 < session_span_id(sid) < 1 << 64
    assert session_trace_id("not-a-uuid") == session_trace_id("not-a-uuid") != 0


def test_sampling_is_decided_per_session_the_same_everywhere() -> None:
    sids = [str(uuid.UUID(int=i * 7919 + 1, version=4)) for i in range(2000)]
    assert all(sampled(sid, 1.0) for sid in sids)
    assert not any(sampled(sid, 0.0) for sid in sids)
    kept = [sid for sid in sids if sampled(sid, 0.3)]
    assert 450 < len(kept) < 750  # about 30%, although UUID4s share their variant bits
    assert kept == [sid for sid in sids if sampled(sid, 0.3)]
    assert set(kept) <= {sid for sid in sids if sampled(sid, 0.6)}  # a higher ratio keeps more


# -- redaction ----------------------------------------------------------------------------
def span(name: str, attributes: dict[str, Any], events: list[Event]) -> ReadableSpan:
    return ReadableSpan(name=name, context=SpanContext(1, 2, is_remote=False),
                        attributes=attributes, events=events)


def test_a_tool_span_loses_its_input_and_keeps_its_output_by_default() -> None:
    tool = span("execute_tool calculator", {"gen_ai.tool.name": "calculator"}, [
        Event("gen_ai.tool.message", {"role": "tool", "content": '{"expression": "2+2"}',
                                      "id": "t1"}),
        Event("gen_ai.choice", {"message": '[{"text": "4"}]', "id": "t1"})])
    out = redact_span(tool, inputs=True, outputs=False)
    assert out.events[0].attributes == {"role": "tool", "content": REDACTED, "id": "t1"}
    assert out.events[1].attributes == {"message": '[{"text": "4"}]', "id": "t1"}
    both = redact_span(tool, inputs=True, outputs=True)
    assert both.events[1].attributes == {"message": REDACTED, "id": "t1"}
    assert redact_span(tool, inputs=False, outputs=False) is tool


def test_the_latest_conventions_attributes_are_redacted_too() -> None:
    tool = span("execute_tool x", {"gen_ai.operation.name": "execute_tool",
                                   "gen_ai.tool.call.arguments": '{"a": 1}',
                                   "gen_ai.tool.call.result": '[{"text": "r"}]'}, [])
    out = redact_span(tool, inputs=True, outputs=True)
    assert out.attributes == {"gen_ai.operation.name": "execute_tool",
                              "gen_ai.tool.call.arguments": REDACTED,
                              "gen_ai.tool.call.result": REDACTED}


def test_a_model_span_keeps_its_text_and_loses_the_tool_data_inside_messages() -> None:
    use = [{"toolUse": {"toolUseId": "t1", "name": "calc", "input": {"expression": "9*9"}}}]
    result = [{"toolResult": {"toolUseId": "t1", "status": "success",
                              "content": [{"text": "81"}]}}]
    parts = [{"role": "tool", "parts": [{"type": "tool_call", "name": "calc", "id": "t1",
                                         "arguments": {"x": 1}}]}]
    model = span("chat", {"gen_ai.input.messages": json.dumps(parts)}, [
        Event("gen_ai.assistant.message", {"content": json.dumps(use)}),
        Event("gen_ai.tool.message", {"content": json.dumps(result)}),
        Event("gen_ai.choice", {"message": json.dumps([{"text": "It is 81."}])})])
    out = redact_span(model, inputs=True, outputs=True)
    events = [dict(event.attributes or {}) for event in out.events]
    assert json.loads(events[0]["content"])[0]["toolUse"] == {
        "toolUseId": "t1", "name": "calc", "input": REDACTED}
    assert json.loads(events[1]["content"])[0]["toolResult"]["content"] == REDACTED
    assert json.loads(events[2]["message"]) == [{"text": "It is 81."}]
    assert json.loads(str((out.attributes or {})["gen_ai.input.messages"])
                      )[0]["parts"][0]["arguments"] == REDACTED
    kept = redact_span(model, inputs=False, outputs=True)
    assert "9*9" in str(kept.events[0].attributes) and "81" not in str(kept.events[1].attributes)
