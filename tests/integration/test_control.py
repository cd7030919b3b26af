"""Pause, resume, cancel, human-in-the-loop and budgets on a real redis-server with an
in-process worker."""

from __future__ import annotations

from collections import Counter

import pytest
from helpers import StepBreakpoints, status_doc, wait_for
from pattern_specs import CASES

from strands_durable.errors import DurableError, InvalidTransition
from strands_durable.models import SessionStatus
from strands_durable.sessions.control import cancel, pause, resume
from strands_durable.sessions.start import start_session
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

HITL_SPEC = """
version: 0
name: approve
runtime: {provider: scripted}
agents:
  a: {prompt: "You draft."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "draft it"}
      - type: hitl
        prompt: "Approve the draft?"
        context_display: "Draft: {{ steps[0].response }}"
        default: "approved by default"
        timeout_seconds: TIMEOUT
      - {agent: a, input: "final after {{ hitl_response }} / {{ steps[1].response }}"}
"""


def chain(steps: int, budgets: str = "") -> str:
    body = "".join(f"      - {{agent: a, input: \"step {i} words here\"}}\n"
                   for i in range(steps))
    return f"""
version: 0
name: plain
runtime:
  provider: scripted
  {budgets}
agents:
  a: {{prompt: "You are a."}}
pattern:
  type: chain
  config:
    steps:
{body}"""


async def status_is(store: Store, sid: str, *statuses: SessionStatus) -> bool:
    return (await store.get_session(sid)).status in statuses


async def test_hitl_pauses_then_resumes_with_the_answer(store: Store,
                                                        consumer: StepConsumer) -> None:
    sid, _ = await start_session(store, load_spec_text(HITL_SPEC.replace("TIMEOUT", "0"),
                                                       "hitl.yaml"))
    await wait_for(lambda: status_is(store, sid, SessionStatus.PAUSED), what="HITL pause")
    doc = await status_doc(store, sid)
    assert doc["paused_reason"].startswith("waiting for human input at step:1")
    assert doc["waiting"] == [{"step": "step:1", "prompt": "Approve the draft?",
                               "context_display": "Draft: a: draft it",
                               "default": "approved by default", "timeout_at_ms": None}]
    with pytest.raises(DurableError, match="goes on once a human's answer is given"):
        await resume(store, sid)
    await resume(store, sid, hitl_response="ship it")
    await wait_for(lambda: status_is(store, sid, SessionStatus.COMPLETED), what="completion")
    history = (await status_doc(store, sid))["pattern_state"]["step_history"]
    assert history[1] == {"index": 1, "type": "hitl", "prompt": "Approve the draft?",
                          "response": "ship it", "tokens": 0}
    assert history[2]["response"] == "a: final after ship it / ship it"


async def test_hitl_timeout_applies_the_default(store: Store, consumer: StepConsumer) -> None:
    sid, _ = await start_session(store, load_spec_text(HITL_SPEC.replace("TIMEOUT", "1"),
                                                       "hitl.yaml"))
    await wait_for(lambda: status_is(store, sid, SessionStatus.COMPLETED), timeout_s=20,
                   what="the default to be applied and the session to complete")
    history = (await status_doc(store, sid))["pattern_state"]["step_history"]
    assert history[1]["response"] == "approved by default"


async def test_pause_at_step_boundary_then_resume(store: Store, consumer: StepConsumer,
                                                  breakpoints: StepBreakpoints) -> None:
    breakpoints.set("plain", "step:0")
    sid, _ = await start_session(store, load_spec_text(chain(4), "plain.yaml"))
    await breakpoints.wait("plain", "step:0")
    assert await pause(store, sid) == "paused"
    with pytest.raises(InvalidTransition, match="cannot pause a session that is paused"):
        await pause(store, sid)
    # The running step finishes and commits; the next one is held.
    breakpoints.clear("plain", "step:0")
    await wait_for(lambda: _committed(store, sid, 1), what="the running step to commit")
    record = await store.get_session(sid)
    assert record.status == SessionStatus.PAUSED and record.steps_committed == 1
    assert await store.redis.llen(store.keys.held(sid)) == 1
    await resume(store, sid)
    await wait_for(lambda: status_is(store, sid, SessionStatus.COMPLETED), what="completion")
    types = Counter(f["type"] for _, f in await store.events(sid))
    assert types["step_completed"] == 4 and types["session_paused"] == 1
    assert types["session_resumed"] == 1


