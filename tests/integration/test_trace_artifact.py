"""`{{ TRACE }}` in outputs.artifacts, on a real redis-server with the in-process worker and
a real OTLP/HTTP receiver: the artifact is strands-cli's trace JSON (its TraceCollector's
keys and span dicts) holding every committed step's spans exactly once, redacted as the
exporter redacts them; it is "" without telemetry.otel, and then a step's committed
record carries nothing new; a session sampled out renders the JSON with no spans; the
trace is cut, oldest spans first, to fit DURABLE_MAX_ARTIFACT_BYTES; strands-cli's own
redaction demo, run offline with `durable run`, writes its trace file."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import EXAMPLES, FIXTURES, REPO
from helpers.fleet import durable_bin
from otlp_receiver import (
    OTEL_VARIABLES,
    OtlpReceiver,
    operator_receiver,
    otlp_receiver,
    run_traced,
)

from strands_durable.settings import current_limits
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer
from strands_durable.worker.telemetry.redaction import REDACTED

pytestmark = pytest.mark.integration

WORKFLOW = "chain-calculator-tools"
# strands-cli's TraceCollector: get_trace_data's keys, add_span's span dict.
TRACE_KEYS = ["trace_id", "spec_name", "pattern", "duration_ms", "span_count",
              "evicted_count", "spans"]
SPAN_KEYS = ["name", "start_time", "end_time", "duration_ms", "attributes", "events",
             "status"]
RESULT_KEYS = {"key", "agent", "response", "input_tokens", "output_tokens", "attempt",
               "worker", "committed_at", "duration_ms", "meta"}


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    with operator_receiver(monkeypatch) as receiver:
        yield receiver


def calculator(telemetry: dict[str, Any] | None) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((EXAMPLES / f"{WORKFLOW}.yaml").read_text())
    if telemetry is not None:
        data["telemetry"] = telemetry
    data["outputs"]["artifacts"].append({"path": "trace.json", "from": "{{ TRACE }}"})
    return data


async def trace_artifact(store: Store, sid: str) -> dict[str, Any]:
    text = (await store.artifacts(sid))["trace.json"]
    data: dict[str, Any] = json.loads(text)
    assert list(data) == TRACE_KEYS
    assert data["trace_id"] == sid.replace("-", "")
    assert data["span_count"] == len(data["spans"])
    assert text == json.dumps(data, indent=2, ensure_ascii=False)  # strands-cli's layout
    return data


async def raw_results(store: Store, sid: str) -> dict[str, dict[str, Any]]:
    """Each step's record as committed (its JSON, not the parsed StepResult)."""
    key = store.keys.results(sid)
    steps = [str(s) for s in await store.redis.hkeys(key)]  # type: ignore[misc]
    return {step: json.loads(await store.redis.hget(key, step))  # type: ignore[misc]
            for step in steps}


def names(spans: list[dict[str, Any]]) -> list[str]:
    return [span["name"] for span in spans]


def event(span: dict[str, Any], name: str) -> dict[str, Any]:
    return next(e["attributes"] for e in span["events"] if e["name"] == name)


