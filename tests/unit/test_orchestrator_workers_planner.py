"""The orchestrator_workers planner, driven by a fake worker pool that completes the
scheduled steps in different orders (parallel workers finish in any order)."""

from __future__ import annotations

import json
import random
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from strands_durable.models import SessionStatus, StepJob, StepResult
from strands_durable.patterns.base import Decision, PlanContext
from strands_durable.patterns.orchestrator_context import orchestrator_prompt, parse_tasks
from strands_durable.patterns.orchestrator_workers import OrchestratorWorkersPlanner
from strands_durable.planning.artifacts import render_artifacts
from strands_durable.spec.loader import load_spec_text

SPEC = """
version: 0
name: swarm
runtime: {provider: scripted}
agents:
  planner: {prompt: "You plan {{ topic }}."}
  worker: {prompt: "You research."}
  editor: {prompt: "You edit."}
pattern:
  type: orchestrator_workers
  config:
    orchestrator:
      agent: planner
      limits: {max_workers: 2, max_rounds: 2}
    worker_template:
      agent: worker
    reduce:
      agent: editor
      input: "Merge {{ num_workers }}/{{ worker_count }} on {{ topic }}: {% for w in workers %}{{ w.response }};{% endfor %}"
    writeup:
      agent: editor
      input: "Write {{ reduce_response }} after {{ round_count }} rounds, first {{ workers[0].response if workers else '-' }}"
inputs:
  values: {topic: tides}
outputs:
  artifacts:
    - path: out.md
      from: "{{ last_response }}|{{ num_workers }}|{{ round_count }}|{{ reduce_response }}"
"""  # noqa: E501

HITL_SPEC = """
version: 0
name: hitl-swarm
runtime: {provider: scripted}
agents:
  orchestrator: {prompt: "You plan {{ project_description }}."}
  worker: {prompt: "You work."}
  reducer: {prompt: "You reduce."}
pattern:
  type: orchestrator_workers
  config:
    orchestrator:
      agent: orchestrator
      limits: {max_workers: 3, max_rounds: 1}
    decomposition_review:
      type: hitl
      prompt: "Review the task decomposition."
      context_display: "{{ orchestrator_response }} **Number of subtasks:** {{ task_count }}"
      default: "approve"
      timeout_seconds: 1800
    worker_template:
      agent: worker
    reduce_review:
      type: hitl
      prompt: "Review {{ worker_count }} worker results."
      context_display: "{% for worker in workers %}{{ loop.index }}:{{ worker.task }}={{ worker.response[:300] }} {% endfor %}"
      default: "approved"
    reduce:
      agent: reducer
      input: "User review: {{ hitl_response }} | {% for worker in workers %}{{ worker.task }}={{ worker.response }} {% endfor %}"
inputs:
  values:
    project_description: "a feedback portal"
outputs:
  artifacts:
    - path: "./orchestrated-output.md"
      from: "{{ last_response }}"
"""  # noqa: E501

Reply = Callable[[StepJob], str]
ORDERS = ["fifo", "lifo", *[f"random:{seed}" for seed in range(8)]]


@dataclass
class Run:
    decision: Decision
    jobs: list[StepJob]
    results: Mapping[str, StepResult]
    view: dict[str, Any]
    max_workers_in_flight: int = 0
    completion_order: list[str] = field(default_factory=list)

    @property
    def keys(self) -> list[str]:
        return [j.key for j in self.jobs]

    def job(self, key: str) -> StepJob:
        return next(j for j in self.jobs if j.key == key)


def drive(spec_text: str, reply: Reply, order: str = "fifo") -> Run:
    """A pool that runs every scheduled step concurrently and completes them in `order`;
    each completion is planned against the latest committed state and results."""
    loaded = load_spec_text(spec_text, "ow.yaml")
    planner = OrchestratorWorkersPlanner()
    results: OrderedDict[str, StepResult] = OrderedDict()
    state: dict[str, Any] = {}
    rng = random.Random(order)

    def ctx() -> PlanContext:
        return PlanContext(spec=loaded.spec, variables=loaded.variables, state=state,
                           results=results, session_id="s1")

    decision = planner.start(ctx())
    jobs, pending = list(decision.schedule), list(decision.schedule)
    state = decision.state
    run = Run(decision, jobs, results, {})
    while decision.status == SessionStatus.RUNNING:
        assert pending, "stalled: running with nothing scheduled"
        in_flight = [j for j in pending if j.key.startswith("worker:")]
        run.max_workers_in_flight = max(run.max_workers_in_flight, len(in_flight))
        lanes = [j.conversation_lane for j in pending]
        assert len(lanes) == len(set(lanes)), f"parallel steps share a lane: {lanes}"
        index = {"fifo": 0, "lifo": -1}.get(order)
        job = pending.pop(rng.randrange(len(pending)) if index is None else index)
        agent = "hitl" if job.kind == "hitl" else job.agent
        result = StepResult(key=job.key, agent=agent, response=reply(job),
                            input_tokens=1, output_tokens=1)
        before = ctx()
        decision = planner.advance(before, result)
        assert planner.advance(before, result) == decision  # re-planning is deterministic
        json.loads(json.dumps(decision.state))
        results[result.key] = result
        state = decision.state
        jobs += decision.schedule
        pending += decision.schedule
        run.completion_order.append(job.key)
    keys = [j.key for j in jobs]
    assert len(keys) == len(set(keys)), f"a key was scheduled twice: {keys}"
    assert not pending, f"left running after {decision.status}: {pending}"
    run.decision = decision
    run.view = planner.view(ctx())
    return run


