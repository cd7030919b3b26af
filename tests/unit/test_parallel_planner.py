"""The parallel planner is pure: branches + pattern_state + results -> decision (no Redis).

A driver plays a worker pool completing the scheduled steps in different orders (FIFO,
LIFO, seeded random), feeding each result to advance() as the worker does (the state
round-trips through JSON as through Redis), and checks after every step that no key is
scheduled twice and that at most max_parallel branches are under way.
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

from strands_durable.models import SessionStatus, StepJob, StepResult
from strands_durable.patterns.base import Decision, PlanContext
from strands_durable.patterns.parallel import ParallelPlanner, branch_key, parse_key
from strands_durable.planning.artifacts import render_artifacts
from strands_durable.spec.loader import LoadedSpec, load_spec_text

FIXTURE = Path(__file__).parents[1] / "fixtures" / "strands-cli" / "parallel-with-reduce.yaml"
ORDERS: list[str | int] = ["fifo", "lifo", *range(8)]
planner = ParallelPlanner()


def echo(job: StepJob) -> str:
    return f"<{job.key}|{job.input.strip()}>"


@dataclass
class Run:
    final: Decision
    jobs: dict[str, StepJob]  # every job scheduled, by key, in scheduling order
    results: OrderedDict[str, StepResult]
    state: dict[str, Any]
    peak: int  # most branches under way at once
    peak_hitl: int

    def ctx(self, text: str) -> PlanContext:
        return make_ctx(text, self.state, self.results)


@lru_cache(maxsize=64)
def load(text: str) -> LoadedSpec:
    return load_spec_text(text, "parallel.yaml")


def make_ctx(text: str, state: dict[str, Any], results: OrderedDict[str, StepResult]
             ) -> PlanContext:
    loaded = load(text)
    return PlanContext(spec=loaded.spec, variables=loaded.variables, state=state,
                       results=OrderedDict(results), session_id="s1")


def under_way(text: str, results: OrderedDict[str, StepResult], pending: list[StepJob]
              ) -> set[str]:
    """Branches started and not finished (holding a max_parallel slot)."""
    config = load(text).spec.pattern.config
    lengths = {b.id: len(b.steps) for b in config.branches}  # type: ignore[union-attr]
    keys = [*results, *(j.key for j in pending)]
    started = {p[0] for p in map(parse_key, keys) if p}
    finished = {b for b, n in lengths.items() if branch_key(b, n - 1) in results}
    return started - finished


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
        branches = len(under_way(text, results, pending))
        hitls = sum(1 for j in pending if j.kind == "hitl")
        assert branches <= max_parallel and hitls <= 1
        assert sum(1 for j in pending if j.kind == "agent") <= max_parallel
        peak, peak_hitl = max(peak, branches), max(peak_hitl, hitls)
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


@pytest.mark.parametrize(("key", "parsed"), [
    ("branch:web:0", ("web", 0)),
    ("branch:a:b:12", ("a:b", 12)),
    ("branch::3", None),
    ("branch:x:", None),
    ("reduce", None),
    ("task:x", None),
])
def test_parse_key(key: str, parsed: tuple[str, int] | None) -> None:
    assert parse_key(key) == parsed
    if parsed is not None:
        assert branch_key(*parsed) == key


# --- the shared strands-cli example ---------------------------------------------------

BRANCHES = ["academic_perspective", "industry_perspective", "regulatory_perspective"]


def test_fixture_start_schedules_every_first_step() -> None:
    d = planner.start(make_ctx(FIXTURE.read_text(), {}, OrderedDict()))
    assert [(j.key, j.agent, j.lane) for j in d.schedule] == [
        (f"branch:{b}:0", "researcher", f"branch:{b}") for b in BRANCHES]
    assert d.schedule[0].input == (
        "Research blockchain technology in financial services from an "
        "academic/scientific perspective")
    assert d.state == {"in_flight": [f"branch:{b}:0" for b in BRANCHES],
                       "completed_branches": [],
                       "reduce_completed": False}


@pytest.mark.parametrize("order", ORDERS)
def test_fixture_completes_identically_in_any_order(order: str | int) -> None:
    text = FIXTURE.read_text()
    reference = drive(text, "fifo")
    run = drive(text, order)
    assert set(run.jobs) == {*(f"branch:{b}:0" for b in BRANCHES), "reduce"}
    assert list(run.jobs)[-1] == "reduce"  # only once every branch is done
    assert run.peak == 3
    assert run.final.final_response == reference.final.final_response
    assert run.final.artifact_context == reference.final.artifact_context
    assert planner.view(run.ctx(text)) == planner.view(reference.ctx(text))
    assert run.state == reference.state == {
        "in_flight": [], "completed_branches": BRANCHES,
        "reduce_completed": True}


def test_fixture_reduce_sees_branches_and_artifact_gets_its_response() -> None:
    text = FIXTURE.read_text()
    run = drive(text, "lifo")
    reduce = run.jobs["reduce"]
    assert (reduce.agent, reduce.lane) == ("synthesizer", "")
    assert reduce.system_prompt.startswith("You are a synthesis expert.")
    academic = run.results["branch:academic_perspective:0"].response
    assert f"Academic: {academic}" in reduce.input
    assert run.results["branch:regulatory_perspective:0"].response in reduce.input
    assert run.final.final_response == run.results["reduce"].response
    context = run.final.artifact_context
    assert context["last_response"] == run.results["reduce"].response
    assert context["topic"] == "blockchain technology in financial services"
    assert list(context["branches"]) == BRANCHES  # spec order
    assert context["branches"]["academic_perspective"] == {
        "response": academic, "status": "success", "tokens_estimated": 7,
        "step_history": [{"index": 0, "agent": "researcher", "response": academic,
                          "tokens_estimated": 7, "tokens": 7}]}
    assert render_artifacts(run.ctx(text).spec, context) == {
        "parallel-synthesis.md": run.results["reduce"].response}


# --- branches of several steps, fewer slots than branches -------------------------------


def multi(branches: int, steps: int, max_parallel: int, reduce: bool = True) -> str:
    body = "\n".join(
        f"      - id: b{b}\n        steps:\n" + "\n".join(
            f"          - agent: {'a' if s % 2 == 0 else 'c'}\n"
            f"            input: \"b{b}s{s} {{{{ topic }}}} "
            f"[{{{{ last_response }}}}] {{{{ steps | length }}}} {{{{ depth }}}}\"\n"
            f"            vars: {{depth: d{s}}}"
            for s in range(steps))
        for b in range(branches))
    reduce_text = ("    reduce:\n      agent: a\n      input: \"{{ branches | list }} "
                   "{{ branches.b0.response }} {{ branches.b0.step_history | length }}\"\n"
                   if reduce else "")
    return f"""
