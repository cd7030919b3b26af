"""Plans on the worker's event loop (planning/inline.py): a render inside the
loop's budget stops with LoopBudgetSpent once past it (the worker then plans in a
thread), never with a TemplateError that would fail the session; outside it, the same
render runs to the end under its own limits."""

from __future__ import annotations

import pytest

from strands_durable.errors import TemplateError
from strands_durable.planning.inline import LOOP_BUDGET_S, may_plan_on_loop
from strands_durable.spec.loader import load_spec_text
from strands_durable.spec.render_guard import LoopBudgetSpent, on_the_loop
from strands_durable.spec.templates import render, render_condition

SLOW = "{% for c in text %}{% endfor %}done"  # one budget check per character
CONTEXT = {"text": "x" * 200_000, "topic": "AI"}


def test_a_quick_render_on_the_loop_is_an_ordinary_render() -> None:
    # The budget is wall time: a loaded machine (the suite runs in parallel) can spend the
    # real few milliseconds before the render starts, so a budget it cannot miss here.
    with on_the_loop(10.0):
        assert render("About {{ topic | upper }}", CONTEXT, "input") == "About AI"


def test_a_slow_render_on_the_loop_stops_for_the_thread_not_as_the_templates_fault() -> None:
    with pytest.raises(LoopBudgetSpent), on_the_loop(LOOP_BUDGET_S):
        render(SLOW, CONTEXT, "pattern.config.steps[1].input")
    assert render(SLOW, CONTEXT, "input") == "done"  # in a thread: runs to the end


def test_a_slow_condition_and_a_backtracking_regex_stop_the_same_way() -> None:
    with pytest.raises(LoopBudgetSpent), on_the_loop(LOOP_BUDGET_S):
        render_condition("{% for c in text %}{% endfor %}true", CONTEXT, "edge")
    backtracks = "{{ text | regex_search('(a|aa)+$') }}"  # the regex gets the time left
    with pytest.raises(LoopBudgetSpent), on_the_loop(LOOP_BUDGET_S):
        render(backtracks, {"text": "a" * 60 + "b"}, "input")


def test_the_renders_own_limit_still_fails_it_when_it_comes_first() -> None:
    from strands_durable.settings import Limits

    tight = Limits(render_timeout_s=0.001)
    with pytest.raises(TemplateError, match="DURABLE_RENDER_TIMEOUT_S"), on_the_loop(60):
        render(SLOW, CONTEXT, "input", limits=tight)


def chain(extra: str = "") -> str:
    return f"""\
version: 0
name: loop-check
runtime: {{provider: scripted, model_id: scripted-1}}
agents: {{a: {{prompt: "You are a."}}}}
pattern:
  type: chain
  config:
    steps:
      - {{agent: a, input: "one"}}
{extra}"""


def test_specs_with_notes_or_a_trace_always_plan_in_a_thread() -> None:
    assert may_plan_on_loop(load_spec_text(chain()).spec)
    notes = "context_policy:\n  notes:\n    file: notes.md\n"
    assert not may_plan_on_loop(load_spec_text(chain(notes)).spec)
    traced = "telemetry:\n  otel:\n    service_name: x\n"
    assert not may_plan_on_loop(load_spec_text(chain(traced)).spec)
