"""Submit-time checks of a spec's tools against strands-cli's rules and this fleet's
tool policy (DURABLE_TOOL_* / DURABLE_MCP_COMMANDS, set by the operator, widened for
one `durable run` by its grants: spec/grants.py): every tool an agent or step names
exists, and every tool the spec defines may run here. Each refusal names the place in
the spec, the agent and the tool, the setting that would allow it and the grant of
`durable run`; nothing is imported, started or resolved here (the worker does that).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from strands_durable.errors import SpecError
from strands_durable.settings import ToolPolicy, current_tool_policy
from strands_durable.spec.grants import (
    ALLOW,
    MCP_COMMAND,
    SECRET,
    TOOL_MODULE,
    Grant,
    Grants,
    record_needs,
    widen,
)
from strands_durable.spec.model import Spec
from strands_durable.spec.problems import hint
from strands_durable.spec.tools import McpServer, ToolsConfig, env_references
from strands_durable.tools import NATIVE_TOOLS, native_name

__all__ = ["Need", "agent_tools", "check_tools", "jit_tools", "tool_lists", "tool_needs"]


def check_tools(spec: Spec, source: str, policy: ToolPolicy | None = None,
                grants: Grants | None = None) -> None:
    """Refuse a spec whose tools are unknown or malformed, or need more than `policy`
    (default: this process's) widened by `grants` (default: this context's) allows;
    while `surveying()`, what a grant would allow is recorded instead."""
    policy = widen(policy or current_tool_policy(), grants)
    tools = spec.tools or ToolsConfig()
    _check_unique_ids(tools, source)
    defined = set(tools.global_ids())
    for path, agent, names in tool_lists(spec):
        for name in names:
            if native_name(name) is None and name not in defined:
                known = sorted(defined | set(NATIVE_TOOLS))
                raise SpecError(source, path, f"agent {agent!r}: unknown tool {name!r}"
                                f"{hint(name, known)}; the spec defines: "
                                f"{', '.join(sorted(defined)) or 'no tools'} (native tools: "
                                f"{', '.join(NATIVE_TOOLS)})")
    for i, server in enumerate(tools.mcp):
        if server.command is None:
            _check_url(str(server.url), f"tools.mcp[{i}].url", source)
    for i, executor in enumerate(tools.http_executors):
        _check_url(executor.base_url, f"tools.http_executors[{i}].base_url", source)
    _check_retrieval(spec, defined, source)
    needs = tool_needs(spec, policy)
    if needs and not record_needs([need.grant for need in needs]):
        raise SpecError(source, needs[0].path, needs[0].problem)


@dataclass(frozen=True)
class Need:
    """Something the spec's tools do that `policy` does not allow, and the grant of
    `durable run` that would allow it on the user's own machine."""

    path: str
    grant: Grant
    problem: str


def tool_needs(spec: Spec, policy: ToolPolicy) -> list[Need]:
    """Every use of a tool beyond `policy`, in the spec's order (pure)."""
    tools = spec.tools or ToolsConfig()
    needs: list[Need] = []
    for path, _, names in tool_lists(spec):
        for name in names:
            if native_name(name) is not None:
                needs += _python_needs(name, path, _users(spec, name), policy)
    for i, python in enumerate(tools.python):
        needs += _python_needs(python.callable, f"tools.python[{i}]",
                               _users(spec, python.callable), policy)
    for i, server in enumerate(tools.mcp):
        needs += _mcp_needs(server, f"tools.mcp[{i}]", _users(spec, server.id), policy)
    for i, executor in enumerate(tools.http_executors):
        needs += _secret_needs(executor.headers, f"tools.http_executors[{i}].headers",
                               policy)
    for i, name in enumerate(jit_tools(spec)):
        if native_name(name) is not None:
            needs += _python_needs(name, f"context_policy.retrieval.jit_tools[{i}]",
                                   list(spec.agents), policy)
    return needs


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


def _check_retrieval(spec: Spec, defined: set[str], source: str) -> None:
    retrieval = spec.context_policy.retrieval if spec.context_policy else None
    if retrieval is None:
        return
    if retrieval.mcp_servers:
        raise SpecError(source, "context_policy.retrieval.mcp_servers", "a placeholder in "
                        "strands-cli (it starts and attaches nothing); list the servers "
                        "under tools.mcp and name them in the agents' tools instead")
    for i, name in enumerate(retrieval.jit_tools):
        if native_name(name) is None and name not in defined:
            raise SpecError(source, f"context_policy.retrieval.jit_tools[{i}]",
                            f"unknown tool {name!r}{hint(name, set(NATIVE_TOOLS) | defined)}"
                            "; retrieval tools are native tools (grep, head, tail, search, "
                            "...) or tool ids the spec defines")


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


LOCAL = "durable run on your own machine:"


def _python_needs(reference: str, path: str, users: list[str],
                  policy: ToolPolicy) -> list[Need]:
    native = native_name(reference)
    agents = ", ".join(users)
    if native == "python_exec" and not policy.tool_python_exec:
        return [Need(path, Grant(ALLOW, "python_exec"), f"tool 'python_exec' (agents: "
                     f"{agents}) runs the model's code on the worker; this fleet does not "
                     f"allow it (DURABLE_TOOL_PYTHON_EXEC; {LOCAL} --allow python_exec)")]
    if native is None and not policy.allows_module(reference):
        module = reference.partition(":")[0]
        return [Need(path, Grant(TOOL_MODULE, module), f"python tool {reference!r} (agents: "
                     f"{agents}) is neither a native tool nor under a module prefix this "
                     f"fleet allows (DURABLE_TOOL_MODULES; {LOCAL} --allow-tool-module "
                     f"{module}); native tools: {', '.join(NATIVE_TOOLS)}")]
    return []


def _mcp_needs(server: McpServer, path: str, agents: list[str],
               policy: ToolPolicy) -> list[Need]:
    if server.command is None:
        return _secret_needs(server.headers, f"{path}.headers", policy)
    needs = []
    if server.command not in policy.commands:
        needs.append(Need(f"{path}.command", Grant(MCP_COMMAND, server.command),
                          f"MCP server {server.id!r} (agents: {', '.join(agents)}): command "
                          f"{server.command!r} is not one this fleet may start "
                          f"(DURABLE_MCP_COMMANDS: {', '.join(policy.commands) or 'none'}; "
                          f"{LOCAL} --allow-mcp-command {server.command})"))
    return needs + _secret_needs(server.env, f"{path}.env", policy)


def _check_url(url: str, path: str, source: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SpecError(source, path, f"{url[:200]!r} is not an http(s) URL with a host")


def _secret_needs(values: dict[str, str], path: str, policy: ToolPolicy) -> list[Need]:
    return [Need(f"{path}.{key}", Grant(SECRET, name), f"${{{name}}} names a variable of "
                 "the worker's environment this fleet does not lend to specs "
                 f"(DURABLE_TOOL_SECRETS: {', '.join(policy.secrets) or 'none'}; {LOCAL} "
                 f"--allow-secret {name})")
            for key, value in values.items() for name in env_references(value)
            if name not in policy.secrets]
