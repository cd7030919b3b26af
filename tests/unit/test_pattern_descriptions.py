"""Each registered pattern says how `durable validate` counts its parts and how the
console draws its shape: the CLI and the console ask the registry, so a new pattern
declares its own instead of editing them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from pattern_specs import CASES, PatternCase

from strands_durable.api.console.views import shape
from strands_durable.models import SessionStatus, StepResult
from strands_durable.patterns import PATTERNS, PatternDefinition, PlanContext
from strands_durable.spec.script import ScriptConfig


@pytest.mark.parametrize("pattern_type", sorted(PATTERNS))
def test_parts_field_names_a_config_list_or_none(pattern_type: str) -> None:
    definition = PATTERNS[pattern_type]
    field = definition.parts_field
    if field is not None:
        assert field in definition.config_model.model_fields


def test_parts_fields_are_those_validate_has_always_printed() -> None:
    fields = {t: d.parts_field for t, d in PATTERNS.items()}
    assert fields == {"chain": "steps", "workflow": "tasks", "parallel": "branches",
                      "routing": "routes", "graph": "nodes", "evaluator_optimizer": None,
                      "orchestrator_workers": None}


def test_notes_name_tools_except_for_the_orchestrator() -> None:
    silent = {t for t, d in PATTERNS.items() if not d.notes_name_tools}
    assert silent == {"orchestrator_workers"}


# The console's shapes: each pattern draws its own (patterns/shapes.py), with its title.
SHAPE_TITLES = {"chain": "Chain: steps in order", "workflow": "Workflow: task graph",
                "parallel": "Parallel: branches, then reduce", "graph": "Graph: path taken",
                "routing": "Routing: the router's choice",
                "evaluator_optimizer": "Evaluator-optimizer: drafts and scores",
                "orchestrator_workers": "Orchestrator-workers: rounds"}


def test_every_pattern_draws_its_own_shape() -> None:
    defaults = {t for t, d in PATTERNS.items() if type(d).shape is PatternDefinition.shape}
    assert not defaults, f"patterns without a console shape: {sorted(defaults)}"
    assert set(SHAPE_TITLES) == set(PATTERNS) == set(CASES)


def run_case(case: PatternCase) -> list[dict[str, Any]]:
    """The pattern's state view after each committed step of its sample spec, the
    replies from the case's scripted rules; steps committed one at a time, in order."""
    loaded = case.load()
    script = ScriptConfig.model_validate({"rules": list(case.rules)})
    planner = PATTERNS[case.name].planner
    results: dict[str, StepResult] = {}

    def ctx(state: Mapping[str, Any]) -> PlanContext:
        return PlanContext(spec=loaded.spec, variables=loaded.variables, state=state,
                           results=dict(results), session_id="s1")

    decision = planner.start(ctx({}))
    queue, views = list(decision.schedule), [planner.view(ctx(decision.state))]
    while queue and decision.status == SessionStatus.RUNNING and len(views) < 60:
        job = queue.pop(0)
        reply = script.answer_for(job.agent, job.input)
        done = StepResult(key=job.key, agent=job.agent, input_tokens=2, output_tokens=3,
                          response=reply if isinstance(reply, str) else "ok")
        decision = planner.advance(ctx(decision.state), done)
        results[done.key] = done
        queue += decision.schedule
        views.append(planner.view(ctx(decision.state)))
    assert decision.status == SessionStatus.COMPLETED, decision.reason
    return views


@pytest.mark.parametrize("pattern_type", sorted(CASES))
def test_each_pattern_draws_its_sample_spec_at_every_step(pattern_type: str) -> None:
    views = run_case(CASES[pattern_type])
    shapes = [shape(pattern_type, view) for view in views]
    assert {s.title for s in shapes} == {SHAPE_TITLES[pattern_type]}  # never the raw state
    assert shapes[-1].lines, "a finished session shows its parts"
    assert all(line.label for s in shapes for line in s.lines)
    assert shapes[-1] == PATTERNS[pattern_type].shape(views[-1])


def test_an_unknown_pattern_or_an_old_state_shows_the_raw_state() -> None:
    assert shape("swarm", {"a": 1}).title == "swarm"
    old = shape("graph", {"node_history": 7})  # not a list: a state this version never wrote
    assert old.title == "graph (raw state)" and old.lines[0].label == "node_history"
