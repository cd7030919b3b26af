"""The lean step path (issue 14): each shortcut gives exactly what the long way gave.

Strands' tracer skips only the work of spans that record nothing; its deep copies of
plain data are the same copies; a literal template renders as Jinja renders it; the
results cache is bounded by the results it holds; a StepJob's JSON is asdict's."""

from __future__ import annotations

import copy
import json
from dataclasses import asdict
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext
from strands.hooks import BeforeInvocationEvent

from strands_durable.errors import TemplateError
from strands_durable.models import StepJob, StepKind, StepResult
from strands_durable.settings import Limits
from strands_durable.spec.templates import render
from strands_durable.worker.lean_strands import LeanTracer, plain_deepcopy
from strands_durable.worker.results_cache import ResultsCache

MESSAGES = [{"role": "user", "content": [{"text": "hello"}]},
            {"role": "assistant", "content": [{"text": "hi"}]}]


class Spy(NonRecordingSpan):
    def __init__(self) -> None:
        super().__init__(SpanContext(0, 0, False))
        self.events: list[str] = []

    def add_event(self, name: str, attributes: object = None, timestamp: object = None) -> None:
        self.events.append(name)


def test_a_span_that_records_nothing_gets_no_message_events() -> None:
    span = Spy()
    LeanTracer()._add_event_messages(span, MESSAGES)  # type: ignore[arg-type]
    LeanTracer()._add_system_prompt_event(span, "be brief")
    assert span.events == []


def test_a_recording_span_gets_strands_own_events() -> None:
    span = TracerProvider().get_tracer("t").start_span("s")
    assert span.is_recording()
    LeanTracer()._add_event_messages(span, MESSAGES)  # type: ignore[arg-type]
    LeanTracer()._add_system_prompt_event(span, "be brief")
    names = [e.name for e in span.events]  # type: ignore[attr-defined]
    assert "gen_ai.user.message" in names and "gen_ai.assistant.message" in names
    assert "gen_ai.system.message" in names


def test_plain_deepcopy_copies_deeply_and_keeps_aliasing() -> None:
    inner = {"text": "x"}
    data = {"a": [inner, inner], "n": 1.5, "b": b"\x00", "t": (1, 2)}
    copied = plain_deepcopy(data)
    assert copied == copy.deepcopy(data)
    assert copied["a"][0] is copied["a"][1] and copied["a"][0] is not inner


def test_plain_deepcopy_leaves_other_objects_to_copy_deepcopy() -> None:
    class Box:
        def __deepcopy__(self, memo: dict[int, object]) -> str:
            return "deep-copied by its own method"

    assert plain_deepcopy([Box()]) == ["deep-copied by its own method"]


@pytest.mark.parametrize("text", ["plain words", "a } b", "percent % and # hash",
                                  "ünïcode\u0301 text", "control\x07char"])
def test_a_literal_renders_as_jinja_renders_it(text: str) -> None:
    # The same text with an empty expression appended goes through Jinja.
    assert render(text, {}, "where") == render(text + "{{ '' }}", {}, "where")


def test_a_literal_over_the_budget_goes_through_jinja_as_before() -> None:
    # The budget bounds what expressions write; template text is bounded by the spec.
    assert render("x" * 50, {}, "where", max_chars=10) == "x" * 50
    assert render("x" * 2000, {}, "w", limits=Limits(max_render_chars=1024)) == "x" * 2000


def test_template_syntax_still_renders_and_fails_as_before() -> None:
    assert render("a {{ b }}\n", {"b": 1}, "where") == "a 1"
    assert render("line\n", {}, "where") == "line"  # Jinja drops one trailing newline
    with pytest.raises(TemplateError, match="where"):
        render("{{ missing }}", {}, "where")


def r(key: str) -> StepResult:
    return StepResult(key=key, agent="a", response=key)


def test_the_results_cache_is_bounded_by_the_results_it_holds() -> None:
    cache = ResultsCache(max_results=10, max_sessions=100)
    for n in range(5):
        ResultsCache.extend(cache.get(f"s{n}"), 0, [r(f"step:{i}") for i in range(4)])
    assert cache.tally.held <= 10 + 4  # the newest session is never evicted
    assert cache.get("s4").count == 4  # the newest are kept
    assert cache.get("s0").count == 0  # the oldest went first


def test_many_short_sessions_stay_cached() -> None:
    cache = ResultsCache()
    for n in range(2000):
        ResultsCache.extend(cache.get(f"s{n}"), 0, [r("step:0")])
    assert all(cache.get(f"s{n}").count == 1 for n in range(2000))


def test_a_step_job_is_the_json_asdict_gave() -> None:
    job = StepJob("sid", "step:1", "a", "in", kind=StepKind.HITL, meta={"x": [1, {"y": 2}]})
    assert job.to_json() == json.dumps(asdict(job), separators=(",", ":"))
    assert StepJob.from_json(job.to_json()) == job


def _plugins() -> list[object]:
    """The plugins every Agent makes (its model's and its delegation's), and plugins with
    hooks and a tool, a child overriding its parent's hook."""
    from strands import tool
    from strands.plugins import Plugin, hook

    class Parent(Plugin):
        name = "parent"

        @hook
        def before(self, event: BeforeInvocationEvent) -> None: ...

        @hook
        def also(self, event: BeforeInvocationEvent) -> None: ...

    class Child(Parent):
        name = "child"

        @hook
        def before(self, event: BeforeInvocationEvent) -> None: ...

        @tool
        def look(self, query: str) -> str:
            """Look something up."""
            return query

        def plain(self) -> None: ...

    from strands.agent._agent_delegation import AgentDelegation
    from strands.models.model import _ModelPlugin

    return [_ModelPlugin(), AgentDelegation(), Child(), Parent()]


def test_plugin_discovery_finds_what_strands_finds() -> None:
    from strands.plugins import _discovery

    from strands_durable.worker import lean_strands

    plugins = _plugins()
    assert any(type(p).__name__ == "Child" for p in plugins)
    for plugin in plugins * 2:  # the second time from the names remembered
        for ours, theirs in ((lean_strands.discover_hooks, _discovery.discover_hooks),
                             (lean_strands.discover_tools, _discovery.discover_tools)):
            found = ours(plugin, "p")
            expected = theirs(plugin, "p")
            assert [getattr(f, "__name__", getattr(f, "tool_name", None)) for f in found] \
                == [getattr(f, "__name__", getattr(f, "tool_name", None)) for f in expected]
            # bound to this instance, not to the one the names were found on
            assert all(getattr(f, "__self__", plugin) is plugin for f in found)


def test_an_agent_not_loading_tools_from_its_folder_does_not_scan_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from strands.tools.registry import ToolRegistry

    from strands_durable.worker import lean_strands

    lean_strands.install()
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "shout.py").write_text(
        "from strands import tool\n\n@tool\ndef shout(text: str) -> str:\n"
        "    \"\"\"Shout.\"\"\"\n    return text.upper()\n")
    monkeypatch.chdir(tmp_path)
    scanned: list[bool] = []
    discover = ToolRegistry.discover_tool_modules

    def counting(self: ToolRegistry) -> dict[str, Path]:
        scanned.append(True)
        return discover(self)

    monkeypatch.setattr(ToolRegistry, "discover_tool_modules", counting)
    idle = ToolRegistry()
    idle.initialize_tools(load_tools_from_directory=False)
    assert scanned == [] and idle.tool_config is None and "shout" not in idle.registry
    loading = ToolRegistry()
    loading.initialize_tools(load_tools_from_directory=True)  # Strands' own, unchanged
    assert scanned == [True] and "shout" in loading.registry
