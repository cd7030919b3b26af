"""Where an in-process worker plans (planning/inline.py), on a real
redis-server: a spec whose plans stay small is planned on the event loop; a spec whose
template runs past the loop's budget is planned again in a thread, completes as if
nothing happened, and plans in the thread from then on."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest
from helpers import wait_for

from strands_durable.models import SessionStatus, StepJob
from strands_durable.planning import advance
from strands_durable.sessions.start import start_session
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.store import Store
from strands_durable.worker import step_runner
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

SPEC = """
version: 0
name: loop-planning
runtime: {provider: scripted, model_id: scripted-1, script: {rules: [{reply: ok}]}}
inputs: {values: {text: "x"}}
agents: {a: {prompt: "You are a."}}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "one"}
      - {agent: a, input: "TEMPLATE"}
"""


@pytest.fixture
def planned_on(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, bool]]]:
    """(step planned from, whether on the event loop's thread) for every plan_commit."""
    calls: list[tuple[str, bool]] = []
    loop_thread = threading.get_ident()

    def spy(snapshot: advance.Snapshot, job: StepJob, *args: object, **kwargs: object
            ) -> object:
        calls.append((job.key, threading.get_ident() == loop_thread))
        return advance.plan_commit(snapshot, job, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(step_runner, "plan_commit", spy)
    yield calls


async def run(store: Store, template: str, text: str) -> str:
    spec = SPEC.replace("TEMPLATE", template)
    sid, _ = await start_session(store, load_spec_text(spec, "loop.yaml", {"text": text}))

    async def completed() -> bool:
        return (await store.get_session(sid)).status == SessionStatus.COMPLETED

    await wait_for(completed, what="the session to complete")
    return sid


async def test_small_plans_run_on_the_event_loop(
        store: Store, consumer: StepConsumer, planned_on: list[tuple[str, bool]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The budget is wall time: on a machine loaded enough to preempt the loop for 5 ms
    # (CI at a load of 10) even this plan would move to the thread. What this test
    # checks is the choice, so its budget is ample; the next test checks the budget.
    monkeypatch.setattr(step_runner, "LOOP_BUDGET_S", 0.5)
    sid = await run(store, "two after {{ steps[0].response | upper }}", "x")
    assert planned_on == [("step:0", True), ("step:1", True)]
    assert (await store.results(sid))[1].key == "step:1"
    assert list(consumer.runner.on_loop.values()) == [True]


async def test_a_plan_past_the_loops_budget_moves_to_a_thread_and_completes(
        store: Store, consumer: StepConsumer, planned_on: list[tuple[str, bool]],
        caplog: pytest.LogCaptureFixture) -> None:
    # step:0's commit renders step:1's input: one budget check per character of `text`.
    slow = "{% for c in text %}{% endfor %}done after {{ steps[0].response }}"
    with caplog.at_level(logging.INFO, logger="durable.worker"):
        sid = await run(store, slow, "x" * 200_000)
    # Tried on the loop, stopped, planned again in a thread; the spec's next plan (the
    # last step's) goes straight to the thread.
    assert planned_on == [("step:0", True), ("step:0", False), ("step:1", False)]
    inputs = [m["content"][0]["text"] for m in await store.conversation(sid, "a", 100)
              if m["role"] == "user"]
    assert inputs == ["one", "done after ok"]
    assert list(consumer.runner.on_loop.values()) == [False]
    assert "its plans run in a thread from now on" in caplog.text
    events = [f["type"] for _, f in await store.events(sid)]
    assert events.count("step_completed") == 2 and "step_failed" not in events