version: 0
name: multi
runtime: {{provider: scripted, max_parallel: {max_parallel}}}
agents:
  a: {{prompt: "p {{{{ topic }}}}"}}
  c: {{prompt: "q"}}
pattern:
  type: parallel
  config:
    branches:
{body}
{reduce_text}inputs:
  values: {{topic: tides}}
"""


@pytest.mark.parametrize(("branches", "steps", "max_parallel"),
                         [(4, 3, 2), (4, 2, 1), (3, 3, 5), (5, 1, 3), (2, 4, 2)])
@pytest.mark.parametrize("order", ["fifo", "lifo", 0, 1, 2])
def test_branches_run_steps_in_sequence_within_max_parallel(
        branches: int, steps: int, max_parallel: int, order: str | int) -> None:
    text = multi(branches, steps, max_parallel)
    start = planner.start(make_ctx(text, {}, OrderedDict()))
    assert [j.key for j in start.schedule] == [
        f"branch:b{b}:0" for b in range(min(branches, max_parallel))]
    run = drive(text, order)
    reference = drive(text, "fifo")
    assert run.peak == min(branches, max_parallel)
    assert len(run.jobs) == branches * steps + 1
    assert run.final.artifact_context == reference.final.artifact_context
    for b in range(branches):
        keys = [k for k in run.jobs if k.startswith(f"branch:b{b}:")]
        assert keys == [f"branch:b{b}:{s}" for s in range(steps)]
        for s in range(steps):
            job = run.jobs[f"branch:b{b}:{s}"]
            previous = run.results[f"branch:b{b}:{s - 1}"].response if s else ""
            assert job.input == f"b{b}s{s} tides [{previous}] {s} d{s}"
            assert job.lane == f"branch:b{b}" and job.meta == {"branch": f"b{b}", "index": s}
            assert job.agent == ("a" if s % 2 == 0 else "c")
    last_b0 = run.results[f"branch:b0:{steps - 1}"].response
    assert run.jobs["reduce"].input == (
        f"{[f'b{b}' for b in range(branches)]} {last_b0} {steps}")


@pytest.mark.parametrize("order", ["fifo", "lifo", 4])
def test_without_reduce_the_final_response_aggregates_branches_by_id(order: str | int
                                                                     ) -> None:
    text = multi(3, 2, 2, reduce=False).replace("id: b0", "id: zeta")
    run = drive(text, order)
    assert "reduce" not in run.jobs
    expected = "\n\n---\n\n".join(
        f"Branch {bid}:\n{run.results[f'branch:{bid}:1'].response}"
        for bid in ["b1", "b2", "zeta"])
    assert run.final.final_response == expected
    assert run.final.artifact_context["last_response"] == expected
    assert list(run.final.artifact_context["branches"]) == ["zeta", "b1", "b2"]
    assert run.state["reduce_completed"] is False


def test_a_finishing_branch_frees_its_slot_for_the_next() -> None:
    text = multi(3, 2, 2)
    start = planner.start(make_ctx(text, {}, OrderedDict()))
    r0 = StepResult(key="branch:b0:0", agent="a", response="X")
    d = planner.advance(make_ctx(text, start.state, OrderedDict()), r0)
    assert [j.key for j in d.schedule] == ["branch:b0:1"]  # b2 still waits: b0 holds its slot
    done = OrderedDict([("branch:b0:0", r0)])
    d2 = planner.advance(make_ctx(text, d.state, done),
                         StepResult(key="branch:b0:1", agent="c", response="Y"))
    assert [j.key for j in d2.schedule] == ["branch:b2:0"]
    assert d2.state == {"in_flight": ["branch:b1:0", "branch:b2:0"],
                        "completed_branches": ["b0"],
                        "reduce_completed": False}


# --- view -------------------------------------------------------------------------------


def test_view_has_seed_shape() -> None:
    text = multi(3, 2, 3)
    results = OrderedDict((r.key, r) for r in [
        StepResult(key="branch:b0:0", agent="a", response="A0", input_tokens=1,
                   output_tokens=1),
        StepResult(key="branch:b0:1", agent="c", response="A1", input_tokens=2),
        StepResult(key="branch:b2:0", agent="a", response="C0"),
    ])
    from dataclasses import replace
    # b1's first step failed past its retries (the worker's failed-steps hash).
    view = planner.view(replace(make_ctx(text, {}, results),
                                failed_steps=frozenset({"branch:b1:0"})))
    assert view == {
        "completed_branches": ["b0"],
        "failed_branches": ["b1"],
        "branch_outputs": {
            "b0": {"response": "A1", "tokens": 4, "steps": [
                {"index": 0, "agent": "a", "response": "A0", "tokens_estimated": 2,
                 "tokens": 2},
                {"index": 1, "agent": "c", "response": "A1", "tokens_estimated": 2,
                 "tokens": 2}]},
            "b2": {"response": "C0", "tokens": 0, "steps": [
                {"index": 0, "agent": "a", "response": "C0", "tokens_estimated": 0,
                 "tokens": 0}]},
        },
        "reduce_completed": False,
        "reduce_output": None,
    }
    assert planner.view(make_ctx(text, {}, OrderedDict()))["failed_branches"] == []


# --- human in the loop ----------------------------------------------------------------

HITL_SPEC = """
version: 0
name: review
runtime: {provider: scripted, max_parallel: 3}
agents:
  a: {prompt: "p"}
