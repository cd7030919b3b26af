"""The sandboxed Jinja environment: strands-cli names and filters, strictness, safety."""

from __future__ import annotations

from typing import Any

import pytest
from jinja2 import StrictUndefined

from strands_durable.errors import TemplateError
from strands_durable.spec.templates import (
    ENV,
    render,
    render_condition,
    undeclared_condition_names,
    undeclared_names,
)

CONTEXT: dict[str, Any] = {
    "topic": "edge computing",
    "steps": [{"response": "first answer", "index": 0}, {"response": "x" * 300}],
    "tasks": {"overview": {"response": "an overview", "status": "success"}},
    "branches": {"academic": {"response": "papers"}},
    "router": {"chosen_route": "billing", "response": '{"route": "billing"}'},
    "nodes": {"process": {"iteration": 3, "response": "Score: 92"}},
    "evaluation": {"score": 71, "issues": ["too long"], "fixes": ["cut"]},
    "workers": [{"response": "w0"}, {"response": "w1"}],
    "last_response": "the end",
}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("Research {{topic}}", "Research edge computing"),
        ("{{ steps[0].response }}", "first answer"),
        ("{{ tasks.overview.response }}/{{ tasks.overview.status }}", "an overview/success"),
        ("{{ branches.academic.response }}", "papers"),
        ("{{ router.chosen_route }}", "billing"),
        ("{{ nodes.process.iteration }}", "3"),
        (
            "{{ evaluation.score }}:{% for i in evaluation.issues %}{{ i }}{% endfor %}",
            "71:too long",
        ),
        ("{{ workers | length }} {{ workers[1].response }}", "2 w1"),
        ("{{ last_response }}", "the end"),
        ("{{ topic | title }}", "Edge Computing"),
        ("{{ missing | default('fallback') }}", "fallback"),
        ("{% if missing is defined %}yes{% else %}no{% endif %}", "no"),
        ("line\n", "line"),  # one trailing newline dropped, as Jinja's default (strands-cli)
        ("line\n\n", "line\n"),
    ],
)
def test_render_with_strands_cli_names(template: str, expected: str) -> None:
    assert render(template, CONTEXT, "where") == expected


def test_truncate_follows_strands_cli() -> None:
    # strands-cli: cut to n characters, the last three being "..."; Jinja's differs.
    assert render("{{ steps[1].response | truncate(200) }}", CONTEXT, "w") == "x" * 197 + "..."
    assert render("{{ 'short' | truncate(200) }}", CONTEXT, "w") == "short"
    assert render("{{ steps[1].response | truncate }}", CONTEXT, "w") == "x" * 97 + "..."


def test_tojson_is_plain_json() -> None:
    rendered = render("{{ evaluation | tojson }}", {"evaluation": {"a": "<é>"}}, "w")
    assert rendered == '{"a": "<é>"}'


def test_regex_search_filter() -> None:
    assert (
        render("{{ nodes.process.response | regex_search('score: ([0-9]+)') }}", CONTEXT, "w")
        == "92"
    )
    assert render("{{ 'nothing' | regex_search('([0-9]+)') }}", CONTEXT, "w") == ""


@pytest.mark.parametrize(
    ("template", "fragment"),
    [
        ("{{ topc }}", "'topc' is undefined"),
        ("{{ steps[5].response }}", "no item 5 here (there are"),
        ("{{ tasks.nope.response }}", "no 'nope' here (there is: "),
        ("{{ topic", "template syntax error on line 1"),
        ("a\n{% for x in steps %}", "template syntax error on line 2"),
        ("{{ topic | nosuchfilter }}", "No filter named 'nosuchfilter'"),
        ("{{ 1 / 0 }}", "ZeroDivisionError"),
    ],
)
def test_render_errors_name_the_place(template: str, fragment: str) -> None:
    with pytest.raises(TemplateError) as info:
        render(template, CONTEXT, "pattern.config.steps[1].input")
    assert info.value.where == "pattern.config.steps[1].input"
    assert fragment in info.value.problem


@pytest.mark.parametrize(
    "template",
    [
        "{{ ''.__class__ }}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ topic.__class__.__init__.__globals__ }}",
        "{{ steps.__len__ }}",
        "{{ render.__globals__ }}",
        "{{ cycler.__init__.__globals__.os }}",
    ],
)
def test_sandbox_blocks_attribute_escapes(template: str) -> None:
    with pytest.raises(TemplateError) as info:
        render(template, {**CONTEXT, "render": render}, "w")
    assert "unsafe" in info.value.problem or "undefined" in info.value.problem


def test_sandbox_blocks_format_string_escape() -> None:
    with pytest.raises(TemplateError, match="unsafe"):
        render("{{ '{0.__class__}'.format(topic) }}", CONTEXT, "w")


def test_control_characters_are_stripped() -> None:
    assert render("a{{ x }}b", {"x": "\x00\x07\t\n"}, "w") == "a\t\nb"


