"""The workflow planner is pure: DAG + pattern_state + results -> decision (no Redis).

A driver plays a worker pool: it completes the scheduled steps in different orders
(FIFO, LIFO, seeded random), feeding each result to advance() the way the worker does
(the state round-trips through JSON as through Redis), and checks after every step
that no key is scheduled twice and that max_parallel holds.
"""

from __future__ import annotations

import json
import random
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

from strands_durable.errors import TemplateError
from strands_durable.models import SessionStatus, StepJob, StepResult
from strands_durable.patterns.base import Decision, PlanContext
from strands_durable.patterns.workflow import (
    WorkflowPlanner,
    execution_order,
    layers,
    task_key,
    task_refs,
)
from strands_durable.planning.artifacts import render_artifacts
from strands_durable.spec.loader import LoadedSpec, load_spec_text

FIXTURE = Path(__file__).parents[1] / "fixtures" / "strands-cli" / "workflow-parallel-research.yaml"
ORDERS: list[str | int] = ["fifo", "lifo", *range(8)]
planner = WorkflowPlanner()


def echo(job: StepJob) -> str:
    return f"<{job.key}|{job.input.strip()}>"


@dataclass
class Run:
    final: Decision
    jobs: dict[str, StepJob]  # every job scheduled, by key, in scheduling order
    results: OrderedDict[str, StepResult]
    state: dict[str, Any]
    peak: int  # most agent jobs in flight at once
    peak_hitl: int

    def ctx(self, text: str) -> PlanContext:
        return make_ctx(text, self.state, self.results)


@lru_cache(maxsize=64)
def load(text: str) -> LoadedSpec:
    return load_spec_text(text, "workflow.yaml")


def make_ctx(text: str, state: dict[str, Any], results: OrderedDict[str, StepResult]
             ) -> PlanContext:
    loaded = load(text)
    return PlanContext(spec=loaded.spec, variables=loaded.variables, state=state,
                       results=OrderedDict(results), session_id="s1")


def drive(text: str, order: str | int, answer: Callable[[StepJob], str] = echo,
          limit: int = 500) -> Run:
    max_parallel = load(text).spec.runtime.max_parallel
    rng = random.Random(order)
    results: OrderedDict[str, StepResult] = OrderedDict()
    jobs: dict[str, StepJob] = {}
    counts: Counter[str] = Counter()
    pending: list[StepJob] = []
    peak = peak_hitl = 0

    def take(decision: Decision) -> dict[str, Any]:
        nonlocal peak, peak_hitl
        for job in decision.schedule:
            counts[job.key] += 1
            assert counts[job.key] == 1, f"{job.key} scheduled twice"
            jobs[job.key] = job
            pending.append(job)
        agents = sum(1 for j in pending if j.kind == "agent")
        hitls = len(pending) - agents
        assert agents <= max_parallel and hitls <= 1
        peak, peak_hitl = max(peak, agents), max(peak_hitl, hitls)
        return json.loads(json.dumps(decision.state))  # stored as JSON

    decision = planner.start(make_ctx(text, {}, results))
    state = take(decision)
    while pending and limit:
        limit -= 1
        assert decision.status == SessionStatus.RUNNING
        pick = 0 if order == "fifo" else len(pending) - 1 if order == "lifo" else (
            rng.randrange(len(pending)))
        job = pending.pop(pick)
        hitl = job.kind == "hitl"
        result = StepResult(key=job.key, agent="hitl" if hitl else job.agent,
                            response=answer(job), input_tokens=0 if hitl else 3,
                            output_tokens=0 if hitl else 4)
        ctx = make_ctx(text, state, results)
        decision = planner.advance(ctx, result)
        assert planner.advance(ctx, result) == decision  # pure: a re-plan decides the same
        results[job.key] = result
        state = take(decision)
    assert decision.status == SessionStatus.COMPLETED and decision.schedule == ()
    return Run(decision, jobs, results, state, peak, peak_hitl)


# --- the shared strands-cli example ---------------------------------------------------


