"""OpenTelemetry traces against a real OTLP/HTTP receiver (tests/otlp_receiver.py), on a
real redis-server: a session with tools is one trace, a span per step under the
session's span and Strands' own agent, model and tool spans under each step; a step
re-run by another `arq worker` after a crash joins the same trace; telemetry.redact
blanks tool inputs / outputs; sample_ratio 0 exports nothing; an export the collector
refuses fails no step; the fleet refuses a spec's own endpoint at submit, while
`durable run` on the user's machine honours it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from helpers import EXAMPLES, REPO, poll_until, wait_for
from helpers.fleet import Fleet, durable_bin
from otlp_receiver import (
    OTEL_VARIABLES,
    OtlpReceiver,
    Received,
    operator_receiver,
    otlp_receiver,
    run_traced,
)
from recovery import FAST

from strands_durable.api.app import create_app
from strands_durable.models import SessionStatus
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings, current_telemetry_policy
from strands_durable.spec.loader import load_spec_data
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer
from strands_durable.worker.faults import CRASH_EXIT_CODE
from strands_durable.worker.telemetry.ids import session_span_id
from strands_durable.worker.telemetry.redaction import REDACTED

pytestmark = pytest.mark.integration

WORKFLOW = "chain-calculator-tools"


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    """The receiver, as the operator's OTEL_EXPORTER_OTLP_ENDPOINT (workers inherit it)."""
    with operator_receiver(monkeypatch) as receiver:
        yield receiver


def calculator(**telemetry: Any) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((EXAMPLES / f"{WORKFLOW}.yaml").read_text())
    data["telemetry"] = telemetry or {"otel": {"service_name": "pricing"}}
    return data


async def trace_of(receiver: OtlpReceiver, sid: str) -> list[Received]:
    """The session's spans, once its session span has arrived (it comes last)."""
    trace_id = sid.replace("-", "")

    def complete(spans: list[Received]) -> bool:
        return any(s.trace_id == trace_id and s.name.startswith("session ") for s in spans)

    await asyncio.to_thread(receiver.wait_for, complete, 60, f"the trace of {sid}")
    return receiver.of_trace(trace_id)


def by_name(spans: list[Received], name: str) -> list[Received]:
    return [span for span in spans if span.name == name]


def under(spans: list[Received], root: Received) -> list[Received]:
    """Every span below `root`."""
    found, frontier = [], {root.span_id}
    while frontier:
        children = [span for span in spans if span.parent_id in frontier]
        found += children
        frontier = {span.span_id for span in children}
    return found


def blocks(spans: list[Received], kind: str) -> list[dict[str, Any]]:
    """The `kind` blocks (toolUse, toolResult) of the conversations these spans recorded."""
    found = []
    for span in spans:
        for _, attributes in span.events:
            for text in map(str, attributes.values()):
                if f'"{kind}"' in text and text.startswith("["):
                    found += [block[kind] for block in json.loads(text)
                              if isinstance(block, dict) and kind in block]
    return found


def event(span: Received, name: str) -> dict[str, Any]:
    return next(attributes for event_name, attributes in span.events if event_name == name)


async def test_a_session_with_tools_is_one_trace_with_strands_spans_under_its_steps(
        receiver: OtlpReceiver, store: Store, consumer: StepConsumer) -> None:
    sid = await run_traced(store, calculator())
    spans = await trace_of(receiver, sid)
    (session,) = by_name(spans, f"session {WORKFLOW}")
    assert session.span_id == f"{session_span_id(sid):016x}" and session.parent_id == ""
    assert session.attributes == {
        "session.id": sid, "spec.name": WORKFLOW, "pattern.type": "chain",
        "session.status": "completed", "session.checkpoint_count": 3,
        "session.tokens_in": session.attributes["session.tokens_in"],
        "session.tokens_out": session.attributes["session.tokens_out"]}
    steps = [span for span in spans if span.name.startswith("step ")]
    assert sorted(span.name for span in steps) == ["step step:0", "step step:1", "step step:2"]
    assert {span.parent_id for span in steps} == {session.span_id}
    first = by_name(steps, "step step:0")[0]
    assert first.attributes == {
        "session.id": sid, "spec.name": WORKFLOW, "pattern.type": "chain",
        "step.key": "step:0", "agent.id": "accountant", "attempt": 1,
        "worker.id": consumer.name, "session.resumed": False,
        "session.steps_skipped": 0, "session.checkpoint_count": 0}
    assert by_name(steps, "step step:2")[0].attributes["session.checkpoint_count"] == 2
    # Strands' own spans, nested under the step that made them.
    inside = under(spans, first)
    names = [span.name for span in inside]
    assert "invoke_agent Strands Agents" in names
    assert names.count("chat") == 3  # three model turns: two tool calls, then the answer
    assert {"execute_tool calculator", "execute_tool current_time"} <= set(names)
    below_steps = [span for step in steps for span in under(spans, step)]
    assert len(spans) == 1 + len(steps) + len(below_steps)  # nothing outside a step
    assert {span.service for span in spans} == {"pricing"}
    # The default redaction: the tool's input is blanked, its output kept.
    (tool,) = by_name(inside, "execute_tool calculator")
    assert event(tool, "gen_ai.tool.message")["content"] == REDACTED
    assert "499.8" in event(tool, "gen_ai.choice")["message"]
    uses = blocks(spans, "toolUse")  # the model's tool calls, in its conversation
    assert len(uses) >= 2 and all(use["input"] == REDACTED for use in uses)


