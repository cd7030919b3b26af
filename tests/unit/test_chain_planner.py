"""The chain planner is pure: spec + pattern_state + result -> decision."""

from __future__ import annotations

from collections import OrderedDict

import pytest

from strands_durable.errors import TemplateError
from strands_durable.models import SessionStatus, StepResult
from strands_durable.patterns import PlanContext, planner_for
from strands_durable.spec.loader import load_spec_text

SPEC = """
version: 0
name: three
runtime: {provider: scripted}
agents:
  a: {prompt: "You research {{ topic }}."}
  b: {prompt: "You summarise."}
pattern:
  type: chain
  config:
    steps:
      - agent: a
        input: "Research {{ topic }}"
      - agent: b
        input: "Analyse {{ steps[0].response }} ({{ depth }})"
        vars: {depth: deep}
      - agent: a
        input: "Sum up {{ steps[0].response }} and {{ last_response }}"
inputs:
  values: {topic: tides}
outputs:
  artifacts:
    - path: out.md
      from: "{{ steps[1].response }} / {{ last_response }}"
"""


def ctx(state: dict, results: list[StepResult]) -> PlanContext:
    loaded = load_spec_text(SPEC, "three.yaml")
    return PlanContext(spec=loaded.spec, variables=loaded.variables, state=state,
                       results=OrderedDict((r.key, r) for r in results), session_id="s1")


def result(i: int, response: str, agent: str = "a") -> StepResult:
    return StepResult(key=f"step:{i}", agent=agent, response=response, input_tokens=2,
                      output_tokens=3)


planner = planner_for("chain")


def test_start_schedules_step_zero_with_rendered_input_and_prompt() -> None:
    d = planner.start(ctx({}, []))
    assert d.state == {"current_step": 0} and d.status == SessionStatus.RUNNING
    (job,) = d.schedule
    assert (job.key, job.agent, job.input) == ("step:0", "a", "Research tides")
    assert job.system_prompt == "You research {{ topic }}."  # as written and job.session_id == "s1"


@pytest.mark.parametrize(("done", "expected_key", "expected_input"), [
    ([], "step:1", "Analyse R0 (deep)"),
    (["R0"], "step:2", "Sum up R0 and R1"),
])
def test_advance_schedules_next(done: list[str], expected_key: str, expected_input: str
                                ) -> None:
    prior = [result(i, r) for i, r in enumerate(done)]
    finished = result(len(prior), f"R{len(prior)}")
    d = planner.advance(ctx({"current_step": len(prior)}, prior), finished)
    assert d.state == {"current_step": len(prior) + 1}
    assert [(j.key, j.input) for j in d.schedule] == [(expected_key, expected_input)]


def test_last_step_completes_with_artifact_context() -> None:
    prior = [result(0, "R0"), result(1, "R1", "b")]
    d = planner.advance(ctx({"current_step": 2}, prior), result(2, "R2"))
    assert d.status == SessionStatus.COMPLETED and d.schedule == ()
    assert d.final_response == "R2" and d.artifact_context["last_response"] == "R2"
    assert [s["response"] for s in d.artifact_context["steps"]] == ["R0", "R1", "R2"]


def test_view_has_seed_shape() -> None:
    view = planner.view(ctx({"current_step": 2}, [result(1, "R1", "b"), result(0, "R0")]))
    assert view["current_step"] == 2
    assert view["step_history"] == [
        {"index": 0, "agent": "a", "response": "R0", "tokens": 5},
        {"index": 1, "agent": "b", "response": "R1", "tokens": 5},
    ]


def test_bad_index_at_run_time_names_the_field() -> None:
    # A computed index: a literal one is refused when the spec is loaded (test_templates).
    spec = SPEC.replace("Analyse {{ steps[0].response }}", "Analyse {{ steps[2 + 3].response }}")
    loaded = load_spec_text(spec, "bad.yaml")
    c = PlanContext(spec=loaded.spec, variables=loaded.variables, state={}, results={})
    with pytest.raises(TemplateError, match=r"pattern.config.steps\[1\].input"):
        planner.advance(c, result(0, "R0"))


@pytest.mark.parametrize(("template", "rendered"), [
    ("{{ steps[0].tokens_estimated }}", "5"),  # strands-cli's name
    ("{{ steps[0].tokens }}", "5"),  # the seed's name
    ("{{ steps[0].index }}/{{ steps[0].agent }}", "0/a"),
])
def test_step_records_carry_strands_cli_fields(template: str, rendered: str) -> None:
    text = SPEC.replace("Analyse {{ steps[0].response }} ({{ depth }})", template)
    loaded = load_spec_text(text, "three.yaml")
    c = PlanContext(spec=loaded.spec, variables=loaded.variables, state={"current_step": 0},
                    results={}, session_id="s1")
    (job,) = planner.advance(c, result(0, "R0")).schedule
    assert job.input == rendered


def test_artifacts_see_tokens_estimated_of_every_step() -> None:
    results = [result(0, "R0"), result(1, "R1", "b")]
    d = planner.advance(ctx({"current_step": 2}, results), result(2, "R2"))
    assert d.status == SessionStatus.COMPLETED
    assert [s["tokens_estimated"] for s in d.artifact_context["steps"]] == [5, 5, 5]