def test_fixture_layers_match_strands_cli() -> None:
    spec = load_spec_text(FIXTURE.read_text(), "f.yaml").spec
    tasks = spec.pattern.config.tasks  # type: ignore[union-attr]
    assert layers(tasks) == [["overview"], ["technical", "applications"], ["synthesis"]]


@pytest.mark.parametrize("order", ORDERS)
def test_fixture_completes_identically_in_any_order(order: str | int) -> None:
    text = FIXTURE.read_text()
    reference = drive(text, "fifo")
    run = drive(text, order)
    assert list(run.jobs) == ["task:overview", *sorted(
        ["task:technical", "task:applications"], key=list(run.jobs).index), "task:synthesis"]
    assert set(run.jobs) == {"task:overview", "task:technical", "task:applications",
                             "task:synthesis"}
    assert run.peak == 2  # technical and applications together, max_parallel 2
    assert run.final.final_response == reference.final.final_response
    assert run.final.artifact_context == reference.final.artifact_context
    assert planner.view(run.ctx(text)) == planner.view(reference.ctx(text))
    assert run.state == reference.state == {
        "completed_tasks": ["overview", "technical", "applications", "synthesis"],
        "in_flight": []}


def test_fixture_renders_task_context_and_artifact() -> None:
    text = FIXTURE.read_text()
    run = drive(text, "lifo")
    overview = run.results["task:overview"].response
    assert run.jobs["task:overview"].input == (
        "Provide a brief overview (2-3 sentences) of: edge computing")
    assert f"Overview: {overview}" in run.jobs["task:technical"].input
    assert run.jobs["task:technical"].system_prompt.startswith("You are a research assistant")
    synthesis = run.jobs["task:synthesis"].input
    assert run.results["task:technical"].response in synthesis
    assert run.results["task:applications"].response in synthesis
    # strands-cli: the final response is the last task of the last layer.
    assert run.final.final_response == run.results["task:synthesis"].response
    context = run.final.artifact_context
    assert context["last_response"] == run.final.final_response
    assert context["topic"] == "edge computing"
    assert list(context["tasks"]) == ["overview", "technical", "applications", "synthesis"]
    assert context["tasks"]["technical"] == {
        "response": run.results["task:technical"].response, "status": "success",
        "tokens_estimated": 7, "tokens": 7, "agent": "researcher"}
    ((path, body),) = render_artifacts(run.ctx(text).spec, context).items()
    assert path == "edge_computing-workflow.md"  # sanitized as strands-cli does
    assert body.startswith("# Edge Computing Research Report")
    assert body.count("Status: success") == 2
    assert run.results["task:synthesis"].response in body


def test_tasks_of_one_agent_get_their_own_lanes() -> None:
    run = drive(FIXTURE.read_text(), "fifo")
    assert {j.key: j.lane for j in run.jobs.values()} == {
        k: k for k in run.jobs}  # lane task:<id>
    assert all(j.meta["task"] == j.key.split(":", 1)[1] for j in run.jobs.values())
    assert len({j.conversation_lane for j in run.jobs.values()}) == 4


# --- scheduling -------------------------------------------------------------------------


def fan(width: int, max_parallel: int) -> str:
    tasks = "\n".join(f"      - {{id: t{i}, agent: a, input: 'do {i}'}}" for i in range(width))
    return f"""
version: 0
name: fan
runtime: {{provider: scripted, max_parallel: {max_parallel}}}
agents:
  a: {{prompt: "p"}}
pattern:
  type: workflow
  config:
    tasks:
{tasks}
      - id: join
        agent: a
        deps: [{", ".join(f"t{i}" for i in range(width))}]
        input: "{{{{ tasks | length }}}} {{{{ last_response }}}}"
"""