def tool_uses(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The toolUse blocks of the conversations the spans recorded."""
    found = []
    for span in spans:
        for e in span["events"]:
            for text in map(str, e["attributes"].values()):
                if '"toolUse"' in text and text.startswith("["):
                    found += [block["toolUse"] for block in json.loads(text)
                              if isinstance(block, dict) and "toolUse" in block]
    return found


async def test_the_trace_artifact_holds_every_steps_spans_once_redacted(
        receiver: OtlpReceiver, store: Store, consumer: StepConsumer) -> None:
    sid = await run_traced(store, calculator({"otel": {"service_name": "pricing"}}))
    data = await trace_artifact(store, sid)
    spans = data["spans"]
    assert (data["spec_name"], data["pattern"], data["evicted_count"]) == (
        WORKFLOW, "chain", 0)
    assert all(list(span) == SPAN_KEYS for span in spans)
    assert [n for n in names(spans) if n.startswith("step ")] == [
        "step step:0", "step step:1", "step step:2"]
    assert names(spans).count("invoke_agent Strands Agents") == 3
    assert names(spans).count("chat") == 5  # 3 turns of step:0 (two tool calls), 1, 1
    assert names(spans).count("execute_tool calculator") == 1
    assert names(spans).count("execute_tool current_time") == 1
    # Each step's spans come before its own span, which closes them (commit order).
    step0 = names(spans).index("step step:0")
    assert names(spans)[:step0].count("chat") == 3
    assert spans[step0]["attributes"]["step.key"] == "step:0"
    assert spans[step0]["attributes"]["worker.id"] == consumer.name
    # Redacted as the exporter redacts (the default: tool inputs).
    (tool,) = [s for s in spans if s["name"] == "execute_tool calculator"]
    assert event(tool, "gen_ai.tool.message")["content"] == REDACTED
    assert "499.8" in event(tool, "gen_ai.choice")["message"]
    uses = tool_uses(spans)
    assert len(uses) >= 2 and all(use["input"] == REDACTED for use in uses)
    assert '"expression"' not in json.dumps(data)  # the calculator's input, nowhere
    # The same spans the collector got, the session's own span aside (it ends later).
    exported = receiver.of_trace(sid.replace("-", ""))
    assert sorted(s.name for s in exported if not s.name.startswith("session ")) == sorted(
        names(spans))
    # Committed with each step, in its result.
    results = await raw_results(store, sid)
    assert {key: [s["name"] for s in r["trace"]["spans"]][-1] for key, r in results.items()
            } == {"step:0": "step step:0", "step:1": "step step:1", "step:2": "step step:2"}


async def test_tool_outputs_redacted_when_the_spec_says(
        receiver: OtlpReceiver, store: Store, consumer: StepConsumer) -> None:
    sid = await run_traced(store, calculator({"otel": {}, "redact": {"tool_inputs": False,
                                                              "tool_outputs": True}}))
    spans = (await trace_artifact(store, sid))["spans"]
    (tool,) = [s for s in spans if s["name"] == "execute_tool calculator"]
    assert "49 * 12 * 0.85" in event(tool, "gen_ai.tool.message")["content"]
    assert event(tool, "gen_ai.choice")["message"] == REDACTED


async def test_pii_is_masked_in_the_trace_when_redaction_is_written(
        receiver: OtlpReceiver, store: Store, consumer: StepConsumer) -> None:
    data = calculator({"otel": {}, "redact": {"tool_inputs": True}})
    data["inputs"]["values"]["plan"] = "team (billing: jane.doe@example.com, 555-123-4567)"
    sid = await run_traced(store, data)
    text = json.dumps((await trace_artifact(store, sid))["spans"])
    assert "jane.doe@example.com" not in text and "555-123-4567" not in text
    assert "***REDACTED***" in text
    # Without `telemetry.redact` written, strands-cli masks nothing: neither does this.
    plain = await run_traced(store, {**data, "telemetry": {"otel": {}}})
    assert "jane.doe@example.com" in json.dumps((await trace_artifact(store, plain))["spans"])


async def test_untraced_the_trace_is_empty_and_results_carry_nothing_new(
        monkeypatch: pytest.MonkeyPatch, store: Store, consumer: StepConsumer) -> None:
    for name in OTEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    sid = await run_traced(store, calculator(None))
    assert (await store.artifacts(sid))["trace.json"] == ""
    assert all(set(r) == RESULT_KEYS for r in (await raw_results(store, sid)).values())


async def test_the_operators_endpoint_alone_keeps_no_trace_artifact(
        receiver: OtlpReceiver, store: Store, consumer: StepConsumer) -> None:
    """Exported (the fleet traces everything), but the spec has no telemetry.otel: as in
    strands-cli, TRACE is "" and the steps store nothing more."""
    sid = await run_traced(store, calculator(None))
    assert (await store.artifacts(sid))["trace.json"] == ""
    assert all(set(r) == RESULT_KEYS for r in (await raw_results(store, sid)).values())


async def test_a_session_sampled_out_renders_no_spans(
        receiver: OtlpReceiver, store: Store, consumer: StepConsumer) -> None:
    sid = await run_traced(store, calculator({"otel": {"sample_ratio": 0.0}}))
    data = await trace_artifact(store, sid)
    assert (data["span_count"], data["spans"], data["evicted_count"]) == (0, [], 0)
    assert all(set(r) == RESULT_KEYS for r in (await raw_results(store, sid)).values())


async def test_the_trace_is_cut_oldest_first_to_fit_the_artifact_limit(
        receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, store: Store,
        consumer: StepConsumer) -> None:
    """The spans of one step:0 run are larger than the limit: the artifact keeps the
    newest spans that fit, counts the rest as evicted, and the session completes."""
    full = await trace_artifact(store, await run_traced(store, calculator({"otel": {}})))
    monkeypatch.setenv("DURABLE_MAX_ARTIFACT_BYTES", "16384")
    current_limits.cache_clear()
    try:
        sid = await run_traced(store, calculator({"otel": {}}))
        text = (await store.artifacts(sid))["trace.json"]
    finally:
        monkeypatch.delenv("DURABLE_MAX_ARTIFACT_BYTES")
        current_limits.cache_clear()
    assert len(json.dumps(full, indent=2).encode()) > 16384 >= len(text.encode())
    cut = json.loads(text)
    assert 0 < cut["span_count"] < full["span_count"]
    assert cut["evicted_count"] == full["span_count"] - cut["span_count"]
    assert names(cut["spans"]) == names(full["spans"])[-cut["span_count"]:]
    assert names(cut["spans"])[-1] == "step step:2"


async def test_strands_cli_spans_limit_evicts_the_oldest(
        receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, store: Store,
        consumer: StepConsumer) -> None:
    monkeypatch.setenv("STRANDS_MAX_TRACE_SPANS", "4")
    sid = await run_traced(store, calculator({"otel": {}}))
    data = await trace_artifact(store, sid)
    assert data["span_count"] == 4
    assert names(data["spans"])[-1] == "step step:2"
    assert data["evicted_count"] > 0


def test_the_corpus_redaction_demo_writes_its_trace_offline(tmp_path: Path) -> None:
    """strands-cli's telemetry-redaction demo, as the corpus test runs it (scripted
    provider, in-process store), its collector (localhost:4317, gRPC) pointed at a
    local OTLP/HTTP receiver: the trace file holds both steps; with OTEL_SDK_DISABLED it
    is strands-cli's trace with no spans, never empty."""
    demo = FIXTURES / "strands-cli-corpus/examples/telemetry-redaction-demo-openai.yaml"
    env = {k: v for k, v in os.environ.items()
           if k not in OTEL_VARIABLES and not k.startswith("DURABLE_")}
    env["DURABLE_HOME"] = str(tmp_path / "home")
    with otlp_receiver() as own:
        spec = tmp_path / "demo.yaml"
        spec.write_text(demo.read_text().replace("http://localhost:4317", own.url))
        data = durable_run(spec, tmp_path / "out", env)
    assert [n for n in names(data["spans"]) if n.startswith("step ")] == [
        "step step:0", "step step:1"]
    assert data["spec_name"] == "telemetry-redaction-demo"
    off = durable_run(demo, tmp_path / "off", {**env, "OTEL_SDK_DISABLED": "true"})
    assert (off["span_count"], off["spans"]) == (0, [])


def durable_run(spec: Path, out: Path, env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run([*durable_bin(), "run", str(spec), "--provider", "scripted",
                           "--ephemeral", "--out", str(out)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    data: dict[str, Any] = json.loads((out / "redaction-demo-trace.json").read_text())
    assert list(data) == TRACE_KEYS
    return data