async def test_redaction_follows_the_spec(receiver: OtlpReceiver, store: Store,
                                          consumer: StepConsumer) -> None:
    sid = await run_traced(store, calculator(
        otel={"service_name": "pricing"}, redact={"tool_inputs": False, "tool_outputs": True}))
    spans = await trace_of(receiver, sid)
    (tool,) = by_name(spans, "execute_tool calculator")
    assert "49 * 12 * 0.85" in event(tool, "gen_ai.tool.message")["content"]
    assert event(tool, "gen_ai.choice")["message"] == REDACTED
    # The result travels on in the model's conversation: blanked there too.
    results = blocks(spans, "toolResult")
    assert results and all(result["content"] == REDACTED for result in results)
    assert any(use["input"] == {"expression": "49 * 12 * 0.85"}
               for use in blocks(spans, "toolUse"))


async def test_sample_ratio_zero_exports_nothing(receiver: OtlpReceiver, store: Store,
                                                 consumer: StepConsumer) -> None:
    unsampled = await run_traced(store, calculator(otel={"sample_ratio": 0.0}))
    sampled = await run_traced(store, calculator(otel={"sample_ratio": 1.0}))
    # Every span either session queued has been exported (flushed): the second one's
    # arrived, and none of the first's.
    assert await trace_of(receiver, sampled)
    assert receiver.of_trace(unsampled.replace("-", "")) == []


async def test_an_export_the_collector_refuses_fails_no_step(
        monkeypatch: pytest.MonkeyPatch, store: Store, consumer: StepConsumer) -> None:
    with otlp_receiver(status=400) as refusing:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", refusing.url)
        await run_traced(store, calculator())
        assert refusing.requests >= 1 and refusing.spans == []