@pytest.mark.parametrize(("width", "max_parallel"), [(5, 2), (5, 1), (3, 5), (6, 3)])
@pytest.mark.parametrize("order", ["fifo", "lifo", 1, 2])
def test_ready_tasks_fan_out_up_to_max_parallel(width: int, max_parallel: int,
                                                order: str | int) -> None:
    text = fan(width, max_parallel)
    start = planner.start(make_ctx(text, {}, OrderedDict()))
    assert [j.key for j in start.schedule] == [f"task:t{i}"
                                              for i in range(min(width, max_parallel))]
    assert start.state == {"completed_tasks": [],
                           "in_flight": [f"t{i}" for i in range(min(width, max_parallel))]}
    run = drive(text, order)
    assert run.peak == min(width, max_parallel)
    assert len(run.jobs) == width + 1 and list(run.jobs)[-1] == "task:join"
    # join sees every ancestor; last_response is the last of them in execution order
    assert run.jobs["task:join"].input == f"{width} {run.results[f'task:t{width - 1}'].response}"


def test_in_flight_task_is_never_rescheduled() -> None:
    text = fan(3, 2)
    ctx0 = make_ctx(text, {}, OrderedDict())
    start = planner.start(ctx0)
    # t0 finishes: t2 takes its slot; t1 stays in flight and is not scheduled again
    done0 = StepResult(key="task:t0", agent="a", response="R0")
    d = planner.advance(make_ctx(text, start.state, OrderedDict()), done0)
    assert [j.key for j in d.schedule] == ["task:t2"]
    assert d.state == {"completed_tasks": ["t0"], "in_flight": ["t1", "t2"]}
    d2 = planner.advance(make_ctx(text, d.state, OrderedDict([("task:t0", done0)])),
                         StepResult(key="task:t2", agent="a", response="R2"))
    assert d2.schedule == () and d2.state == {"completed_tasks": ["t0", "t2"],
                                              "in_flight": ["t1"]}


DAGS = """
version: 0
name: dag
runtime: {{provider: scripted}}
agents:
  a: {{prompt: "p"}}
pattern:
  type: workflow
  config:
    tasks: {tasks}
"""


@pytest.mark.parametrize(("tasks", "last"), [
    # layers [[a, c], [b]] -> b, though c is last in the spec
    ("[{id: a, agent: a}, {id: b, agent: a, deps: [a]}, {id: c, agent: a}]", "b"),
    # layers [[a], [b, c]] -> c
    ("[{id: a, agent: a}, {id: b, agent: a, deps: [a]}, {id: c, agent: a, deps: [a]}]", "c"),
    # layers [[x, y]] -> y
    ("[{id: x, agent: a}, {id: y, agent: a}]", "y"),
    ("[{id: only, agent: a}]", "only"),
])
@pytest.mark.parametrize("order", ["fifo", "lifo", 3])
def test_final_response_is_last_task_of_last_layer(tasks: str, last: str,
                                                   order: str | int) -> None:
    run = drive(DAGS.format(tasks=tasks), order)
    assert run.final.final_response == run.results[task_key(last)].response


CONTEXT_SPEC = """
version: 0
name: ctx
runtime: {provider: scripted}
agents:
  a: {prompt: "Agent for {{ topic }}"}
pattern:
  type: workflow
  config:
    tasks:
      - id: first
        agent: a
        input: "start {{ topic }} [{{ last_response }}]"
      - id: side
        agent: a
        input: "side"
      - id: second
        agent: a
        deps: [first]
        input: >-
          {{ tasks.first.response }}/{{ tasks.first.status }}/{{ tasks.first.agent }}/
          {{ last_response }}/{{ tasks | list }}/{{ topic }}
inputs:
  values: {topic: tides}
"""


@pytest.mark.parametrize("order", ORDERS)
def test_task_context_names(order: str | int) -> None:
    run = drive(CONTEXT_SPEC, order)
    assert run.jobs["task:first"].input == "start tides []"
    assert run.jobs["task:first"].system_prompt == "Agent for {{ topic }}"  # as written
    first = run.results["task:first"].response
    side = run.results["task:side"].response
    # `tasks | list` reads every task: like strands-cli, `second` sees all of the
    # earlier layer (`side` too, which it does not list in deps), whatever the timing;
    # last_response is the last of them in execution order.
    assert run.jobs["task:second"].input == (
        f"{first}/success/a/ {side}/['first', 'side']/tides")