pattern:
  type: parallel
  config:
    branches:
      - id: web
        steps:
          - {agent: a, input: "search {{ topic }}"}
          - type: hitl
            prompt: "Keep {{ last_response }}?"
            context_display: "{{ steps[0].response }}"
          - {agent: a, input: "{{ hitl_response }} / {{ steps[1].response }}"}
      - id: docs
        steps:
          - type: hitl
            prompt: "Which docs?"
          - {agent: a, input: "read {{ hitl_response }}"}
      - id: plain
        steps:
          - {agent: a, input: "plain {{ last_response }}"}
    reduce:
      type: hitl
      prompt: "Merge {{ branches.web.response }} and {{ branches.docs.response }}?"
inputs:
  values: {topic: tides}
"""


def human(job: StepJob) -> str:
    return f"human:{job.key}"


@pytest.mark.parametrize("order", ["fifo", "lifo", 0, 1, 2, 3])
def test_hitl_steps_pause_one_at_a_time_and_feed_the_branch(order: str | int) -> None:
    run = drive(HITL_SPEC, order, human)
    keep, docs = run.jobs["branch:web:1"], run.jobs["branch:docs:0"]
    assert (keep.kind, keep.agent, docs.kind) == ("hitl", "hitl", "hitl")
    assert keep.input == f"Keep {run.results['branch:web:0'].response}?"
    assert keep.meta["context_display"] == run.results["branch:web:0"].response
    assert keep.meta["branch"] == "web" and keep.meta["index"] == 1
    assert run.peak_hitl == 1
    assert run.jobs["branch:web:2"].input == "human:branch:web:1 / human:branch:web:1"
    assert run.jobs["branch:docs:1"].input == "read human:branch:docs:0"
    assert run.jobs["branch:plain:0"].input == "plain "  # first step: last_response ""
    reduce = run.jobs["reduce"]
    assert reduce.kind == "hitl" and list(run.jobs)[-1] == "reduce"
    web = run.results["branch:web:2"].response
    assert reduce.input == f"Merge {web} and {run.results['branch:docs:1'].response}?"
    # strands-cli: a HITL reduce's answer is the final response
    assert run.final.final_response == "human:reduce"
    history = run.final.artifact_context["branches"]["web"]["step_history"]
    assert history[1] == {"index": 1, "type": "hitl", "prompt": "Keep {{ last_response }}?",
                          "agent": "hitl", "response": "human:branch:web:1",
                          "tokens_estimated": 0, "tokens": 0}


def test_second_hitl_waits_for_the_first() -> None:
    start = planner.start(make_ctx(HITL_SPEC, {}, OrderedDict()))
    # docs starts with a HITL step; web's HITL comes later and must wait for it
    assert [(j.key, j.kind) for j in start.schedule] == [
        ("branch:web:0", "agent"), ("branch:docs:0", "hitl"), ("branch:plain:0", "agent")]
    web0 = StepResult(key="branch:web:0", agent="a", response="W")
    d = planner.advance(make_ctx(HITL_SPEC, start.state, OrderedDict()), web0)
    assert d.schedule == ()
    assert d.state["in_flight"] == ["branch:docs:0", "branch:plain:0"]
    d2 = planner.advance(make_ctx(HITL_SPEC, d.state, OrderedDict([("branch:web:0", web0)])),
                         StepResult(key="branch:docs:0", agent="hitl", response="api"))
    assert [(j.key, j.kind) for j in d2.schedule] == [
        ("branch:web:1", "hitl"), ("branch:docs:1", "agent")]