def plans(*rounds: str) -> Reply:
    """Orchestrator replies per attempt (in order); workers answer R(<task>)."""
    queue = list(rounds)

    def reply(job: StepJob) -> str:
        if job.key.startswith("orchestrate:"):
            return queue.pop(0)
        if job.key.startswith("worker:"):
            return f"R({job.input})"
        return f"<{job.key}: {job.input}>"
    return reply


def tasks_json(*names: str) -> str:
    return json.dumps([{"task": n} for n in names])


@pytest.mark.parametrize("order", ORDERS)
def test_two_rounds_any_completion_order(order: str) -> None:
    run = drive(SPEC, plans(tasks_json("a", "b", "c", "d", "e"),
                            "```json\n" + tasks_json("f") + "\n```"), order)
    expected_workers = {f"worker:1:{i}" for i in range(5)} | {"worker:2:0"}
    assert {k for k in run.keys if k.startswith("worker:")} == expected_workers
    assert [k for k in run.keys if not k.startswith("worker:")] == [
        "orchestrate:1", "orchestrate:2", "reduce", "writeup"]
    assert run.max_workers_in_flight == 2  # limits.max_workers bounds concurrency
    for i, task in enumerate("abcde"):
        job = run.job(f"worker:1:{i}")
        assert (job.input, job.agent, job.lane) == (task, "worker", f"worker:1:{i}")
    # Round 2 starts only after every round-1 worker completed, and sees their results.
    done = run.completion_order
    assert max(done.index(f"worker:1:{i}") for i in range(5)) < done.index("orchestrate:2")
    second = run.job("orchestrate:2").input
    assert all(f"R({t})" in second for t in "abcde") and "round 2 of at most 2" in second
    assert run.job("orchestrate:2").lane == ""  # the orchestrator's conversation continues
    reduce_input = run.job("reduce").input
    assert reduce_input == "Merge 6/6 on tides: R(a);R(b);R(c);R(d);R(e);R(f);"
    assert run.job("writeup").input == (f"Write <reduce: {reduce_input}> after 2 rounds, "
                                        "first R(a)")
    d = run.decision
    assert d.status == SessionStatus.COMPLETED
    assert d.final_response == f"<writeup: {run.job('writeup').input}>"
    loaded = load_spec_text(SPEC, "ow.yaml")
    rendered = render_artifacts(loaded.spec, d.artifact_context)
    assert rendered == {"out.md": f"{d.final_response}|6|2|<reduce: {reduce_input}>"}
    view = run.view
    assert view["current_round"] == 2 and view["phase"] == "done"
    assert view["reduce_completed"] and view["writeup_completed"]
    assert [(r["round"], r["tasks"]) for r in view["rounds"]] == [
        (1, ["a", "b", "c", "d", "e"]), (2, ["f"])]
    assert view["rounds"][0]["worker_outputs"][4] == {"index": 4, "task": "e",
                                                      "response": "R(e)", "tokens": 2}


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("max_workers", [1, 3, 10])
def test_max_workers_bounds_in_flight_workers(order: str, max_workers: int) -> None:
    spec = SPEC.replace("max_workers: 2", f"max_workers: {max_workers}")
    run = drive(spec, plans(tasks_json(*"abcdefg"), "[]"), order)
    assert run.max_workers_in_flight == min(max_workers, 7)
    assert sorted(k for k in run.keys if k.startswith("worker:")) == [
        f"worker:1:{i}" for i in range(7)]
    assert run.decision.status == SessionStatus.COMPLETED
    assert run.view["orchestrator_decision"] == "complete"


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize(("limits", "max_parallel", "bound"), [
    ("{max_workers: 4}", 2, 2),   # the smaller of the two wins
    ("{max_workers: 2}", 3, 2),
    ("{max_rounds: 1}", 3, 3),    # max_parallel alone bounds the workers
])
def test_runtime_max_parallel_bounds_in_flight_workers(order: str, limits: str,
                                                        max_parallel: int, bound: int) -> None:
    spec = (SPEC.replace("limits: {max_workers: 2, max_rounds: 2}", f"limits: {limits}")
            .replace("runtime: {provider: scripted}",
                     f"runtime: {{provider: scripted, max_parallel: {max_parallel}}}"))
    run = drive(spec, plans(tasks_json(*"abcdefg"), "[]"), order)
    assert run.max_workers_in_flight == bound
    assert sorted(k for k in run.keys if k.startswith("worker:")) == [
        f"worker:1:{i}" for i in range(7)]
    assert run.decision.status == SessionStatus.COMPLETED