def test_reading_an_unlisted_earlier_task_makes_it_an_implicit_dep() -> None:
    text = CONTEXT_SPEC.replace("{{ tasks | list }}", "{{ tasks.side.response }}")
    first = StepResult(key="task:first", agent="a", response="F")
    side = StepResult(key="task:side", agent="a", response="S")
    # `first` done, `side` still running: `second` waits for it (strands-cli would run
    # it in the next layer, after both).
    ctx = make_ctx(text, {"completed_tasks": [], "in_flight": ["first", "side"]},
                   OrderedDict())
    d = planner.advance(ctx, first)
    assert d.schedule == () and d.state["in_flight"] == ["side"]
    view = planner.view(make_ctx(text, d.state, OrderedDict([("task:first", first)])))
    assert view["blocked_tasks"] == ["second"] and view["pending_tasks"] == ["side"]
    # Only the declared deps are reported as dependencies.
    d = planner.advance(make_ctx(text, d.state, OrderedDict([("task:first", first)])), side)
    (job,) = d.schedule
    assert job.key == "task:second" and job.input == "F/success/a/ S/S/tides"
    for order in ORDERS:
        run = drive(text, order)
        side_response = run.results["task:side"].response
        assert run.jobs["task:second"].input.endswith(f"/{side_response}/tides")


def test_reading_a_task_of_the_same_layer_fails_naming_the_field() -> None:
    # strands-cli shows a task only the EARLIER layers: `side` is in first's layer.
    text = CONTEXT_SPEC.replace("start {{ topic }} [{{ last_response }}]",
                                "start {{ tasks.side.response }}")
    with pytest.raises(TemplateError, match=r"pattern.config.tasks\[0\].input"):
        planner.start(make_ctx(text, {}, OrderedDict()))


@pytest.mark.parametrize(("template", "refs"), [
    ("{{ tasks.a.response }} {{ tasks['b'].status }}", {"a", "b"}),
    ('{{ tasks["c"] }}', {"c"}),
    ("no tasks here {{ topic }}", set()),
    ("{% if tasks.a %}{{ tasks.a.response }}{% endif %}", {"a"}),
    ("{{ tasks | list }}", None),
    ("{% for id, t in tasks.items() %}{{ t.response }}{% endfor %}", None),
    ("{% for t in tasks %}{{ t }}{% endfor %}", None),
    ("{{ tasks[topic].response }}", None),
    ("{{ tasks.a.response }} {{ tasks | length }}", None),
])
def test_task_refs(template: str, refs: set[str] | None) -> None:
    assert task_refs(template) == (None if refs is None else frozenset(refs))


def test_agent_prompts_stay_as_written() -> None:
    text = CONTEXT_SPEC.replace('a: {prompt: "Agent for {{ topic }}"}',
                                'a: {prompt: "Agent for {{ topic }}"}\n'
                                '  b: {prompt: "Knows {{ tasks.side.response }}"}')
    text = text.replace("      - id: second\n        agent: a",
                        "      - id: second\n        agent: b")
    text = text.replace("{{ tasks | list }}", "x")
    for order in ORDERS:
        run = drive(text, order)
        assert run.jobs["task:second"].system_prompt == "Knows {{ tasks.side.response }}"


def test_execution_order_follows_layers_then_spec_order() -> None:
    text = DAGS.format(tasks="[{id: d, agent: a, deps: [b]}, {id: b, agent: a},"
                             " {id: c, agent: a, deps: [d]}, {id: e, agent: a}]")
    tasks = make_ctx(text, {}, OrderedDict()).spec.pattern.config.tasks  # type: ignore[union-attr]
    assert execution_order(tasks) == ["b", "e", "d", "c"]


# --- view -------------------------------------------------------------------------------


