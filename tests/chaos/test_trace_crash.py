"""Crash drills for `{{ TRACE }}`: a real `arq worker` dies (DURABLE_CRASH_AT, exit 137, no
cleanup) before step:0 commits, after its first tool result is journaled, or right after
it commits; a fresh worker finishes the session. Each step's spans are committed with
the step, so the trace artifact holds every step's spans exactly once: those of the run
that committed it (a re-run replays its journal, and its spans say so)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from helpers import EXAMPLES, poll_until, wait_for
from helpers.fleet import Fleet
from otlp_receiver import OtlpReceiver, operator_receiver
from recovery import FAST, ended

from strands_durable.models import SessionStatus
from strands_durable.sessions.start import start_session
from strands_durable.spec.loader import load_spec_data
from strands_durable.store.store import Store
from strands_durable.worker.faults import CRASH_EXIT_CODE
from strands_durable.worker.telemetry.redaction import REDACTED

pytestmark = pytest.mark.chaos

WORKFLOW = "chain-calculator-tools"


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    """The operator's collector: the workers inherit OTEL_EXPORTER_OTLP_ENDPOINT."""
    with operator_receiver(monkeypatch) as receiver:
        yield receiver


def spec() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((EXAMPLES / f"{WORKFLOW}.yaml").read_text())
    data["telemetry"] = {"otel": {"service_name": "pricing"}}
    data["outputs"]["artifacts"].append({"path": "trace.json", "from": "{{ TRACE }}"})
    return data


@pytest.mark.parametrize("crash_at", ["before_commit:1", "after_tool:1", "after_commit:1"])
async def test_each_steps_spans_are_in_the_trace_once_after_a_crash(
        crash_at: str, receiver: OtlpReceiver, store: Store, fleet_factory: Any) -> None:
    fleet: Fleet = fleet_factory(**FAST)
    fleet.env["DURABLE_CRASH_AT"] = crash_at
    crashing = fleet.start_worker()
    del fleet.env["DURABLE_CRASH_AT"]
    sid, _ = await start_session(store, load_spec_data(spec()))

    async def gone() -> bool:
        return crashing.poll() is not None

    assert await poll_until(gone, timeout_s=90), fleet.logs()
    assert crashing.returncode == CRASH_EXIT_CODE, fleet.logs()
    fleet.start_worker()
    await wait_for(lambda: ended(store, sid), timeout_s=90, what="the session to end")
    assert (await store.get_session(sid)).status == SessionStatus.COMPLETED, fleet.logs()

    data = json.loads((await store.artifacts(sid))["trace.json"])
    names = [span["name"] for span in data["spans"]]
    assert [n for n in names if n.startswith("step ")] == [
        "step step:0", "step step:1", "step step:2"]
    assert (names.count("execute_tool calculator"), names.count("execute_tool current_time"),
            names.count("chat"), names.count("invoke_agent Strands Agents")) == (1, 1, 5, 3)
    assert data["span_count"] == len(names) and data["evicted_count"] == 0
    step0 = data["spans"][names.index("step step:0")]["attributes"]
    # The run that committed step:0: the one that crashed after committing, else the
    # fresh worker's re-run, which replayed what the crashed run had journaled.
    rerun = crash_at != "after_commit:1"
    assert step0["session.resumed"] is rerun
    assert (step0["session.steps_skipped"] > 0) is rerun
    (tool,) = [s for s in data["spans"] if s["name"] == "execute_tool calculator"]
    (message,) = [e for e in tool["events"] if e["name"] == "gen_ai.tool.message"]
    assert message["attributes"]["content"] == REDACTED