async def _committed(store: Store, sid: str, n: int) -> bool:
    return (await store.get_session(sid)).steps_committed >= n


async def test_cancel_stops_scheduling(store: Store, consumer: StepConsumer,
                                       breakpoints: StepBreakpoints) -> None:
    breakpoints.set("plain", "step:0")
    sid, _ = await start_session(store, load_spec_text(chain(5), "plain.yaml"))
    await breakpoints.wait("plain", "step:0")
    assert await cancel(store, sid) == "cancelled"
    breakpoints.clear("plain", "step:0")  # the running step ends; nothing follows it
    await wait_for(lambda: _idle(consumer), what="the worker to go idle")
    record = await store.get_session(sid)
    # The running step's result is kept; no step after it ran.
    assert record.status == SessionStatus.CANCELLED and record.steps_committed == 1
    started = [f["step"] for _, f in await store.events(sid) if f["type"] == "step_started"]
    assert started == ["step:0"]
    with pytest.raises(InvalidTransition):
        await resume(store, sid)


async def _idle(consumer: StepConsumer) -> bool:
    return consumer.running == 0


async def test_budget_pauses_and_set_raises_it(store: Store, consumer: StepConsumer) -> None:
    spec = chain(4, budgets="budgets: {max_tokens: 12}")  # each step costs 4 + 5 tokens
    sid, _ = await start_session(store, load_spec_text(spec, "plain.yaml"))
    await wait_for(lambda: status_is(store, sid, SessionStatus.PAUSED), what="budget pause")
    record = await store.get_session(sid)
    assert record.steps_committed == 2
    assert "budget max_tokens exceeded: 18 tokens used, limit 12" in record.paused_reason
    with pytest.raises(DurableError, match="budget max_tokens exceeded"):
        await resume(store, sid)
    outcome = await resume(store, sid, budget_sets={"max_tokens": 1000})
    assert outcome.status == "running" and "budgets: max_tokens=1000" in outcome.notes
    await wait_for(lambda: status_is(store, sid, SessionStatus.COMPLETED), what="completion")
    usage = (await store.get_session(sid)).token_usage
    assert usage.total_input_tokens + usage.total_output_tokens == 4 * 9


async def test_resume_after_failure_reruns_only_the_failed_step(
        store: Store, consumer: StepConsumer) -> None:
    spec = chain(3).replace("provider: scripted", "provider: scripted\n  failure_policy: "
                            "{retries: 0}\n  script: {rules: [{contains: 'step 2', "
                            "error: 'down'}]}")
    sid, _ = await start_session(store, load_spec_text(spec, "plain.yaml"))
    await wait_for(lambda: status_is(store, sid, SessionStatus.FAILED), what="failure")
    fixed = spec.replace("error: 'down'", "reply: 'back up'")
    outcome = await resume(store, sid, new_spec=load_spec_text(fixed, "fixed.yaml"))
    assert any("spec changed" in n for n in outcome.notes)
    await wait_for(lambda: status_is(store, sid, SessionStatus.COMPLETED), what="completion")
    started = Counter(f["step"] for _, f in await store.events(sid)
                      if f["type"] == "step_started")
    assert started == {"step:0": 1, "step:1": 1, "step:2": 2}
    history = (await status_doc(store, sid))["pattern_state"]["step_history"]
    assert history[2]["response"] == "back up"


async def test_session_that_starts_with_a_human_step(store: Store,
                                                     consumer: StepConsumer) -> None:
    spec = HITL_SPEC.replace('      - {agent: a, input: "draft it"}\n', "").replace(
        "Draft: {{ steps[0].response }}", "Nothing yet").replace("TIMEOUT", "0").replace(
        "{{ steps[1].response }}", "{{ steps[0].response }}")
    sid, _ = await start_session(store, load_spec_text(spec, "first.yaml"))
    record = await store.get_session(sid)
    assert record.status == SessionStatus.PAUSED
    assert record.paused_reason.startswith("waiting for human input at step:0")
    assert await store.redis.xlen(store.keys.stream(0)) == 0  # nothing for a worker to run
    await resume(store, sid, hitl_response="go")
    await wait_for(lambda: status_is(store, sid, SessionStatus.COMPLETED), what="completion")
    history = (await status_doc(store, sid))["pattern_state"]["step_history"]
    assert history[-1]["response"] == "a: final after go / go"