def test_view_has_seed_shape_mid_run() -> None:
    text = FIXTURE.read_text()
    overview = StepResult(key="task:overview", agent="researcher", response="O",
                          input_tokens=10, output_tokens=5)
    technical = StepResult(key="task:technical", agent="researcher", response="T",
                           input_tokens=1, output_tokens=1)
    ctx = make_ctx(text, {"completed_tasks": ["overview", "technical"],
                          "in_flight": ["applications"]},
                   OrderedDict([("task:overview", overview), ("task:technical", technical)]))
    assert planner.view(ctx) == {
        "completed_tasks": ["overview", "technical"],
        "pending_tasks": ["applications"],
        "blocked_tasks": ["synthesis"],
        "task_outputs": {
            "overview": {"response": "O", "tokens": 15, "agent": "researcher",
                         "dependencies": []},
            "technical": {"response": "T", "tokens": 2, "agent": "researcher",
                          "dependencies": ["overview"]},
        },
    }


def test_view_before_start() -> None:
    view = planner.view(make_ctx(FIXTURE.read_text(), {}, OrderedDict()))
    assert view == {"completed_tasks": [], "pending_tasks": ["overview"],
                    "blocked_tasks": ["technical", "applications", "synthesis"],
                    "task_outputs": {}}


# --- human in the loop ----------------------------------------------------------------


HITL_SPEC = """
version: 0
name: review
runtime: {provider: scripted, max_parallel: 3}
agents:
  a: {prompt: "p"}
pattern:
  type: workflow
  config:
    tasks:
      - {id: draft, agent: a, input: "draft {{ topic }}"}
      - type: hitl
        id: approve
        deps: [draft]
        prompt: "Approve {{ tasks.draft.response }}?"
        context_display: "{{ tasks.draft.agent }}"
        default: "yes"
        timeout_seconds: 60
      - type: hitl
        id: legal
        deps: [draft]
        prompt: "Legal ok?"
      - id: publish
        agent: a
        deps: [approve, legal]
        input: >-
          {{ hitl_response }}|{{ tasks.approve.response }}|{{ tasks.approve.status }}|
          {{ tasks.legal.agent }}
inputs:
  values: {topic: tides}
"""


def answer(job: StepJob) -> str:
    return f"human says ok to {job.key}"


@pytest.mark.parametrize("order", ["fifo", "lifo", 5])
def test_hitl_tasks_pause_one_at_a_time(order: str | int) -> None:
    run = drive(HITL_SPEC, order, answer)
    approve, legal = run.jobs["task:approve"], run.jobs["task:legal"]
    assert (approve.kind, approve.agent, legal.kind) == ("hitl", "hitl", "hitl")
    draft = run.results["task:draft"].response
    assert approve.input == approve.meta["prompt"] == f"Approve {draft}?"
    assert approve.meta["context_display"] == "a"
    assert (approve.meta["default"], approve.meta["timeout_seconds"]) == ("yes", 60)
    assert approve.meta["task"] == "approve"
    assert run.peak_hitl == 1  # the two HITL tasks were ready together, asked in turn
    assert run.jobs["task:publish"].input == (
        "human says ok to task:legal|human says ok to task:approve|success| hitl")
    tasks = run.final.artifact_context["tasks"]
    assert tasks["approve"] == {"type": "hitl", "prompt": "Approve {{ tasks.draft.response }}?",
                                "response": "human says ok to task:approve",
                                "status": "success", "tokens_estimated": 0, "tokens": 0,
                                "agent": "hitl"}


def test_hitl_task_is_scheduled_when_its_deps_are_done() -> None:
    draft = StepResult(key="task:draft", agent="a", response="D")
    start = planner.start(make_ctx(HITL_SPEC, {}, OrderedDict()))
    d = planner.advance(make_ctx(HITL_SPEC, start.state, OrderedDict()), draft)
    assert d.status == SessionStatus.RUNNING
    (job,) = d.schedule
    assert (job.key, job.kind) == ("task:approve", "hitl")
    assert d.state == {"completed_tasks": ["draft"], "in_flight": ["approve"]}
    view = planner.view(make_ctx(HITL_SPEC, d.state, OrderedDict([("task:draft", draft)])))
    assert view["pending_tasks"] == ["approve", "legal"]