async def test_sessions_on_one_worker_go_to_their_own_endpoints(
        receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, settings: DurableSettings,
        store: Store) -> None:
    """One worker, two sessions: one names its own (allowed) endpoint and service name,
    the other goes to the operator's. Neither sees the other's spans, and the operator's
    headers (credentials) go to the operator's collector alone."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer fleet-secret")
    with otlp_receiver() as own:
        monkeypatch.setenv("DURABLE_OTEL_ENDPOINTS", own.url)
        current_telemetry_policy.cache_clear()
        worker = StepConsumer(settings.model_copy(update={"otel_endpoints": own.url}), store)
        await worker.start()
        try:
            mine = await run_traced(store, calculator(
                otel={"endpoint": own.url, "service_name": "mine"}))
            fleets = await run_traced(store, calculator(otel={"service_name": "fleet"}))
        finally:
            await worker.stop(grace_s=0)
            current_telemetry_policy.cache_clear()
        assert {span.service for span in await trace_of(own, mine)} == {"mine"}
        assert {span.service for span in await trace_of(receiver, fleets)} == {"fleet"}
        assert not own.of_trace(fleets.replace("-", ""))
        assert not receiver.of_trace(mine.replace("-", ""))
        assert {s.headers.get("authorization") for s in own.spans} == {None}
        assert {s.headers.get("authorization") for s in receiver.spans} == {
            "Bearer fleet-secret"}


def spec_text(endpoint: str) -> str:
    data = calculator(otel={"endpoint": endpoint, "service_name": "users-own"})
    return yaml.safe_dump(data)


async def test_the_fleet_refuses_a_spec_endpoint_it_does_not_allow(
        monkeypatch: pytest.MonkeyPatch, settings: DurableSettings, store: Store,
        tmp_path: Path) -> None:
    for name in OTEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    text = spec_text("http://traces.example.com:4318")
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as client:
            reply = await client.post("/v1/sessions", json={"spec": text})
    assert reply.status_code == 422, reply.text
    error = reply.json()["error"]
    assert error["details"]["path"] == "telemetry.otel.endpoint"
    assert "DURABLE_OTEL_ENDPOINTS" in error["message"]
    # The CLI's submit: exit 2, the same words, nothing stored.
    path = tmp_path / "traced.yaml"
    path.write_text(text)
    env = {**os.environ, "DURABLE_REDIS_URL": settings.redis_url,
           "DURABLE_KEY_PREFIX": settings.key_prefix}
    done = subprocess.run([*durable_bin(), "submit", str(path)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "telemetry.otel.endpoint" in done.stderr and "Traceback" not in done.stderr
    assert await store.redis.keys(f"{settings.key_prefix}:*:s:*") == []


async def test_durable_run_on_the_users_machine_honours_the_spec_endpoint(
        tmp_path: Path) -> None:
    with otlp_receiver() as own:
        path = tmp_path / "traced.yaml"
        path.write_text(spec_text(own.url))
        env = {key: value for key, value in os.environ.items()
               if key not in OTEL_VARIABLES and key != "DURABLE_REDIS_URL"}
        env["DURABLE_HOME"] = str(tmp_path / "home")
        done = await asyncio.to_thread(
            subprocess.run, [*durable_bin(), "run", str(path)], cwd=REPO, env=env,
            capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        sid = done.stdout.split()[1]  # "session <id> (name, pattern)"
        spans = await trace_of(own, sid)  # exported before the command returned
        assert {span.service for span in spans} == {"users-own"}
        assert len([s for s in spans if s.name.startswith("step ")]) == 3


async def test_a_step_rerun_after_a_crash_joins_the_same_trace(
        receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, store: Store,
        fleet_factory: Any) -> None:
    """Worker A runs step:0 (its spans exported), then dies before committing step:1;
    worker B re-claims step:1 and finishes. Both workers' spans land in one trace,
    under the one session span."""
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    fleet: Fleet = fleet_factory(**FAST)
    fleet.breakpoints.set(WORKFLOW, "step:1")
    fleet.env["DURABLE_CRASH_AT"] = "before_commit:2"  # step:1's commit
    crashing = fleet.start_worker()
    del fleet.env["DURABLE_CRASH_AT"]
    sid, _ = await start_session(store, load_spec_data(calculator()))
    (hit,) = await fleet.breakpoints.wait(WORKFLOW, "step:1")
    trace_id = sid.replace("-", "")
    await asyncio.to_thread(receiver.wait_for, lambda spans: any(
        s.trace_id == trace_id and s.name == "step step:0" for s in spans), 60, "step:0")
    fleet.breakpoints.clear(WORKFLOW, "step:1")

    async def gone() -> bool:
        return crashing.poll() is not None

    assert await poll_until(gone, timeout_s=60), fleet.logs()
    assert crashing.returncode == CRASH_EXIT_CODE, fleet.logs()
    fleet.start_worker()

    async def ended() -> bool:
        return (await store.get_session(sid)).status != SessionStatus.RUNNING

    await wait_for(ended, timeout_s=90, what="the session to end")
    spans = await trace_of(receiver, sid)
    (session,) = by_name(spans, f"session {WORKFLOW}")
    steps = {span.name: span for span in spans if span.name.startswith("step ")}
    assert sorted(steps) == ["step step:0", "step step:1", "step step:2"]  # A's step:1 died
    assert {span.parent_id for span in steps.values()} == {session.span_id}
    assert steps["step step:0"].attributes["worker.id"] == hit.worker
    rerun = steps["step step:1"].attributes
    assert rerun["worker.id"] != hit.worker and rerun["session.resumed"] is True
    assert rerun["session.checkpoint_count"] == 1
    assert any(span.name == "chat" for span in under(spans, steps["step step:1"]))


UNTRACED_RUN = """
import asyncio, sys
from opentelemetry import trace
from strands_durable.spec.loader import load_spec_file
from strands_durable.worker.embedded import run_embedded
from strands_durable.settings import DurableSettings
from strands_durable.worker.telemetry import TRACING

outcome = asyncio.run(run_embedded(load_spec_file(sys.argv[1]), lambda result: None,
                                   settings=DurableSettings(redis_url="memory://")))
assert outcome.record.status.value == "completed", outcome.record
# No spec asked for traces and no OTEL_* endpoint is set: nothing was set up.
assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"
assert TRACING.flush(1) and TRACING._router is None
print("untraced")
"""


def test_without_tracing_anywhere_nothing_is_set_up() -> None:
    env = {key: value for key, value in os.environ.items()
           if key not in OTEL_VARIABLES and not key.startswith("DURABLE_")}
    done = subprocess.run([sys.executable, "-c", UNTRACED_RUN,
                           str(EXAMPLES / f"{WORKFLOW}.yaml")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "untraced", done.stderr
