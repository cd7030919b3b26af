"""scheduler/planning/inline.py: which specs' commits a worker plans on its event loop
(text and plain lookups only) and which in a thread (anything a spec could make slow),
and that the worker does what it decides."""

from __future__ import annotations

import threading

import pytest

from strands_durable.scheduler.planning.inline import plain_template, plans_inline
from strands_durable.scheduler.spec.loader import load_spec_file, load_spec_text
from strands_durable.settings import DurableSettings
from strands_durable.worker.step_runner import StepRunner


@pytest.mark.parametrize("text", [
    "Write a haiku.",
    "Research {{ topic }} for {{ audience }}.",
    "Previous:\n{{ steps[0].response }}\nand {{ steps.research.response }}",
    "{{ tasks['notes'].response }}",
    "{ not a template }",
])
def test_text_and_lookups_are_plain(text: str) -> None:
    assert plain_template(text)


@pytest.mark.parametrize("text", [
    "{{ steps[0].response | truncate(100) }}",          # a filter
    "{% for s in steps %}{{ s.response }}{% endfor %}",  # a loop
    "{% if approved %}yes{% endif %}",                   # a branch
    "{{ 'approve' in nodes.review.response.lower() }}",  # a call and a comparison
    "{{ 9 ** 99999 }}",                                  # arithmetic
    "{{ topic ~ topic }}",                               # building a string
    "{{ steps[0].response[:100] }}",                     # a slice
    "{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}",   # recursion
    "{% set x = topic %}{{ x }}",
    "{{ range(10) | list }}",
    "{{ unclosed",                                       # not even a template
])
def test_anything_a_spec_could_make_slow_is_not(text: str) -> None:
    assert not plain_template(text)


def chain(input_text: str, extra: str = "") -> str:
    return f"""\
version: 0
name: inline-check
runtime: {{provider: scripted, model_id: scripted-1}}
inputs: {{values: {{topic: AI}}}}
agents: {{a: {{prompt: "You are a."}}}}
pattern:
  type: chain
  config:
    steps:
      - agent: a
        input: "{input_text}"
      - agent: a
        input: "Go on from {{{{ steps[0].response }}}}"
{extra}"""


def test_a_spec_plans_inline_only_when_every_template_is_plain() -> None:
    assert plans_inline(load_spec_text(chain("About {{ topic }}")).spec)
    assert not plans_inline(load_spec_text(chain("About {{ topic | upper }}")).spec)
    artifact = ('outputs:\n  artifacts:\n    - path: "out.md"\n'
                '      from: "{% for s in steps %}{{ s.response }}{% endfor %}"\n')
    assert not plans_inline(load_spec_text(chain("About {{ topic }}", artifact)).spec)


def test_notes_and_traces_always_plan_in_a_thread() -> None:
    notes = "context_policy:\n  notes:\n    file: notes.md\n"
    assert not plans_inline(load_spec_text(chain("About {{ topic }}", notes)).spec)
    traced = "telemetry:\n  otel:\n    service_name: x\n"
    assert not plans_inline(load_spec_text(chain("About {{ topic }}", traced)).spec)


def test_the_examples_that_plan_inline() -> None:
    inline = {name: plans_inline(load_spec_file(f"examples/{name}.yaml").spec)
              for name in ("chain-calculator-tools", "routing-support-triage",
                           "chain-research", "graph-code-review-loop")}
    assert inline == {"chain-calculator-tools": True, "routing-support-triage": True,
                      "chain-research": False, "graph-code-review-loop": False}


async def test_the_worker_plans_inline_on_its_loop_and_otherwise_in_a_thread() -> None:
    runner = StepRunner.__new__(StepRunner)  # only _plan_with_lease is exercised
    runner.settings = DurableSettings()
    loop_thread = threading.get_ident()
    on_loop = await runner._plan_with_lease(0, "", True, threading.get_ident)
    in_thread = await runner._plan_with_lease(0, "", False, threading.get_ident)
    assert on_loop == loop_thread and in_thread != loop_thread
