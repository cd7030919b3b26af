"""`security.guardrails` is kept or the spec is refused at submit: allow_tools bounds
every tool an agent can get, deny_network refuses every tool that reaches (or may reach)
the network, pii_redaction: true is refused. Each refusal names the setting, the place
in the spec and the tool."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from strands_durable.errors import SpecError
from strands_durable.settings import current_tool_policy
from strands_durable.spec.loader import load_spec_data


@pytest.fixture(autouse=True)
def fresh_policy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("TOOL_MODULES", "MCP_COMMANDS", "TOOL_SECRETS", "TOOL_PYTHON_EXEC"):
        monkeypatch.delenv(f"DURABLE_{name}", raising=False)
    current_tool_policy.cache_clear()
    yield
    current_tool_policy.cache_clear()


def spec(guardrails: dict[str, Any], *, tools: dict[str, Any] | None = None,
         agent_tools: list[str] | None = None, **sections: Any) -> dict[str, Any]:
    agent: dict[str, Any] = {"prompt": "You help."}
    if agent_tools is not None:
        agent["tools"] = agent_tools
    data: dict[str, Any] = {
        "version": 0, "name": "guarded", "runtime": {"provider": "scripted"},
        "agents": {"helper": agent},
        "pattern": {"type": "chain", "config": {"steps": [{"agent": "helper",
                                                             "input": "go"}]}},
        "security": {"guardrails": guardrails}, **sections,
    }
    if tools is not None:
        data["tools"] = tools
    return data


def refusal(data: dict[str, Any]) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_spec_data(data, "s.yaml")
    return info.value


def test_no_guardrails_and_false_flags_load() -> None:
    load_spec_data(spec({}), "s.yaml")
    load_spec_data(spec({"pii_redaction": False, "deny_network": False}), "s.yaml")


def test_pii_redaction_is_refused_rather_than_pretended() -> None:
    error = refusal(spec({"pii_redaction": True}))
    assert error.path == "security.guardrails.pii_redaction"
    assert "not implemented" in error.problem


@pytest.mark.parametrize(("allow", "agent_tools", "tools", "path", "tool"), [
    # An agent's own list names a native tool the list does not permit.
    (["calculator"], ["current_time"], None, "agents.helper.tools", "current_time"),
    # A defined tool nobody may use is refused where it is defined.
    (["calculator"], None, {"python": ["calculator", "web_fetch"]}, "tools.python[1]",
     "web_fetch"),
    ([], None, {"http_executors": [{"id": "api", "base_url": "https://api.example.com"}]},
     "tools.http_executors[0]", "api"),
    (["calculator"], None, {"mcp": [{"id": "files", "url": "https://mcp.example.com"}]},
     "tools.mcp[0]", "files"),
])
def test_allow_tools_refuses_every_tool_outside_it(allow: list[str], agent_tools: Any,
                                                   tools: Any, path: str, tool: str) -> None:
    error = refusal(spec({"allow_tools": allow}, tools=tools, agent_tools=agent_tools))
    assert error.path == path
    assert f"{tool!r} is not in security.guardrails.allow_tools" in error.problem


def test_allow_tools_refuses_a_step_override_and_a_retrieval_tool() -> None:
    data = spec({"allow_tools": ["calculator"]}, agent_tools=["calculator"])
    data["pattern"]["config"]["steps"][0]["tool_overrides"] = ["current_time"]
    assert refusal(data).path == "pattern.config.steps[0].tool_overrides"
    data = spec({"allow_tools": ["calculator"]},
                context_policy={"retrieval": {"jit_tools": ["grep"]}})
    assert refusal(data).path == "context_policy.retrieval.jit_tools[0]"


def test_allow_tools_matches_native_tools_by_either_name_and_keeps_the_worker_to_it() -> None:
    data = spec({"allow_tools": ["strands_cli.tools.calculator", "current_time"]},
                tools={"python": ["calculator", "strands_cli.tools.current_time"]})
    loaded = load_spec_data(data, "s.yaml")
    assert [t.callable for t in loaded.spec.tools_for("helper").python] == [
        "calculator", "strands_cli.tools.current_time"]


def test_tools_for_filters_by_allow_tools_whatever_reaches_the_worker() -> None:
    # Built past the loader (as a stale or hand-made spec would be): still filtered.
    data = spec({"allow_tools": ["calculator"]},
                tools={"python": ["calculator"]})
    loaded = load_spec_data(data, "s.yaml")
    forged = loaded.spec.model_copy(update={"tools": loaded.spec.tools.model_copy(
        update={"python": [*loaded.spec.tools.python,
                           type(loaded.spec.tools.python[0])(callable="web_fetch")]})})
    assert [t.callable for t in forged.tools_for("helper").python] == ["calculator"]


@pytest.mark.parametrize(("tools", "agent_tools", "path", "says"), [
    ({"http_executors": [{"id": "api", "base_url": "https://api.example.com"}]}, None,
     "tools.http_executors[0]", "calls https://api.example.com"),
    ({"mcp": [{"id": "web", "url": "https://mcp.example.com/mcp"}]}, None, "tools.mcp[0]",
     "reached over HTTP"),
    ({"mcp": [{"id": "local", "command": "python", "args": ["-m", "srv"]}]}, None,
     "tools.mcp[0]", "cannot be checked"),
    ({"python": ["web_fetch"]}, None, "tools.python[0]", "reaches the network"),
    (None, ["http_request"], "agents.helper.tools", "reaches the network"),
    ({"python": ["strands_tools.calculator"]}, None, "tools.python[0]",
     "cannot be checked"),
])
def test_deny_network_refuses_every_tool_that_may_reach_it(
        monkeypatch: pytest.MonkeyPatch, tools: Any, agent_tools: Any, path: str,
        says: str) -> None:
    # The fleet allows these tools; only the guardrail refuses them.
    monkeypatch.setenv("DURABLE_TOOL_MODULES", "strands_tools.")
    monkeypatch.setenv("DURABLE_MCP_COMMANDS", "python")
    current_tool_policy.cache_clear()
    error = refusal(spec({"deny_network": True}, tools=tools, agent_tools=agent_tools))
    assert error.path == path
    assert "security.guardrails.deny_network is set" in error.problem and says in error.problem


def test_deny_network_keeps_offline_tools() -> None:
    data = spec({"deny_network": True}, tools={"python": ["calculator", "current_time"]},
                context_policy={"retrieval": {"jit_tools": ["grep", "head"]}})
    loaded = load_spec_data(data, "s.yaml")
    assert [t.callable for t in loaded.spec.tools_for("helper").python] == [
        "calculator", "current_time"]


def test_deny_network_never_shows_an_executors_password_and_is_bounded() -> None:
    url = "https://user:s3cret@api.example.com/" + "p" * 50_000
    error = refusal(spec({"deny_network": True},
                         tools={"http_executors": [{"id": "api", "base_url": url}]}))
    assert error.path == "tools.http_executors[0]" and "api.example.com" in error.problem
    assert "s3cret" not in str(error) and len(str(error)) < 1_000


def test_an_allow_list_is_shown_bounded() -> None:
    allow = [f"tool_{i}_" + "x" * 40 for i in range(2_000)]
    error = refusal(spec({"allow_tools": allow}, agent_tools=["calculator"],
                         tools={"python": ["calculator"]}))
    assert "calculator" in error.problem and len(str(error)) < 2_000
