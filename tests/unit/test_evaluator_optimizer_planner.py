"""The evaluator_optimizer planner, driven by a fake worker pool with scripted replies."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from strands_durable.models import SessionStatus, StepJob, StepResult
from strands_durable.patterns.base import Decision, PlanContext
from strands_durable.patterns.evaluator_optimizer import (
    DEFAULT_EVALUATOR_INPUT,
    EvaluatorOptimizerPlanner,
    parse_evaluation,
)
from strands_durable.planning.artifacts import render_artifacts
from strands_durable.spec.loader import load_spec_text

FIXTURE = (Path(__file__).parents[1] / "fixtures" / "strands-cli"
           / "evaluator-optimizer-writing-openai.yaml")

SPEC = """
version: 0
name: essay
runtime: {provider: scripted}
agents:
  writer: {prompt: "Write about {{ topic }}."}
  critic: {prompt: "You grade."}
pattern:
  type: evaluator_optimizer
  config:
    producer: writer
    evaluator:
      agent: critic
      input: "Grade for {{ topic }}: {{ draft }}"
    accept: {min_score: 80, max_iters: 3}
    revise_prompt: "Fix #{{ iteration }} ({{ evaluation.score }}): {{ evaluation.issues | join(',') }} / {{ evaluation.fixes | join(',') }} in {{ draft }}"
inputs:
  values: {topic: tides}
outputs:
  artifacts:
    - path: out.md
      from: "{{ last_response }} {{ final_score }} {{ iterations }}"
"""  # noqa: E501

GATE = """
    review_gate:
      type: hitl
      prompt: "Draft {{ iteration_index }} scored {{ current_evaluation.score }}"
      context_display: "{{ current_draft }} / {{ iterations | length }}"
