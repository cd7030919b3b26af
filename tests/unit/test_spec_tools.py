"""A spec's `tools:` section: resolved per agent as strands-cli resolves it, and checked
at submit against the fleet's tool policy, each refusal naming place, agent and tool."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from strands_durable.errors import SpecError
from strands_durable.settings import current_tool_policy
from strands_durable.spec.loader import load_spec_data, load_spec_file

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "chain-calculator-tools.yaml"


@pytest.fixture(autouse=True)
def fresh_policy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("TOOL_MODULES", "MCP_COMMANDS", "TOOL_SECRETS", "TOOL_PYTHON_EXEC"):
        monkeypatch.delenv(f"DURABLE_{name}", raising=False)
    current_tool_policy.cache_clear()
    yield
    current_tool_policy.cache_clear()


def _allow(monkeypatch: pytest.MonkeyPatch, **env: str) -> None:
    for name, value in env.items():
        monkeypatch.setenv(f"DURABLE_{name.upper()}", value)
    current_tool_policy.cache_clear()


def spec(tools: dict[str, Any] | None = None, agent_tools: list[str] | None = None,
         **chain_step: Any) -> dict[str, Any]:
    agent: dict[str, Any] = {"prompt": "You help."}
    if agent_tools is not None:
        agent["tools"] = agent_tools
    data: dict[str, Any] = {
        "version": 0, "name": "t", "runtime": {"provider": "scripted"},
        "agents": {"helper": agent, "other": {"prompt": "Other.", "tools": []}},
        "pattern": {"type": "chain", "config": {"steps": [
            {"agent": "helper", "input": "go", **chain_step}]}},
    }
    if tools is not None:
        data["tools"] = tools
    return data


def refusal(data: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as info:
        load_spec_data(data, "s.yaml")
    return str(info.value)


def test_the_offline_example_loads_and_gives_each_agent_its_tools() -> None:
    loaded = load_spec_file(EXAMPLE)
    accountant = loaded.spec.tools_for("accountant")
    assert [t.callable for t in accountant.python] == ["calculator", "current_time"]
    assert loaded.spec.tools_for("writer").empty


def test_an_agent_without_a_list_gets_every_global_tool_and_a_list_narrows_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _allow(monkeypatch, mcp_commands="python3")
    tools = {"python": ["calculator", {"callable": "strands_cli.tools.current_time"}],
             "mcp": [{"id": "files", "command": "python3", "args": ["s.py"]}],
             "http_executors": [{"id": "api", "base_url": "https://api.example.com"}]}
    every = load_spec_data(spec(tools)).spec.tools_for("helper")
    assert [t.callable for t in every.python] == ["calculator",
                                                 "strands_cli.tools.current_time"]
    assert [s.id for s in every.mcp] == ["files"]
    assert [e.id for e in every.http_executors] == ["api"]
    listed = load_spec_data(spec(tools, ["api", "current_time"])).spec.tools_for("helper")
    assert [t.native for t in listed.python] == ["current_time"]
    assert listed.mcp == [] and [e.id for e in listed.http_executors] == ["api"]


def test_a_native_tool_listed_by_name_needs_no_python_entry_and_overrides_win() -> None:
    loaded = load_spec_data(spec(None, ["calculator"], tool_overrides=["current_time"]))
    assert [t.native for t in loaded.spec.tools_for("helper").python] == ["calculator"]
    overridden = loaded.spec.tools_for("helper", ["current_time"])
    assert [t.native for t in overridden.python] == ["current_time"]


def test_an_unknown_tool_names_the_agent_the_tool_and_a_near_miss() -> None:
    message = refusal(spec({"python": ["calculator"]}, ["calculater"]))
    assert "agents.helper.tools" in message and "agent 'helper'" in message
    assert "'calculater'" in message and "did you mean 'calculator'" in message


def test_an_unknown_override_is_refused_where_it_is_written() -> None:
    message = refusal(spec({"python": ["calculator"]}, tool_overrides=["nope"]))
    assert "pattern.config.steps[0].tool_overrides" in message and "'nope'" in message


def test_an_import_path_outside_the_allowed_prefixes_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    data = spec({"python": ["acme.tools.search.search"]})
    message = refusal(data)
    assert "tools.python[0]" in message and "acme.tools.search.search" in message
    assert "DURABLE_TOOL_MODULES" in message and "agents: helper" in message
    _allow(monkeypatch, tool_modules="acme.toolshed")  # a prefix is not a string prefix
    assert "DURABLE_TOOL_MODULES" in refusal(data)
    _allow(monkeypatch, tool_modules="acme.tools")
    assert load_spec_data(data).spec.tools_for("helper").python[0].native is None


def test_python_exec_needs_the_operator(monkeypatch: pytest.MonkeyPatch) -> None:
    message = refusal(spec(None, ["python_exec"]))
    assert "agents.helper.tools" in message and "DURABLE_TOOL_PYTHON_EXEC" in message
    _allow(monkeypatch, tool_python_exec="1")
    load_spec_data(spec(None, ["python_exec"]))


def test_an_mcp_command_must_be_one_the_fleet_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    data = spec({"mcp": [{"id": "sh", "command": "bash", "args": ["-c", "env"]}]})
    message = refusal(data)
    assert "tools.mcp[0].command" in message and "'bash'" in message
    assert "DURABLE_MCP_COMMANDS" in message
    _allow(monkeypatch, mcp_commands="npx, bash")
    load_spec_data(data)


def test_a_header_may_name_only_secrets_the_fleet_lends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DURABLE_REDIS_URL", "redis://:hunter2@db:6379/0")
    data = spec({"http_executors": [{"id": "api", "base_url": "https://api.example.com",
                                     "headers": {"X-Leak": "${DURABLE_REDIS_URL}"}}]})
    message = refusal(data)
    assert "tools.http_executors[0].headers.X-Leak" in message
    assert "DURABLE_TOOL_SECRETS" in message and "hunter2" not in message
    _allow(monkeypatch, tool_secrets="GITHUB_TOKEN")
    assert "DURABLE_TOOL_SECRETS" in refusal(data)
    ok = spec({"http_executors": [{"id": "api", "base_url": "https://api.example.com",
                                   "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}}]})
    load_spec_data(ok)


def test_mcp_env_and_headers_follow_the_same_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    _allow(monkeypatch, mcp_commands="python3")
    stdio = spec({"mcp": [{"id": "s", "command": "python3", "env": {"K": "${AWS_SECRET}"}}]})
    assert "tools.mcp[0].env.K" in refusal(stdio)
    http = spec({"mcp": [{"id": "h", "url": "https://mcp.example.com/mcp",
                          "headers": {"A": "${AWS_SECRET}"}}]})
    assert "tools.mcp[0].headers.A" in refusal(http)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://x/y", "http://", "localhost"])
def test_urls_must_be_http_with_a_host(url: str) -> None:
    data = spec({"http_executors": [{"id": "api", "base_url": url}]})
    with pytest.raises(SpecError) as info:
        load_spec_data(data, "s.yaml")
    assert "base_url" in str(info.value)


def test_a_tool_id_defined_twice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    _allow(monkeypatch, mcp_commands="python3")
    data = spec({"mcp": [{"id": "api", "command": "python3"}],
                 "http_executors": [{"id": "api", "base_url": "https://x.example"}]})
    assert "defined twice" in refusal(data)