PARALLEL_SPEC = """
version: 0
name: two-branches
runtime:
  provider: scripted
  max_parallel: 2
  failure_policy: {retries: 0}
  script:
    rules: [{contains: "b-step 0", error: "b is down"}]
agents:
  a: {prompt: "You are a."}
pattern:
  type: parallel
  config:
    branches:
      - id: a
        steps:
          - {agent: a, input: "a-step 0"}
          - {agent: a, input: "a-step 1"}
          - {agent: a, input: "a-step 2"}
      - id: b
        steps:
          - {agent: a, input: "b-step 0"}
          - {agent: a, input: "b-step 1"}
"""


async def test_failed_branch_fails_session_and_resume_reruns_only_it(
        store: Store, consumer: StepConsumer, breakpoints: StepBreakpoints) -> None:
    breakpoints.set("two-branches", "branch:a:0")
    sid, _ = await start_session(store, load_spec_text(PARALLEL_SPEC, "par.yaml"))
    await wait_for(lambda: status_is(store, sid, SessionStatus.FAILED), what="failure")
    failed = await status_doc(store, sid)
    assert "step branch:b:0" in failed["error"] and "b is down" in failed["error"]
    assert failed["pattern_state"]["failed_branches"] == ["b"]
    # Branch a was running when b failed; what it commits meanwhile is kept, and its
    # next steps are held for the resume rather than dropped.
    await breakpoints.wait("two-branches", "branch:a:0")
    breakpoints.clear("two-branches", "branch:a:0")
    await wait_for(lambda: _committed(store, sid, 1), what="branch a's running step")
    record = await store.get_session(sid)
    assert record.status == SessionStatus.FAILED
    assert await store.redis.llen(store.keys.held(sid)) == 1
    fixed = PARALLEL_SPEC.replace('error: "b is down"', 'reply: "b is back"')
    await resume(store, sid, new_spec=load_spec_text(fixed, "par.yaml"))
    await wait_for(lambda: status_is(store, sid, SessionStatus.COMPLETED), what="completion")
    done = await status_doc(store, sid)
    assert done["pattern_state"]["completed_branches"] == ["a", "b"]
    assert done["pattern_state"]["failed_branches"] == []
    events = [f for _, f in await store.events(sid)]
    started = Counter(f["step"] for f in events if f["type"] == "step_started")
    completed = Counter(f["step"] for f in events if f["type"] == "step_completed")
    assert started == {"branch:a:0": 1, "branch:a:1": 1, "branch:a:2": 1,
                       "branch:b:0": 2, "branch:b:1": 1}
    assert set(completed.values()) == {1} and len(completed) == 5
    assert done["pattern_state"]["branch_outputs"]["b"]["steps"][0]["response"] == "b is back"


async def test_graph_step_budget_pauses_and_set_lets_it_finish(
        store: Store, consumer: StepConsumer) -> None:
    # The shared loop graph runs 7 steps; a budget of 4 pauses it after the 4th.
    budgeted = CASES["graph"].text.replace(
        'provider: ollama', 'provider: ollama\n  budgets: {max_steps: 4}')
    sid, _ = await start_session(store, load_spec_text(budgeted, "graph.yaml",
                                                       provider="scripted"))
    await wait_for(lambda: status_is(store, sid, SessionStatus.PAUSED), what="budget pause")
    record = await store.get_session(sid)
    assert record.steps_committed == 4
    assert "budget max_steps reached: 4 steps used, limit 4" in record.paused_reason
    with pytest.raises(DurableError, match="budget max_steps reached"):
        await resume(store, sid)
    await resume(store, sid, budget_sets={"max_steps": 20})
    await wait_for(lambda: status_is(store, sid, SessionStatus.COMPLETED), what="completion")
    status = await status_doc(store, sid)
    assert status["pattern_state"]["iteration_counts"] == {"process": 3, "check": 3,
                                                           "finalize": 1}
    started = Counter(f["step"] for _, f in await store.events(sid)
                      if f["type"] == "step_started")
    assert set(started.values()) == {1} and len(started) == 7


async def test_control_of_an_unknown_session_writes_nothing(store: Store) -> None:
    from strands_durable.errors import SessionNotFound

    ghost = "00000000-0000-4000-8000-000000000000"
    for action in (pause, cancel, resume):
        with pytest.raises(SessionNotFound):
            await action(store, ghost)
    assert [k async for k in store.redis.scan_iter(f"{store.keys.prefix}*")
            if ghost in (k.decode() if isinstance(k, bytes) else k)] == []