"""

Reply = Callable[[StepJob], str]


@dataclass
class Run:
    decision: Decision
    jobs: list[StepJob]
    results: Mapping[str, StepResult]
    view: dict[str, Any]

    @property
    def keys(self) -> list[str]:
        return [j.key for j in self.jobs]

    def job(self, key: str) -> StepJob:
        return next(j for j in self.jobs if j.key == key)


def drive(spec_text: str, reply: Reply) -> Run:
    loaded = load_spec_text(spec_text, "eo.yaml")
    planner = EvaluatorOptimizerPlanner()
    results: OrderedDict[str, StepResult] = OrderedDict()
    state: dict[str, Any] = {}

    def ctx() -> PlanContext:
        return PlanContext(spec=loaded.spec, variables=loaded.variables, state=state,
                           results=results, session_id="s1")

    decision = planner.start(ctx())
    jobs, pending = list(decision.schedule), list(decision.schedule)
    state = decision.state
    while decision.status == SessionStatus.RUNNING:
        assert len(pending) == 1, f"one step at a time, got {pending}"
        job = pending.pop()
        agent = "hitl" if job.kind == "hitl" else job.agent
        result = StepResult(key=job.key, agent=agent, response=reply(job),
                            input_tokens=1, output_tokens=1)
        before = ctx()
        decision = planner.advance(before, result)
        assert planner.advance(before, result) == decision
        json.loads(json.dumps(decision.state))
        results[result.key] = result
        state = decision.state
        jobs += decision.schedule
        pending += decision.schedule
    keys = [j.key for j in jobs]
    assert len(keys) == len(set(keys)), keys
    return Run(decision, jobs, results, planner.view(ctx()))


def evaluation(score: int, issue: str = "thin", fix: str = "expand") -> str:
    return json.dumps({"score": score, "issues": [issue], "fixes": [fix]})


def scores(*values: int | str) -> Reply:
    """Drafts are 'D<n>'; evaluations come from `values` in order (str = raw reply)."""
    queue = list(values)

    def reply(job: StepJob) -> str:
        if job.key.startswith("produce:"):
            return f"D{job.key.split(':')[1]}"
        if job.key.startswith("evaluate:"):
            value = queue.pop(0)
            return value if isinstance(value, str) else evaluation(value)
        raise AssertionError(job.key)
    return reply


def test_accepts_on_first_evaluation() -> None:
    run = drive(SPEC, scores(85))
    assert run.keys == ["produce:1", "evaluate:1"]
    first = run.job("produce:1")
    assert first.input == "Write about tides." and first.system_prompt == "Write about {{ topic }}."
    assert run.job("evaluate:1").input == "Grade for tides: D1"
    d = run.decision
    assert d.status == SessionStatus.COMPLETED and d.final_response == "D1"
    assert d.artifact_context["last_response"] == "D1"
    assert d.artifact_context["final_score"] == 85 and d.artifact_context["iterations"] == 1
    assert d.artifact_context["last_evaluation"] == {"score": 85, "issues": ["thin"],
                                                     "fixes": ["expand"]}
    assert run.view == {
        "current_iteration": 1, "phase": "done", "accepted": True,
        "quality_gate_passed": True, "max_iterations_reached": False, "final_score": 85,
        "early_termination": False,
        "iterations": [{"iteration": 1, "score": 85, "feedback": "thin", "issues": ["thin"],
                        "fixes": ["expand"], "output": "D1"}],
    }


def test_revises_until_min_score_with_revision_context() -> None:
    run = drive(SPEC, scores(40, 70, 90))
    assert run.keys == ["produce:1", "evaluate:1", "produce:2", "evaluate:2", "produce:3",
                        "evaluate:3"]
    # {{ iteration }}: draft n's revision is iteration n + 1, as strands-cli's loop passes it.
    assert run.job("produce:2").input == "Fix #2 (40): thin / expand in D1"
    assert run.job("produce:3").input == "Fix #3 (70): thin / expand in D2"
    # One conversation per agent across iterations (their own lanes).
    assert {j.lane for j in run.jobs} == {""}
    assert {j.agent for j in run.jobs if j.key.startswith("produce")} == {"writer"}
    d = run.decision
    assert d.status == SessionStatus.COMPLETED and d.final_response == "D3"
    assert [i["score"] for i in run.view["iterations"]] == [40, 70, 90]
    assert [i["output"] for i in run.view["iterations"]] == ["D1", "D2", "D3"]
    assert run.view["current_iteration"] == 3 and run.view["accepted"]
    assert [h["iteration"] for h in d.artifact_context["history"]] == [1, 2, 3]
    assert d.artifact_context["cumulative_tokens"] == 12
    loaded = load_spec_text(SPEC, "eo.yaml")
    assert render_artifacts(loaded.spec, d.artifact_context) == {"out.md": "D3 90 3"}


@pytest.mark.parametrize("max_iters", [1, 2, 3])
def test_max_iters_without_min_score_fails_like_strands_cli(max_iters: int) -> None:
    spec = SPEC.replace("max_iters: 3", f"max_iters: {max_iters}")
    run = drive(spec, scores(*[50 + i for i in range(max_iters)]))
    assert run.keys[-1] == f"evaluate:{max_iters}"
    assert sum(k.startswith("evaluate") for k in run.keys) == max_iters
    assert sum(k.startswith("produce") for k in run.keys) == max_iters
    d = run.decision
    assert d.status == SessionStatus.FAILED
    assert f"Max iterations ({max_iters}) exhausted without reaching min_score (80)" in d.reason
    assert f"step 'evaluate:{max_iters}'" in d.reason
    assert run.view["accepted"] is False and run.view["max_iterations_reached"] is True
    assert [i["output"] for i in run.view["iterations"]] == [
        f"D{n}" for n in range(1, max_iters + 1)]


def test_malformed_evaluation_is_retried_once_with_clarification() -> None:
    run = drive(SPEC, scores("Looks great, 9/10!", evaluation(95)))
    assert run.keys == ["produce:1", "evaluate:1", "evaluate:1:retry"]
    retry = run.job("evaluate:1:retry")
    assert retry.input.startswith("Your previous response was not valid JSON.")
    assert retry.input.endswith("Evaluate this draft:\n\nD1")
    assert retry.agent == "critic" and retry.lane == ""
    assert run.decision.status == SessionStatus.COMPLETED
    assert run.view["iterations"][0]["score"] == 95


@pytest.mark.parametrize("second", ["still prose", '{"score": 101}', '{"issues": []}'])
def test_two_malformed_evaluations_fail_naming_step_and_reply(second: str) -> None:
    run = drive(SPEC, scores(40, "nope", second))
    assert run.keys == ["produce:1", "evaluate:1", "produce:2", "evaluate:2",
                        "evaluate:2:retry"]
    d = run.decision
    assert d.status == SessionStatus.FAILED
    assert "step 'evaluate:2:retry'" in d.reason and "after 2 attempts on iteration 2" in d.reason
    assert second in d.reason
    assert [i["score"] for i in run.view["iterations"]] == [40]


@pytest.mark.parametrize(("reply", "score", "issues"), [
    ('```json\n{"score": 88, "issues": ["a"], "fixes": []}\n```', 88, ["a"]),
    ('My verdict: {"score": "81", "issues": null} - thanks', 81, []),
    ('{"score": 82.0}', 82, []),
    ('{"score": 0, "issues": ["x", 3], "fixes": ["y"]}', 0, ["x", "3"]),
])
def test_parse_evaluation_is_tolerant(reply: str, score: int, issues: list[str]) -> None:
    parsed = parse_evaluation(reply)
    assert (parsed.score, parsed.issues) == (score, issues)


@pytest.mark.parametrize("reply", ['{"score": -1}', '{"score": 82.5}', '{"score": true}',
                                   '{"score": 50, "issues": "one"}', "[80]", "eighty"])
def test_parse_evaluation_rejects(reply: str) -> None:
    with pytest.raises(ValueError):
        parse_evaluation(reply)


def test_default_evaluator_input_and_revise_prompt() -> None:
    lines = SPEC.splitlines(keepends=True)
    spec = "".join(line for line in lines
                   if "Grade for" not in line and "revise_prompt" not in line)
    assert "revise_prompt" not in spec and "Grade for" not in spec
    run = drive(spec, scores(10, 99))
    assert run.job("evaluate:1").input == DEFAULT_EVALUATOR_INPUT + "D1"
    revision = run.job("produce:2").input
    assert revision == ("Revise the following draft based on evaluator feedback.\n\n"
                        "Draft:\nD1\n\nEvaluation (Score: 10/100):\nIssues:\n- thin\n"
                        "Suggested fixes:\n- expand\n\nPlease provide an improved version.")


def test_draft_with_template_syntax_is_passed_literally() -> None:
    spec = SPEC.replace('      input: "Grade for {{ topic }}: {{ draft }}"\n', "")
    run = drive(spec, lambda job: "{{ boom }}" if job.key == "produce:1" else evaluation(90))
    assert run.job("evaluate:1").input.endswith("{{ boom }}")


@pytest.mark.parametrize(("answer", "keys", "early"), [
    ("continue", ["produce:1", "evaluate:1", "review:1", "produce:2", "evaluate:2"], False),
    ("  STOP ", ["produce:1", "evaluate:1", "review:1"], True),
    ("abort", ["produce:1", "evaluate:1", "review:1"], True),
])
def test_review_gate(answer: str, keys: list[str], early: bool) -> None:
    spec = SPEC.replace("    accept:", GATE.lstrip("\n") + "    accept:")
    base = scores(30, 90)

    def reply(job: StepJob) -> str:
        return answer if job.key.startswith("review:") else base(job)

    run = drive(spec, reply)
    assert run.keys == keys
    gate = run.job("review:1")
    assert gate.kind == "hitl" and gate.input == "Draft 0 scored 30"
    assert gate.meta["context_display"] == "D1 / 1"
    d = run.decision
    assert d.status == SessionStatus.COMPLETED
    assert d.final_response == ("D1" if early else "D2")
    assert run.view["early_termination"] is early
    if early:
        assert d.artifact_context["early_termination"] is True
        assert not run.view["accepted"]


def test_no_review_gate_after_acceptance_or_on_last_iteration() -> None:
    spec = SPEC.replace("    accept:", GATE.lstrip("\n") + "    accept:").replace(
        "max_iters: 3", "max_iters: 2")
    base = scores(10, 20)
    run = drive(spec, lambda job: "go" if job.kind == "hitl" else base(job))
    assert run.keys == ["produce:1", "evaluate:1", "review:1", "produce:2", "evaluate:2"]
    assert run.decision.status == SessionStatus.FAILED


def test_strands_cli_fixture_plans_to_completion() -> None:
    text = FIXTURE.read_text()
    run = drive(text, scores(
        "```json\n" + evaluation(62, "vague intro", "add an example") + "\n```",
        "Here is my assessment: " + evaluation(78, "long", "trim"),
        evaluation(91, "minor typos", "proofread"),
    ))
    assert run.keys == ["produce:1", "evaluate:1", "produce:2", "evaluate:2", "produce:3",
                        "evaluate:3"]
    assert run.job("produce:1").agent == "writer" and run.job("evaluate:1").agent == "critic"
    assert "=== DRAFT ===\nD1\n=== END DRAFT ===" in run.job("evaluate:1").input
    revision = run.job("produce:2").input
    assert "Your previous draft scored 62/100." in revision
    assert "- vague intro" in revision and "- add an example" in revision
    d = run.decision
    assert d.status == SessionStatus.COMPLETED and d.final_response == "D3"
    loaded = load_spec_text(text, FIXTURE.name)
    assert render_artifacts(loaded.spec, d.artifact_context) == {"refined-content.md": "D3"}
    assert [(i["iteration"], i["score"]) for i in run.view["iterations"]] == [
        (1, 62), (2, 78), (3, 91)]