def test_compiled_templates_are_cached() -> None:
    from strands_durable.spec import templates

    templates._compile.cache_clear()
    for _ in range(3):
        render("cached {{ topic }}", CONTEXT, "w")
    info = templates._compile.cache_info()
    assert (info.misses, info.hits) == (1, 2)


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("{{ nodes.process.iteration >= 3 }}", True),
        ("{{ nodes.process.iteration >= 4 }}", False),
        ("nodes.process.iteration >= 3", True),
        ("  {{- nodes.process.iteration < 3 -}}  ", False),
        ("{{ 'score' in nodes.process.response.lower() }}", True),
        ("{{ nodes.process.response is search('Score: [89][0-9]|100') }}", True),
        ("{{ nodes.process.response | search('nope') }}", False),
        ("{{ 'process' in nodes and len(nodes) == 1 }}", True),
        ("{{ router.chosen_route == 'billing' }}", True),
        ("{{ workers }}", True),
        ("{{ [] }}", False),
        ("{% if nodes.process.iteration > 1 %}true{% else %}false{% endif %}", True),
        ("{{ nodes.process.iteration }} >= {{ 9 }}", None),  # renders "3 >= 9": not a bool
        ("else", True),
        ("ELSE", True),
    ],
)
def test_render_condition(expr: str, expected: bool | None) -> None:
    if expected is None:
        with pytest.raises(TemplateError, match="not true or false"):
            render_condition(expr, CONTEXT, "edges[0].choose[0].when")
    else:
        assert render_condition(expr, CONTEXT, "edges[0].choose[0].when") is expected


@pytest.mark.parametrize(
    ("expr", "fragment"),
    [
        ("{{ nodes.missing.iteration > 1 }}", "no 'missing' here (there is: "),
        ("{{ undefined_name }}", "'undefined_name' is undefined"),
        ("nodes.analyze.response contains 'high'", "template syntax error"),
        ("{{ ''.__class__ }}", "unsafe"),
    ],
)
def test_render_condition_errors(expr: str, fragment: str) -> None:
    with pytest.raises(TemplateError) as info:
        render_condition(expr, CONTEXT, "pattern.config.edges[1].choose[0].when")
    assert info.value.where == "pattern.config.edges[1].choose[0].when"
    assert fragment in info.value.problem


def test_undeclared_names() -> None:
    template = "{{ topic }} {% for s in steps %}{{ s.response }}{% endfor %}{% set x = 1 %}{{ x }}"
    assert undeclared_names(template) == {"topic", "steps"}
    assert undeclared_condition_names("'a' in nodes.n.response and iteration > 2") == {
        "nodes",
        "iteration",
    }
    assert undeclared_condition_names("else") == set()


def test_undeclared_names_reports_syntax_errors() -> None:
    with pytest.raises(TemplateError, match="line 2"):
        undeclared_names("ok\n{{ broken", "agents.a.prompt")


def test_environment_settings() -> None:
    assert issubclass(ENV.undefined, StrictUndefined)  # ExplainedUndefined: its messages
    assert ENV.autoescape is False
    assert ENV.keep_trailing_newline is False  # Jinja's default, as strands-cli renders


def test_a_missing_step_or_branch_says_what_there_is() -> None:
    """The message names what a template could have asked for, not a Python class (it
    read 'strands_durable.patterns.chain.StepHistory object has no element 5')."""
    from strands_durable.patterns.chain import StepHistory

    two = {"steps": StepHistory({}, 2)}
    with pytest.raises(TemplateError, match=r"steps\[5\]: 2 step\(s\) ran before this one "
                                            r"\(steps\[0\] to steps\[1\]\)"):
        render("{{ steps[5].response }}", two, "w")
    with pytest.raises(TemplateError, match=r"no 'nope' here \(there is: a, b\)"):
        render("{{ branches.nope.response }}", {"branches": {"a": {}, "b": {}}}, "w")
    assert render("{{ steps[5] is defined }}", two, "w") == "False"  # tests unchanged
    assert render("{{ branches.nope | default('d') }}", {"branches": {}}, "w") == "d"


def test_a_chain_step_naming_a_step_not_before_it_fails_validation() -> None:
    """Caught before anything runs: the run failed only at that step, after the steps
    before it had run (and been paid for)."""
    from strands_durable.errors import SpecError
    from strands_durable.spec.loader import load_spec_text

    def chain(second_input: str) -> str:
        return ("version: 0\nname: c\nruntime: {provider: scripted}\nagents: {a: {prompt: hi}}\n"
                "pattern: {type: chain, config: {steps: [{agent: a, input: one}, "
                f"{{agent: a, input: '{second_input}'}}]}}}}\n")

    for bad in ("{{ steps[5].response }}", "{{ steps[1].response }}", "{{ steps[-2].response }}"):
        with pytest.raises(SpecError, match=r"pattern\.config\.steps\[1\]\.input: steps\[-?\d\]: "
                                            r"1 step\(s\) run before this one"):
            load_spec_text(chain(bad), "c.yaml")
    for good in ("{{ steps[0].response }}", "{{ steps[-1].response }}", "{{ steps | length }}"):
        load_spec_text(chain(good), "c.yaml")
