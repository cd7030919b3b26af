"""Submit-time checks of a spec's tools against strands-cli's rules and this fleet's
tool policy (DURABLE_TOOL_* / DURABLE_MCP_COMMANDS, set by the operator): every tool an
agent or step names exists, and every tool the spec defines may run here. Each refusal
names the place in the spec, the agent and the tool, and the setting that would allow
it; nothing is imported, started or resolved here (the worker does that).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from strands_durable.errors import SpecError
from strands_durable.settings import ToolPolicy, current_tool_policy
from strands_durable.spec.model import Spec
from strands_durable.spec.problems import hint
from strands_durable.spec.tools import ToolsConfig, env_references
from strands_durable.tools import NATIVE_TOOLS, native_name

__all__ = ["agent_tools", "check_tools", "jit_tools", "tool_lists"]


def check_tools(spec: Spec, source: str, policy: ToolPolicy | None = None) -> None:
    policy = policy or current_tool_policy()
    tools = spec.tools or ToolsConfig()
    _check_unique_ids(tools, source)
    defined = set(tools.global_ids())
    for path, agent, names in tool_lists(spec):
        for name in names:
            if native_name(name) is not None:
                _check_python(name, path, _users(spec, name), source, policy)
            elif name not in defined:
                known = sorted(defined | set(NATIVE_TOOLS))
                raise SpecError(source, path, f"agent {agent!r}: unknown tool {name!r}"
                                f"{hint(name, known)}; the spec defines: "
                                f"{', '.join(sorted(defined)) or 'no tools'} (native tools: "
                                f"{', '.join(NATIVE_TOOLS)})")
    for i, python in enumerate(tools.python):
        _check_python(python.callable, f"tools.python[{i}]", _users(spec, python.callable),
                      source, policy)
    for i, server in enumerate(tools.mcp):
        _check_mcp(server.model_dump(), f"tools.mcp[{i}]", _users(spec, server.id), source,
                   policy)
    for i, executor in enumerate(tools.http_executors):
        path = f"tools.http_executors[{i}]"
        _check_url(executor.base_url, f"{path}.base_url", source)
        _check_secrets(executor.headers, f"{path}.headers", source, policy)
    _check_retrieval(spec, defined, source, policy)


def jit_tools(spec: Spec) -> list[str]:
    """`context_policy.retrieval.jit_tools`: tools strands-cli adds to every agent."""
    retrieval = spec.context_policy.retrieval if spec.context_policy else None
    return list(retrieval.jit_tools) if retrieval is not None else []


def agent_tools(spec: Spec, agent_id: str, overrides: list[str] | None = None) -> ToolsConfig:
    """The tools agent `agent_id` gets: its own (a step's `tool_overrides` win over its
    list) and the retrieval tools. strands-cli replaces "every global tool" (an agent
    with no `tools:` list) by the retrieval tools alone; here they are added to it."""
    jit = jit_tools(spec)
    if not jit:
        return spec.tools_for(agent_id, overrides)
    own = overrides if overrides is not None else spec.agents[agent_id].tools
    wanted = list(own) if own is not None else (spec.tools or ToolsConfig()).global_ids()
    # Through tools_for, so security.guardrails.allow_tools bounds these too.
    return spec.tools_for(agent_id, wanted + [name for name in jit if name not in wanted])


def _check_retrieval(spec: Spec, defined: set[str], source: str, policy: ToolPolicy) -> None:
    retrieval = spec.context_policy.retrieval if spec.context_policy else None
    if retrieval is None:
        return
    if retrieval.mcp_servers:
        raise SpecError(source, "context_policy.retrieval.mcp_servers", "a placeholder in "
                        "strands-cli (it starts and attaches nothing); list the servers "
                        "under tools.mcp and name them in the agents' tools instead")
    everyone = list(spec.agents)
    for i, name in enumerate(retrieval.jit_tools):
        path = f"context_policy.retrieval.jit_tools[{i}]"
        if native_name(name) is not None:
            _check_python(name, path, everyone, source, policy)
        elif name not in defined:
            raise SpecError(source, path, f"unknown tool {name!r}"
                            f"{hint(name, set(NATIVE_TOOLS) | defined)}; retrieval tools "
                            "are native tools (grep, head, tail, search, ...) or tool ids "
                            "the spec defines")


def tool_lists(spec: Spec) -> Iterator[tuple[str, str, list[str]]]:
    """(path, agent, tool ids) of every tool list: agents' `tools` and steps' overrides."""
    for agent_id, agent in spec.agents.items():
        if agent.tools is not None:
            yield f"agents.{agent_id}.tools", agent_id, agent.tools
    yield from _overrides(spec.pattern.config.model_dump(), "pattern.config")


def _overrides(node: Any, path: str) -> Iterator[tuple[str, str, list[str]]]:
    if isinstance(node, dict):
        agent = str(node.get("agent", "?"))
        if isinstance(node.get("tool_overrides"), list):
            yield f"{path}.tool_overrides", agent, node["tool_overrides"]
        if path.endswith("worker_template") and isinstance(node.get("tools"), list):
            yield f"{path}.tools", agent, node["tools"]
        for key, value in node.items():
            yield from _overrides(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _overrides(value, f"{path}[{i}]")


def _users(spec: Spec, tool_id: str) -> list[str]:
    """The agents that get `tool_id` (no list: every global tool), for messages."""
    short = native_name(tool_id)
    return [agent_id for agent_id, agent in spec.agents.items()
            if agent.tools is None or tool_id in agent.tools
            or (short is not None and short in agent.tools)] or ["(none)"]


def _check_unique_ids(tools: ToolsConfig, source: str) -> None:
    seen: set[str] = set()
    for tool_id in tools.global_ids():
        if tool_id in seen:
            raise SpecError(source, "tools", f"tool id {tool_id!r} is defined twice")
        seen.add(tool_id)


def _check_python(reference: str, path: str, users: list[str], source: str,
                  policy: ToolPolicy) -> None:
    native = native_name(reference)
    agents = ", ".join(users)
    if native == "python_exec" and not policy.tool_python_exec:
        raise SpecError(source, path, f"tool 'python_exec' (agents: {agents}) runs the "
                        "model's code on the worker; this fleet does not allow it "
                        "(DURABLE_TOOL_PYTHON_EXEC)")
    if native is None and not policy.allows_module(reference):
        raise SpecError(source, path, f"python tool {reference!r} (agents: {agents}) is "
                        "neither a native tool nor under a module prefix this fleet "
                        f"allows (DURABLE_TOOL_MODULES); native tools: "
                        f"{', '.join(NATIVE_TOOLS)}")


def _check_mcp(server: dict[str, Any], path: str, agents: list[str], source: str,
               policy: ToolPolicy) -> None:
    who = f"MCP server {server['id']!r} (agents: {', '.join(agents)})"
    if server.get("command") is not None:
        if server["command"] not in policy.commands:
            raise SpecError(source, f"{path}.command", f"{who}: command "
                            f"{server['command']!r} is not one this fleet may start "
                            f"(DURABLE_MCP_COMMANDS: {', '.join(policy.commands) or 'none'})")
        _check_secrets(server.get("env") or {}, f"{path}.env", source, policy)
    else:
        _check_url(str(server.get("url")), f"{path}.url", source)
        _check_secrets(server.get("headers") or {}, f"{path}.headers", source, policy)


def _check_url(url: str, path: str, source: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SpecError(source, path, f"{url[:200]!r} is not an http(s) URL with a host")


def _check_secrets(values: dict[str, str], path: str, source: str, policy: ToolPolicy) -> None:
    for key, value in values.items():
        for name in env_references(value):
            if name not in policy.secrets:
                raise SpecError(source, f"{path}.{key}", f"${{{name}}} names a variable of "
                                "the worker's environment this fleet does not lend to "
                                f"specs (DURABLE_TOOL_SECRETS: "
                                f"{', '.join(policy.secrets) or 'none'})")
