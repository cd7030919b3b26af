"""The MCP servers of the specs this worker runs: one started Strands `MCPClient` per spec
and server id, reused across steps, restarted when it died.

Every `tools()` call lists the server's tools through its live client: that round trip
is the health check. A client whose listing fails (the server process exited, the HTTP
connection broke) is stopped and started once more; a tool call that was running when
its server died returns the error to the model (Strands' MCP tool does), and the step's
next `tools()` brings a new server.

A stdio server is a process a spec asks for, so only commands the operator lists in
DURABLE_MCP_COMMANDS start, with a minimal environment (the mcp package's safe defaults)
plus the spec's `env`, never the worker's own (it holds the fleet's secrets). `${VAR}`
in `env` and in an HTTP server's `headers` is read from the worker's environment, for
names in DURABLE_TOOL_SECRETS only. An HTTP server's URL passes the network guard.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, cast

from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client
from strands.tools.mcp import MCPClient
from strands.types.tools import AgentTool

from strands_durable.scheduler.spec.tools import ENV_REFERENCE, McpServer
from strands_durable.settings import ToolPolicy
from strands_durable.worker.tools.net_guard import ToolRefused, check_url

__all__ = ["McpPool", "McpRefused", "McpUnavailable"]

log = logging.getLogger("durable.worker")

Key = tuple[str, str]  # (scope: the spec's digest, server id)


class McpRefused(ValueError):
    """The spec asks for an MCP server this fleet does not allow."""


class McpUnavailable(RuntimeError):
    """An allowed MCP server did not start or answer."""


class McpPool:
    def __init__(self, policy: ToolPolicy, environ: Mapping[str, str], *,
                 startup_timeout_s: int = 30, max_clients: int = 32) -> None:
        self.policy = policy
        self.environ = environ
        self.startup_timeout_s = startup_timeout_s
        self.max_clients = max_clients
        self._clients: OrderedDict[Key, MCPClient] = OrderedDict()
        self._locks: dict[Key, asyncio.Lock] = {}

    async def tools(self, scope: str, server: McpServer) -> list[AgentTool]:
        """The server's tools from a live client, started or restarted as needed."""
        key = (scope, server.id)
        async with self._locks.setdefault(key, asyncio.Lock()):
            client = self._clients.get(key)
            if client is not None:
                try:
                    return await self._listed(key, client)
                except Exception as exc:  # the server died or the connection broke
                    log.warning("MCP server %r stopped answering (%s); restarting it",
                                server.id, _one_line(exc))
                    await self._stop(key)
            client = await self._start(key, server)
            try:
                return await self._listed(key, client)
            except Exception as exc:
                await self._stop(key)
                raise McpUnavailable(f"MCP server {server.id!r} lists no tools: "
                                     f"{_one_line(exc)}") from None

    async def _listed(self, key: Key, client: MCPClient) -> list[AgentTool]:
        listed = await asyncio.to_thread(client.list_tools_sync)
        self._clients.move_to_end(key)
        return list(listed)

    async def _start(self, key: Key, server: McpServer) -> MCPClient:
        client = self._client(server)
        try:
            await asyncio.to_thread(client.start)
        except Exception as exc:
            raise McpUnavailable(f"MCP server {server.id!r} did not start: "
                                 f"{_one_line(exc)}") from None
        self._clients[key] = client
        while len(self._clients) > self.max_clients:
            await self._stop(next(iter(self._clients)))
        log.info("MCP server %r started (%s)", server.id, server.transport)
        return client

    def _client(self, server: McpServer) -> MCPClient:
        if server.command is not None:
            if server.command not in self.policy.commands:
                raise McpRefused(f"MCP server {server.id!r}: command {server.command!r} is "
                                 "not one this fleet may start (DURABLE_MCP_COMMANDS)")
            env = {**get_default_environment(),
                   **{name: self._substituted(server.id, value)
                      for name, value in server.env.items()}}
            params = StdioServerParameters(command=server.command, args=list(server.args),
                                           env=env)
            # cast: strands' transport type trails the mcp package's stream types.
            transport = cast(Any, lambda: stdio_client(params))
            return MCPClient(transport, startup_timeout=self.startup_timeout_s)
        url = str(server.url)
        try:
            check_url(url, self.policy)
        except ToolRefused as exc:
            raise McpRefused(f"MCP server {server.id!r}: {exc}") from None
        headers = {name: self._substituted(server.id, value)
                   for name, value in server.headers.items()}
        return MCPClient(url=url, headers=headers or None,
                         startup_timeout=self.startup_timeout_s)

    def _substituted(self, server_id: str, value: str) -> str:
        def lend(match: Any) -> str:
            name = match.group(1)
            if name not in self.policy.secrets:
                raise McpRefused(f"MCP server {server_id!r}: ${{{name}}} is not a variable "
                                 "this fleet lends to specs (DURABLE_TOOL_SECRETS)")
            if name not in self.environ:
                raise McpRefused(f"MCP server {server_id!r}: ${{{name}}} is not set on "
                                 "this worker")
            return self.environ[name]

        return ENV_REFERENCE.sub(lend, value)

    async def _stop(self, key: Key) -> None:
        client = self._clients.pop(key, None)
        if client is None:
            return
        try:
            await asyncio.to_thread(client.stop, None, None, None)
        except Exception as exc:  # a dead server may not stop cleanly: it is gone anyway
            log.debug("MCP server %s: stop failed: %s", key[1], _one_line(exc))

    async def close(self) -> None:
        for key in list(self._clients):
            await self._stop(key)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{exc.__class__.__name__}: {text[0] if text else ''}"[:300]
