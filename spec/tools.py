"""A spec's `tools:` section (strands-cli's schema) and which tools each agent gets.

Three kinds, as strands-cli defines them:
- `python`: a native tool name (core/tools.py) or an import path of a `@tool` function
  or a TOOL_SPEC module, as a string or `{callable: ...}`;
- `mcp`: MCP servers, stdio (`command`, `args`, `env`) or HTTP (`url`, `headers`);
- `http_executors`: REST APIs the model calls by path (`base_url`, `headers`,
  `timeout_ms`); header values may name the worker's environment as `${VAR}`.

Which tools an agent gets (`tool_ids_for`), as strands-cli's `build_agent` resolves
them: a step's `tool_overrides` (chain steps, orchestrator workers) win over the
agent's `tools:` list; with neither list, the agent gets every global tool; with a
list, the tools whose id it names (a python tool's id is its reference as written, a
server's or executor's its `id`, a native tool also by its short name). strands-cli
hands every MCP server to every agent whatever its list says; here a listed agent gets
only the servers it names, as the schema documents.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, model_validator

from strands_durable.spec.steps import SpecModel
from strands_durable.tools import native_name

__all__ = [
    "ENV_REFERENCE",
    "HttpExecutor",
    "McpServer",
    "PythonTool",
    "ToolsConfig",
    "env_references",
]

# `${NAME}` in an http_executor's or MCP server's header: the worker's environment.
ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def env_references(text: str) -> list[str]:
    return ENV_REFERENCE.findall(text)


class PythonTool(SpecModel):
    """`tools.python[i]`: the shorthand string or `{callable: ...}`."""

    callable: str

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"callable": data} if isinstance(data, str) else data

    @property
    def native(self) -> str | None:
        return native_name(self.callable)


class McpServer(SpecModel):
    """An MCP server whose tools agents may call: a stdio `command` or a `url`."""

    id: str
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"


class HttpExecutor(SpecModel):
    """An HTTP tool: requests to `base_url` (headers may name lent secrets as `${NAME}`)."""

    id: str
    base_url: str
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_ms: int = 30_000
    description: str | None = None
    common_endpoints: list[dict[str, Any]] = Field(default_factory=list)
    response_format: str | None = None
    authentication_info: str | None = None


class ToolsConfig(SpecModel):
    """The tools a spec defines: python callables, MCP servers and HTTP executors."""

    python: list[PythonTool] = Field(default_factory=list)
    mcp: list[McpServer] = Field(default_factory=list)
    http_executors: list[HttpExecutor] = Field(default_factory=list)

    def global_ids(self) -> list[str]:
        """Every tool id the spec defines, in definition order."""
        return ([tool.callable for tool in self.python]
                + [server.id for server in self.mcp]
                + [executor.id for executor in self.http_executors])

    def selected(self, wanted: list[str] | None) -> ToolsConfig:
        """The tools an agent gets for `wanted` (None: every global tool). A native tool
        listed by name needs no `tools.python` entry (strands-cli loads it from its
        registry); ids that match nothing are the spec check's business."""
        if wanted is None:
            return self
        ids = set(wanted)
        python = [tool for tool in self.python
                  if tool.callable in ids or (tool.native is not None and tool.native in ids)]
        have = {tool.native or tool.callable for tool in python}
        python += [PythonTool(callable=name) for name in wanted
                   if native_name(name) is not None and native_name(name) not in have]
        return ToolsConfig(
            python=_unique(python),
            mcp=[server for server in self.mcp if server.id in ids],
            http_executors=[executor for executor in self.http_executors
                            if executor.id in ids],
        )

    @property
    def empty(self) -> bool:
        return not (self.python or self.mcp or self.http_executors)


def _unique(tools: list[PythonTool]) -> list[PythonTool]:
    seen: set[str] = set()
    out: list[PythonTool] = []
    for tool in tools:
        name = tool.native or tool.callable
        if name not in seen:
            seen.add(name)
            out.append(tool)
    return out
