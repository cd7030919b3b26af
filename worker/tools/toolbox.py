"""The tools of a step's agent, built on this worker from the spec's `tools:` section.

Python tools (native and import paths) and http_executors are built once per spec and
agent selection and reused; MCP servers come from the worker's `McpPool` (one server
per spec and id, reused across steps, restarted if it died). A tool that cannot be
built fails the step with a `ToolUnavailable` naming agent and tool: a refusal (not
allowed here) fails it at once, an MCP server that did not start is retried like any
transient failure.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Mapping

from strands.types.tools import AgentTool

from strands_durable.errors import StepFailed
from strands_durable.models import StepJob
from strands_durable.settings import ToolPolicy
from strands_durable.spec.grants import widen
from strands_durable.spec.model import Spec
from strands_durable.spec.tool_checks import agent_tools
from strands_durable.spec.tools import ToolsConfig
from strands_durable.worker.tools.http_executor import build_http_executor
from strands_durable.worker.tools.mcp_pool import McpPool, McpRefused, McpUnavailable
from strands_durable.worker.tools.native import load_native
from strands_durable.worker.tools.net_guard import ToolRefused
from strands_durable.worker.tools.python_tools import ToolLoadError, load_python_tool
from strands_durable.worker.tools.skill import skill_tool, skills_allowed

MAX_CACHED_SELECTIONS = 256


class Toolbox:
    def __init__(self, policy: ToolPolicy, environ: Mapping[str, str] | None = None) -> None:
        # The operator's policy, widened by `durable run`'s grants when this in-process
        # worker runs that command's session (an `arq worker` has none).
        self.policy = widen(policy)
        self.environ = environ if environ is not None else os.environ
        self._mcp: McpPool | None = None  # started with the first MCP server a step needs
        self._static: OrderedDict[tuple[str, str], list[AgentTool]] = OrderedDict()

    async def tools_for(self, spec: Spec, scope: str, job: StepJob) -> list[AgentTool]:
        """The tools of the step's agent (its step's `tool_overrides` win over its list),
        the retrieval tools of `context_policy.retrieval.jit_tools`, and `Skill` when the
        spec has skills (strands-cli gives both to every agent)."""
        overrides = job.meta.get("tool_overrides")
        selection = agent_tools(spec, job.agent, list(overrides) if overrides else None)
        if selection.empty and not skills_allowed(spec):
            return []
        try:
            tools = list(self._static_tools(spec, scope, job.agent, overrides, selection))
            for server in selection.mcp:
                tools += await self.mcp().tools(scope, server)
        except (ToolLoadError, ToolRefused, McpRefused) as exc:
            raise StepFailed(job.session_id, job.key, f"agent {job.agent!r}: {exc}",
                             retryable=False) from None
        except McpUnavailable as exc:
            raise StepFailed(job.session_id, job.key, f"agent {job.agent!r}: {exc}") from None
        return tools

    def _static_tools(self, spec: Spec, scope: str, agent: str, overrides: object,
                      selection: ToolsConfig) -> list[AgentTool]:
        key = (scope, f"{agent}\0{overrides!r}")
        tools = self._static.get(key)
        if tools is None:
            tools = []
            for python in selection.python:
                if python.native is not None:
                    tools.append(load_native(python.native))
                else:
                    tools += load_python_tool(python.callable, self.policy)
            tools += [build_http_executor(executor, self.policy, self.environ)
                      for executor in selection.http_executors]
            if skills_allowed(spec):
                tools.append(skill_tool(spec))
            self._static[key] = tools
            while len(self._static) > MAX_CACHED_SELECTIONS:
                self._static.popitem(last=False)
        self._static.move_to_end(key)
        return tools

    def mcp(self) -> McpPool:
        if self._mcp is None:
            self._mcp = McpPool(self.policy, self.environ)
        return self._mcp

    async def close(self) -> None:
        if self._mcp is not None:
            await self._mcp.close()
