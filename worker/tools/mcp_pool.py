"""The MCP servers of the specs this worker runs: one started Strands `MCPClient` per
scope (the spec's digest) and server id, reused across steps, restarted when it died.

Death is seen two ways. Every `tools()` call lists the server's tools through its live
client: that round trip is the health check, and a client whose listing fails or hangs
(the server process exited, the HTTP connection broke) is stopped and started again.
A tool call that returns an error makes the pool run the same check at once: the call's
error goes to the model, and its next call (the tools send each call to the pool's
current client for their server) or the step's next `tools()` gets a new server.

A stdio server is a process a spec asks for, so only commands the operator lists in
DURABLE_MCP_COMMANDS start, with a minimal environment (the mcp package's safe defaults)
plus the spec's `env`, never the worker's own (it holds the fleet's secrets). `${VAR}`
in `env` and in an HTTP server's `headers` is read from the worker's environment, for
names in DURABLE_TOOL_SECRETS only. An HTTP server's URL passes the network guard and
its redirects are not followed (they would carry the lent headers elsewhere).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from strands_durable.settings import ToolPolicy
from strands_durable.spec.tools import ENV_REFERENCE, McpServer
from strands_durable.worker.tools.net_guard import ToolRefused, check_url

if TYPE_CHECKING:  # the mcp package takes ~0.5 s to import: worker/tools/mcp_transport.py
    from strands.tools.mcp import MCPAgentTool, MCPClient
    from strands.types.tools import AgentTool

__all__ = ["McpPool", "McpRefused", "McpUnavailable"]

log = logging.getLogger("durable.worker")

Key = tuple[str, str]  # (scope: the spec's digest, server id)
# Strands' own startup timeout is only a backstop: when it fires first, its stop() waits
# for a handshake that may never come. The transport's own bound ends that handshake.
STRANDS_TIMEOUT_MARGIN_S = 10


class McpRefused(ValueError):
    """The spec asks for an MCP server this fleet does not allow."""


class McpUnavailable(RuntimeError):
    """An allowed MCP server did not start or answer."""


@dataclass
class _Startup:
    """Until `done` is set, the server's messages must come by `deadline` (monotonic)."""

    timeout_s: float
    deadline: float = 0.0
    done: threading.Event = field(default_factory=threading.Event)


