"""Submit-time enforcement of `security.guardrails`.

strands-cli parses these and only logs them; a guardrail that is written and then not
kept is worse than none, so here each one is kept or the spec is refused, naming the
setting and the tool:

- `allow_tools`: every tool the spec defines, every tool an agent or step names, each
  retrieval tool (`context_policy.retrieval.jit_tools`) and the `Skill` tool that
  `skills` bring must be on the list (a native tool by its short name, strands-cli's
  full path or a legacy `strands_tools` path). So no agent can be given a tool outside
  it; the worker filters once more (`Spec.tools_for`).
- `deny_network`: no tool that reaches the network (HTTP executors, MCP servers over
  HTTP, the native web tools), and none whose network use cannot be known here (an
  imported python tool, a stdio MCP server, `python_exec`). The model provider itself is
  not a tool: the agent still calls its model.
- `pii_redaction: true` is refused: logs, events and artifacts are not scanned for
  PII (only traces are, under `telemetry.redact`), and accepting it would be a promise
  not kept.

Pure: reads the spec only.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

from strands_durable.errors import SpecError
from strands_durable.spec.model import Spec
from strands_durable.spec.sections import Guardrails
from strands_durable.spec.tool_checks import jit_tools, tool_lists
from strands_durable.spec.tools import ToolsConfig
from strands_durable.tools import native_name

__all__ = ["NETWORK_TOOLS", "SKILL_TOOL", "check_security", "tool_allowed"]

# Native tools whose whole purpose is the network.
NETWORK_TOOLS = frozenset({"duckduckgo_search", "http_request", "tavily_search", "web_fetch"})
# Native tools whose network use cannot be bounded here.
UNKNOWABLE_TOOLS = frozenset({"python_exec"})
# The tool `skills` give every agent (strands-cli's skill loader).
SKILL_TOOL = "Skill"

_WHERE = "security.guardrails"
SHOWN_TOOLS = 20  # allow_tools entries quoted in a refusal


def tool_allowed(allow_tools: list[str] | None, tool_id: str) -> bool:
    """Whether `allow_tools` (None: no restriction) permits `tool_id`."""
    if allow_tools is None:
        return True
    allowed = set(allow_tools)
    short = native_name(tool_id)
    # A native tool under any of its names (short, strands-cli's path, legacy path).
    return tool_id in allowed or (short is not None and any(
        native_name(entry) == short for entry in allowed))


def check_security(spec: Spec, source: str) -> None:
    guardrails = spec.security.guardrails if spec.security else None
    if guardrails is None:
        return
    if guardrails.pii_redaction:
        raise SpecError(source, f"{_WHERE}.pii_redaction",
                        "PII redaction of logs, events and artifacts is not implemented "
                        "here (strands-cli parses it without enforcing it either; "
                        "telemetry.redact masks PII in traces); remove it or set it to "
                        "false rather than rely on a redaction that does not happen")
    if guardrails.allow_tools is not None:
        _check_allow_list(spec, guardrails, source)
    if guardrails.deny_network:
        _check_no_network(spec, source)


def _check_allow_list(spec: Spec, guardrails: Guardrails, source: str) -> None:
    allowed = guardrails.allow_tools
    listed = allowed or []
    shown = ", ".join(listed[:SHOWN_TOOLS]) or "no tool at all"
    if len(listed) > SHOWN_TOOLS:  # a message, not the list again
        shown += f" and {len(listed) - SHOWN_TOOLS} more"
    for path, who, tool_id in _every_tool(spec):
        if not tool_allowed(allowed, tool_id):
            raise SpecError(source, path,
                            f"{who}tool {tool_id!r} is not in {_WHERE}.allow_tools "
                            f"(it permits {shown}); add it there or remove it")


def _site(url: str) -> str:
    """A URL's scheme and host for a message: never its user, password, or a long path."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        host = None
    return f"{parts.scheme}://{host}"[:200] if host else "its base_url"


def _every_tool(spec: Spec) -> Iterator[tuple[str, str, str]]:
    """(path, who, tool id) of every tool the spec defines, names or brings."""
    tools = spec.tools or ToolsConfig()
    for i, python in enumerate(tools.python):
        yield f"tools.python[{i}]", "", python.callable
    for i, server in enumerate(tools.mcp):
        yield f"tools.mcp[{i}]", "MCP server ", server.id
    for i, executor in enumerate(tools.http_executors):
        yield f"tools.http_executors[{i}]", "HTTP executor ", executor.id
    for path, agent, names in tool_lists(spec):
        for name in names:
            yield path, f"agent {agent!r}: ", name
    for i, name in enumerate(jit_tools(spec)):
        yield f"context_policy.retrieval.jit_tools[{i}]", "retrieval ", name
    if spec.skills:
        yield "skills", "the skills' ", SKILL_TOOL


def _check_no_network(spec: Spec, source: str) -> None:
    tools = spec.tools or ToolsConfig()
    refuse = f"{_WHERE}.deny_network is set and"
    if tools.http_executors:
        executor = tools.http_executors[0]
        raise SpecError(source, "tools.http_executors[0]",
                        f"{refuse} HTTP executor {executor.id!r} calls "
                        f"{_site(executor.base_url)}")
    if tools.mcp:
        server = tools.mcp[0]
        what = ("is reached over HTTP" if server.transport == "http" else
                "is a local process whose network use cannot be checked")
        raise SpecError(source, "tools.mcp[0]", f"{refuse} MCP server {server.id!r} {what}")
    named = [(f"tools.python[{i}]", python.callable) for i, python in enumerate(tools.python)]
    named += [(path, name) for path, _, names in tool_lists(spec) for name in names]
    named += [(f"context_policy.retrieval.jit_tools[{i}]", name)
              for i, name in enumerate(jit_tools(spec))]
    for path, name in named:
        short = native_name(name)
        if short in NETWORK_TOOLS:
            raise SpecError(source, path, f"{refuse} tool {name!r} reaches the network")
        if short in UNKNOWABLE_TOOLS or (short is None and _is_python_tool(tools, name)):
            raise SpecError(source, path, f"{refuse} tool {name!r} runs code whose network "
                            "use cannot be checked; remove one or the other")


def _is_python_tool(tools: ToolsConfig, name: str) -> bool:
    return any(python.callable == name for python in tools.python)
