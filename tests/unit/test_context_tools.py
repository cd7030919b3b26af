"""The system prompt's skills sections and notes, and the retrieval tools, as
strands-cli's build_system_prompt and build_agent give them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from strands_durable.errors import SpecError
from strands_durable.models import StepJob
from strands_durable.planning.notes import prompt_with_notes
from strands_durable.settings import current_tool_policy
from strands_durable.spec.loader import load_spec_data, load_spec_file
from strands_durable.spec.tool_checks import agent_tools
from strands_durable.worker.system_prompt import system_prompt
from strands_durable.worker.tools.toolbox import Toolbox

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "skills" / "skills-notes.yaml"


def spec(**extra: Any) -> dict[str, Any]:
    return {"version": 0, "name": "ctx", "runtime": {"provider": "scripted"},
            "agents": {"a": {"prompt": "A."}, "b": {"prompt": "B.", "tools": ["calculator"]}},
            "pattern": {"type": "chain", "config": {"steps": [{"agent": "a", "input": "x"}]}},
            **extra}


def retrieval(**fields: Any) -> dict[str, Any]:
    return {"context_policy": {"retrieval": fields}}


# -- the system prompt ------------------------------------------------------------

def test_notes_and_skills_sit_where_build_system_prompt_puts_them() -> None:
    loaded = load_spec_file(FIXTURE).spec
    prompt = prompt_with_notes("You write headlines.", "## [t] — Agent: researcher (Step 1)")
    # strands-cli's build_system_prompt for this agent, spec and injected notes.
    assert system_prompt(loaded, "writer", prompt) == (
        "You write headlines.\n\n"
        "\n# Previous Workflow Steps\n## [t] — Agent: researcher (Step 1)\n\n"
        "\n# How to Use Skills\n\n"
        "When a user's request might be solved by a specialized skill, call the Skill tool "
        "to load it.\n"
        'To use a skill, call: `Skill("skill_id")`\n\n'
        "Only use skills from the Available Skills list below.\n"
        "Do not invoke a skill that's already been loaded.\n\n\n"
        "# Available Skills\n\n"
        "- **style-guide** (path: `./skills/style-guide`): House style for every text we "
        "publish\n"
        "- **glossary** (path: `./skills/glossary`)\n\n"
        "\n# Runtime Context\n\n- **Workflow:** skills-notes\n"
        "- **Description:** A three-step chain with skills and notes\n"
        "- **Agent ID:** writer")


def test_no_skills_no_skills_sections() -> None:
    text = system_prompt(load_spec_data(spec()).spec, "a", "A.")
    assert "Skill" not in text


# -- which tools an agent gets ----------------------------------------------------

def names(config: Any) -> list[str]:
    return [t.native or t.callable for t in config.python]


def test_retrieval_tools_join_every_agents_tools() -> None:
    loaded = load_spec_data(spec(**retrieval(jit_tools=["grep", "head", "calculator"]))).spec
    assert names(agent_tools(loaded, "b")) == ["calculator", "grep", "head"]
    assert names(agent_tools(loaded, "b", ["current_time"])) == [
        "current_time", "grep", "head", "calculator"]
    # No list: every global tool (none here) and the retrieval tools; strands-cli's
    # build_agent would drop the global tools, which is not kept.
    assert names(agent_tools(loaded, "a")) == ["grep", "head", "calculator"]


def test_a_retrieval_tool_may_be_a_tool_the_spec_defines() -> None:
    executor = {"id": "docs", "base_url": "https://docs.example.com"}
    loaded = load_spec_data(spec(tools={"http_executors": [executor]},
                                 **retrieval(jit_tools=["docs"]))).spec
    assert [e.id for e in agent_tools(loaded, "b").http_executors] == ["docs"]


def test_the_toolbox_builds_them_and_the_skill_tool() -> None:
    loaded = load_spec_file(FIXTURE).spec
    job = StepJob(session_id="s", key="step:0", agent="researcher", input="x")
    box = Toolbox(current_tool_policy())
    tools = asyncio.run(box.tools_for(loaded, "scope", job))
    assert [t.tool_name for t in tools] == ["Skill"]
    with_jit = load_spec_data(spec(**retrieval(jit_tools=["grep", "tail"]))).spec
    tools = asyncio.run(box.tools_for(with_jit, "scope2", StepJob(
        session_id="s", key="step:0", agent="a", input="x")))
    assert [t.tool_name for t in tools] == ["grep", "tail"]


def test_retrieval_mcp_servers_are_refused_as_the_placeholder_they_are() -> None:
    with pytest.raises(SpecError) as err:
        load_spec_data(spec(**retrieval(mcp_servers=["fs"])))
    assert err.value.path == "context_policy.retrieval.mcp_servers"
    assert "placeholder" in err.value.problem and "tools.mcp" in err.value.problem


def test_an_unknown_retrieval_tool_is_refused_with_a_near_miss() -> None:
    with pytest.raises(SpecError) as err:
        load_spec_data(spec(**retrieval(jit_tools=["grep", "taill"])))
    assert err.value.path == "context_policy.retrieval.jit_tools[1]"
    assert "unknown tool 'taill' (did you mean 'tail'?)" in err.value.problem


def test_a_retrieval_tool_obeys_the_fleet_tool_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DURABLE_TOOL_PYTHON_EXEC", raising=False)
    current_tool_policy.cache_clear()
    try:
        with pytest.raises(SpecError) as err:
            load_spec_data(spec(**retrieval(jit_tools=["python_exec"])))
    finally:
        current_tool_policy.cache_clear()
    assert err.value.path == "context_policy.retrieval.jit_tools[0]"
    assert "DURABLE_TOOL_PYTHON_EXEC" in err.value.problem