def test_unlimited_workers_and_one_round_by_default() -> None:
    spec = SPEC.replace("      limits: {max_workers: 2, max_rounds: 2}\n", "")
    run = drive(spec, plans(tasks_json("a", "b", "c")))
    assert run.keys[:4] == ["orchestrate:1", "worker:1:0", "worker:1:1", "worker:1:2"]
    assert run.max_workers_in_flight == 3
    assert "orchestrate:2" not in run.keys  # strands-cli runs exactly one round
    assert run.decision.status == SessionStatus.COMPLETED


@pytest.mark.parametrize("done_reply", ["[]", "complete", "Complete.", '{"tasks": []}'])
def test_orchestrator_ends_rounds_with_empty_list_or_complete(done_reply: str) -> None:
    spec = SPEC.replace("max_rounds: 2", "max_rounds: 5")
    run = drive(spec, plans(tasks_json("a"), tasks_json("b"), done_reply))
    assert [k for k in run.keys if k.startswith("orchestrate")] == [
        "orchestrate:1", "orchestrate:2", "orchestrate:3"]
    assert run.view["orchestrator_decision"] == "complete"
    assert run.view["current_round"] == 3
    assert run.decision.artifact_context["round_count"] == 3
    assert run.decision.artifact_context["num_workers"] == 2


def test_max_rounds_stops_asking_the_orchestrator() -> None:
    run = drive(SPEC, plans(tasks_json("a"), tasks_json("b")))
    assert [k for k in run.keys if k.startswith("orchestrate")] == [
        "orchestrate:1", "orchestrate:2"]
    assert {"worker:1:0", "worker:2:0", "reduce", "writeup"} <= set(run.keys)
    assert run.view["orchestrator_decision"] == "continue"


def test_first_prompt_is_strands_clis() -> None:
    run = drive(SPEC, plans("[]"))
    first = run.job("orchestrate:1")
    assert first.input == orchestrator_prompt({"topic": "tides"})
    assert first.input.startswith("You are an orchestrator agent. Break down")
    assert '"topic": "tides"' in first.input and first.system_prompt == "You plan {{ topic }}."


def test_empty_plan_goes_straight_to_reduce() -> None:
    run = drive(SPEC, plans("[]"))
    assert run.keys == ["orchestrate:1", "reduce", "writeup"]
    assert run.job("reduce").input == "Merge 0/0 on tides: "


def test_no_reduce_no_writeup_aggregates_worker_responses() -> None:
    spec = SPEC.split("    reduce:")[0] + SPEC[SPEC.index("inputs:"):]
    spec = spec.replace("|{{ reduce_response }}", "")
    run = drive(spec, plans(tasks_json("a", "b"), "[]"), "lifo")
    d = run.decision
    assert d.final_response == "Worker 0: R(a)\n\nWorker 1: R(b)"
    assert not run.view["reduce_completed"] and not run.view["writeup_completed"]


@pytest.mark.parametrize(("replies", "keys"), [
    (["Let me think...", tasks_json("a")], ["orchestrate:1", "orchestrate:1:retry:1"]),
    (["nope", "still nope", '```json\n[{"task": "a"}]\n```'],
     ["orchestrate:1", "orchestrate:1:retry:1", "orchestrate:1:retry:2"]),
])
def test_malformed_plan_is_retried(replies: list[str], keys: list[str]) -> None:
    spec = SPEC.replace("max_rounds: 2", "max_rounds: 1")
    run = drive(spec, plans(*replies))
    assert [k for k in run.keys if k.startswith("orchestrate")] == keys
    retry = run.job(keys[-1])
    assert retry.input.startswith("Your previous response was not valid JSON.")
    assert f"Previous response that failed to parse:\n{replies[-2]}" in retry.input
    assert run.decision.status == SessionStatus.COMPLETED