class McpPool:
    def __init__(self, policy: ToolPolicy, environ: Mapping[str, str], *,
                 startup_timeout_s: float = 30.0, max_clients: int = 32) -> None:
        self.policy = policy
        self.environ = environ
        self.startup_timeout_s = startup_timeout_s
        self.max_clients = max_clients
        self._clients: OrderedDict[Key, MCPClient] = OrderedDict()
        self._locks: dict[Key, asyncio.Lock] = {}
        # Per key: callers holding or awaiting its lock, and tool calls in flight; a key
        # with either is never evicted, one with neither and no client loses its lock.
        self._users: Counter[Key] = Counter()
        self._calls: Counter[Key] = Counter()
        self._closed = False

    async def tools(self, scope: str, server: McpServer) -> list[AgentTool]:
        """The server's tools from a live client, started or restarted as needed."""
        key = (scope, server.id)
        async with self._guard(key):
            client = self._clients.get(key)
            if client is not None:
                try:
                    listed = await self._listed(client)
                except Exception as exc:  # the server died or the connection broke
                    log.warning("MCP server %r stopped answering (%s); restarting it",
                                server.id, _one_line(exc))
                    await self._stop(key)
                else:
                    return self._pooled(listed, scope, server)
            client = await self._start(key, server)
            try:
                listed = await self._listed(client)
            except Exception as exc:
                await self._stop(key)
                raise McpUnavailable(f"MCP server {server.id!r} lists no tools: "
                                     f"{_one_line(exc)}") from None
            return self._pooled(listed, scope, server)

    async def client(self, scope: str, server: McpServer) -> MCPClient:
        """The server's started client (starting one if it was stopped), unchecked."""
        key = (scope, server.id)
        async with self._guard(key):
            client = self._clients.get(key)
            if client is None:
                client = await self._start(key, server)
            self._clients.move_to_end(key)
            return client

    async def check(self, key: Key, client: MCPClient) -> None:
        """After a failed call: stop `client` if its server no longer answers."""
        async with self._guard(key):
            if self._clients.get(key) is not client:
                return  # already stopped or replaced
            try:
                await self._listed(client)
            except Exception as exc:
                log.warning("MCP server %r stopped answering (%s); stopping it",
                            key[1], _one_line(exc))
                await self._stop(key)

    async def close(self) -> None:
        """Stop every server (worker shutdown); the pool starts none afterwards."""
        self._closed = True
        for key in list(self._clients):
            async with self._guard(key):
                await self._stop(key)

    @asynccontextmanager
    async def _guard(self, key: Key) -> AsyncIterator[None]:
        """The key's lock: one start, restart or stop at a time per server."""
        self._users[key] += 1
        try:
            async with self._locks.setdefault(key, asyncio.Lock()):
                yield
        finally:
            self._users[key] -= 1
            if not self._users[key]:
                del self._users[key]
                if key not in self._clients:
                    self._locks.pop(key, None)

    @contextmanager
    def in_use(self, key: Key) -> Iterator[None]:
        """A tool call to the key's server is in flight."""
        self._calls[key] += 1
        try:
            yield
        finally:
            self._calls[key] -= 1
            if not self._calls[key]:
                del self._calls[key]

    def _pooled(self, listed: list[MCPAgentTool], scope: str,
                server: McpServer) -> list[AgentTool]:
        from strands_durable.worker.tools.mcp_transport import PooledMcpTool

        return [PooledMcpTool(tool, self, scope, server) for tool in listed]

    async def _listed(self, client: MCPClient) -> list[MCPAgentTool]:
        """Every tool (all pages), bounded: a hung listing stops the client, which
        also frees the thread waiting on it."""
        try:
            return await asyncio.wait_for(asyncio.to_thread(_list_all, client),
                                          self.startup_timeout_s)
        except TimeoutError:
            raise McpUnavailable(f"no answer within {self.startup_timeout_s:g} s") from None

    async def _start(self, key: Key, server: McpServer) -> MCPClient:
        if self._closed:
            raise McpUnavailable(f"MCP server {server.id!r}: the worker is shutting down")
        startup = _Startup(self.startup_timeout_s)
        client = await asyncio.to_thread(self._client, server, startup)
        began = time.monotonic()
        try:
            await asyncio.to_thread(_start, client, startup)
        except Exception as exc:
            if time.monotonic() - began >= self.startup_timeout_s:
                cause = f"no handshake within {self.startup_timeout_s:g} s"
            else:
                cause = _one_line(_root(exc))
            raise McpUnavailable(f"MCP server {server.id!r} did not start: {cause}") from None
        if self._closed:  # close() ran while it started
            await asyncio.to_thread(_stop_quietly, client, server.id)
            raise McpUnavailable(f"MCP server {server.id!r}: the worker is shutting down")
        self._clients[key] = client
        await self._evict()
        log.info("MCP server %r started (%s)", server.id, server.transport)
        return client

    async def _evict(self) -> None:
        """Least recently used first, never one with a call in flight or held."""
        for key in list(self._clients):
            if len(self._clients) <= self.max_clients:
                return
            if self._users[key] or self._calls[key]:
                continue
            async with self._guard(key):
                await self._stop(key)

    def _client(self, server: McpServer, startup: _Startup) -> MCPClient:
        """A client (not started) for the server, once the policy allows it."""
        from strands_durable.worker.tools import mcp_transport

        strands_timeout = int(self.startup_timeout_s) + STRANDS_TIMEOUT_MARGIN_S
        if server.command is not None:
            if server.command not in self.policy.commands:
                raise McpRefused(f"MCP server {server.id!r}: command {server.command!r} is "
                                 "not one this fleet may start (DURABLE_MCP_COMMANDS)")
            env = {name: self._substituted(server.id, value)
                   for name, value in server.env.items()}
            return mcp_transport.stdio_client(server.command, list(server.args), env, startup,
                                              strands_timeout)
        url = str(server.url or "")
        try:
            check_url(url, self.policy)  # http(s) only, to an address the policy allows
        except ToolRefused as exc:
            raise McpRefused(f"MCP server {server.id!r}: {exc}") from None
        headers = {name: self._substituted(server.id, value)
                   for name, value in server.headers.items()}
        return mcp_transport.http_client(url, headers, startup, strands_timeout)

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
        """Stop and forget the key's client (its lock held by the caller)."""
        client = self._clients.pop(key, None)
        if client is not None:
            await asyncio.to_thread(_stop_quietly, client, key[1])


def _start(client: MCPClient, startup: _Startup) -> None:
    startup.deadline = time.monotonic() + startup.timeout_s
    client.start()
    startup.done.set()  # from here on the transport waits for the server indefinitely


def _list_all(client: MCPClient) -> list[MCPAgentTool]:
    tools: list[MCPAgentTool] = []
    token: str | None = None
    while True:
        page = client.list_tools_sync(pagination_token=token)
        tools += page
        token = page.pagination_token
        if not token:
            return tools


def _stop_quietly(client: MCPClient, server_id: str) -> None:
    try:
        client.stop(None, None, None)
    except Exception as exc:  # a dead server's client reports why it died: it is gone
        log.debug("MCP server %r: stopped after %s", server_id, _one_line(exc))


def _root(exc: BaseException) -> BaseException:
    """What went wrong under Strands' wrapping and anyio's task groups."""
    while True:
        if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        elif exc.__cause__ is not None:
            exc = exc.__cause__
        else:
            return exc


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{exc.__class__.__name__}: {text[0] if text else ''}"[:300]
