"""The mcp package's side of the MCP pool (worker/tools/mcp_pool.py): the transports, the
Strands `MCPClient` over them, and the pooled tool. Imported only when a spec's MCP server
is started (the mcp package takes ~0.5 s to import; a worker without one never pays it)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.client.stdio import stdio_client as open_stdio
from mcp.client.streamable_http import streamable_http_client
from strands.tools.mcp import MCPAgentTool, MCPClient
from strands.types.events import ToolResultEvent
from strands.types.tools import ToolGenerator, ToolResult, ToolUse

from strands_durable.spec.tools import McpServer
from strands_durable.worker.tools.mcp_pool import McpRefused, McpUnavailable
from strands_durable.worker.tools.results import error_result

if TYPE_CHECKING:
    from strands_durable.worker.tools.mcp_pool import McpPool, _Startup

__all__ = ["PooledMcpTool", "http_client", "stdio_client"]

Transport = Callable[[], AbstractAsyncContextManager[Any]]
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)  # the mcp package's defaults


def stdio_client(command: str, args: list[str], env: dict[str, str], startup: _Startup,
                 strands_timeout: int) -> MCPClient:
    """A client (not started) for a stdio server: the mcp package's safe default
    environment plus the spec's `env` (already substituted)."""
    params = StdioServerParameters(command=command, args=args,
                                   env={**get_default_environment(), **env})
    return MCPClient(_stdio_transport(params, startup), startup_timeout=strands_timeout)


def http_client(url: str, headers: dict[str, str], startup: _Startup,
                strands_timeout: int) -> MCPClient:
    """A client (not started) for a streamable-HTTP server (URL already checked)."""
    return MCPClient(_http_transport(url, headers, startup), startup_timeout=strands_timeout)


class _BoundedReads:
    """A transport's read stream that ends (EndOfStream) if the server has not finished
    its handshake by the startup deadline: the session then fails the pending initialize
    request, Strands' start() returns, and the transport stops the server."""

    def __init__(self, inner: Any, startup: _Startup) -> None:
        self._inner = inner
        self._startup = startup

    @property
    def last_context(self) -> Any:  # the mcp package restores the sender's context
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while not self._startup.done.is_set():
            remaining = self._startup.deadline - time.monotonic()
            if remaining <= 0:
                raise anyio.EndOfStream
            with anyio.move_on_after(remaining):
                return await self._inner.receive()
        return await self._inner.receive()

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _BoundedReads:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _BoundedReads:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _stdio_transport(params: StdioServerParameters, startup: _Startup) -> Transport:
    @asynccontextmanager
    async def opened() -> AsyncIterator[tuple[Any, Any]]:
        async with open_stdio(params) as streams:
            yield _BoundedReads(streams[0], startup), streams[1]

    return opened


def _http_transport(url: str, headers: dict[str, str], startup: _Startup) -> Transport:
    @asynccontextmanager
    async def opened() -> AsyncIterator[tuple[Any, Any]]:
        http = httpx2.AsyncClient(headers=headers, timeout=HTTP_TIMEOUT, follow_redirects=False)
        async with http, streamable_http_client(url, http_client=http) as streams:
            yield _BoundedReads(streams[0], startup), streams[1]

    return opened


class PooledMcpTool(MCPAgentTool):
    """A server's tool whose calls go to the pool's current client for that server (so a
    call after a restart reaches the new process); an error result makes the pool check
    the server, and stop it if it died."""

    def __init__(self, listed: MCPAgentTool, pool: McpPool, scope: str,
                 server: McpServer) -> None:
        super().__init__(listed.mcp_tool, listed.mcp_client, timeout=listed.timeout)
        self._pool, self._scope, self._server = pool, scope, server

    async def stream(self, tool_use: ToolUse, invocation_state: dict[str, Any],
                     **kwargs: Any) -> ToolGenerator:
        key = (self._scope, self._server.id)
        try:
            client = await self._pool.client(self._scope, self._server)
        except (McpRefused, McpUnavailable) as exc:
            yield ToolResultEvent(error_result(tool_use, str(exc)))
            return
        with self._pool.in_use(key):
            result: ToolResult = await client.call_tool_async(
                tool_use_id=tool_use["toolUseId"], name=self.mcp_tool.name,
                arguments=tool_use["input"], read_timeout_seconds=self.timeout,
                cancel_signal=getattr(invocation_state.get("agent"), "_cancel_signal", None))
        if result.get("status") == "error":
            await self._pool.check(key, client)
        yield ToolResultEvent(result)