def test_malformed_plan_fails_after_three_attempts_naming_step_and_reply() -> None:
    run = drive(SPEC, plans("no", "no again", "I refuse to use JSON"))
    assert run.keys == ["orchestrate:1", "orchestrate:1:retry:1", "orchestrate:1:retry:2"]
    d = run.decision
    assert d.status == SessionStatus.FAILED
    assert "step 'orchestrate:1:retry:2'" in d.reason and "after 3 attempts" in d.reason
    assert "I refuse to use JSON" in d.reason


def test_malformed_plan_in_a_later_round_retries_that_round() -> None:
    run = drive(SPEC, plans(tasks_json("a"), "hmm", "[]"))
    assert [k for k in run.keys if k.startswith("orchestrate")] == [
        "orchestrate:1", "orchestrate:2", "orchestrate:2:retry:1"]
    assert run.decision.status == SessionStatus.COMPLETED


@pytest.mark.parametrize(("reply", "tasks"), [
    ('[{"task": "a"}, {"task": "b", "priority": 1}]', ["a", "b"]),
    ('{"task": "solo"}', ["solo"]),
    ('{"tasks": [{"task": "x"}, "y"]}', ["x", "y"]),
    ('{"subtasks": [{"task": "x"}]}', ["x"]),
    ('Plan:\n[{"description": "d"}]', ["{'description': 'd'}"]),
    ("[]", []),
    ("complete", []),
    ('"done"', []),
])
def test_parse_tasks(reply: str, tasks: list[str]) -> None:
    assert parse_tasks(reply) == tasks


@pytest.mark.parametrize("reply", ["", "I will split it in three", "{task: a}"])
def test_parse_tasks_rejects(reply: str) -> None:
    with pytest.raises(ValueError):
        parse_tasks(reply)


@pytest.mark.parametrize("order", ORDERS[:4])
def test_hitl_review_gates_like_strands_cli_example(order: str) -> None:
    def reply(job: StepJob) -> str:
        if job.key == "orchestrate:1":
            return tasks_json("ui", "api", "dash")
        if job.key == "review:decomposition:1":
            return "approve"
        if job.key == "review:reduce":
            return "looks good"
        if job.key.startswith("worker:"):
            return f"R({job.input})"
        return "FINAL"

    run = drive(HITL_SPEC, reply, order)
    assert run.keys[:2] == ["orchestrate:1", "review:decomposition:1"]
    decomposition = run.job("review:decomposition:1")
    assert decomposition.kind == "hitl"
    assert decomposition.meta["context_display"] == (
        json.dumps([{"task": t} for t in ("ui", "api", "dash")], indent=2)
        + " **Number of subtasks:** 3")
    assert decomposition.meta["default"] == "approve"
    assert decomposition.meta["timeout_seconds"] == 1800
    review = run.job("review:reduce")
    done = run.completion_order
    assert max(done.index(f"worker:1:{i}") for i in range(3)) < done.index("review:reduce")
    assert review.input == "Review 3 worker results."
    assert review.meta["context_display"] == "1:ui=R(ui) 2:api=R(api) 3:dash=R(dash) "
    assert run.job("reduce").input == ("User review: looks good | ui=R(ui) api=R(api) "
                                       "dash=R(dash) ")
    assert run.decision.final_response == "FINAL"
    loaded = load_spec_text(HITL_SPEC, "hitl.yaml")
    assert render_artifacts(loaded.spec, run.decision.artifact_context) == {
        "orchestrated-output.md": "FINAL"}


def test_view_mid_round_shows_pending_workers() -> None:
    loaded = load_spec_text(SPEC, "ow.yaml")
    planner = OrchestratorWorkersPlanner()
    state = {"phase": "workers", "current_round": 1, "orchestrator_attempts": 1,
             "rounds": [{"round": 1, "tasks": ["a", "b"]}], "dispatched": 2,
             "orchestrator_decision": "continue", "reduce_completed": False,
             "writeup_completed": False}
    results = {"worker:1:1": StepResult(key="worker:1:1", agent="worker", response="R(b)")}
    view = planner.view(PlanContext(spec=loaded.spec, variables=loaded.variables,
                                    state=state, results=results))
    assert view["rounds"] == [{"round": 1, "tasks": ["a", "b"], "worker_outputs": [
        None, {"index": 1, "task": "b", "response": "R(b)", "tokens": 0}]}]
    empty = planner.view(PlanContext(spec=loaded.spec, variables=loaded.variables,
                                     state={}, results={}))
    assert empty["rounds"] == [] and empty["current_round"] == 1
