"""The worker's MCP pool against real servers written with the `mcp` package
(tests/mcp_servers/): stdio processes and streamable HTTP, through Strands' MCP client.
Tools are listed and called, one server per scope and id is reused, a killed server is
restarted (on the next `tools()` or the next call), the worker's environment is not
inherited, `${VAR}` is lent only as the policy says, and close() stops the processes."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for_sync
from mcp_servers.launch import STDIO_SERVER, kill, start_http_server
from strands.tools.mcp import MCPAgentTool

from strands_durable.settings import ToolPolicy
from strands_durable.spec.tools import McpServer
from strands_durable.worker.tools.mcp_pool import McpPool, McpRefused, McpUnavailable

pytestmark = pytest.mark.integration

PYTHON = sys.executable


def stdio(counter: Path, server_id: str = "local", **env: str) -> McpServer:
    """The stdio test server; its counter file also marks its processes (`pids_of`)."""
    return McpServer(id=server_id, command=PYTHON,
                     args=[str(STDIO_SERVER), "--counter-file", str(counter)], env=env)


async def call(pool: McpPool, scope: str, server: McpServer, name: str, /,
               **args: Any) -> dict[str, Any]:
    return await call_tool(await tool_named(pool, scope, server, name), **args)


async def tool_named(pool: McpPool, scope: str, server: McpServer, name: str) -> Any:
    return next(t for t in await pool.tools(scope, server) if t.tool_name == name)


async def call_tool(tool: Any, **args: Any) -> dict[str, Any]:
    result: dict[str, Any] = {}
    use = {"toolUseId": f"use-{tool.tool_name}", "name": tool.tool_name, "input": args}
    async for event in tool.stream(use, {}):
        result = getattr(event, "tool_result", None) or result
    return result


def text(result: dict[str, Any]) -> str:
    assert result.get("status") == "success", result
    return "".join(block.get("text", "") for block in result["content"])


async def pid_of(pool: McpPool, scope: str, server: McpServer) -> int:
    return int(text(await call(pool, scope, server, "whoami")))


def alive(pid: int) -> bool:
    try:  # a zombie (killed, not yet reaped by the event loop) counts as gone
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def pids_of(marker: str) -> set[int]:
    """Live processes whose command line contains `marker`."""
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline and alive(int(entry.name)):
            found.add(int(entry.name))
    return found


def kill_9(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    wait_for_sync(lambda: not alive(pid), what=f"process {pid} to die")


def bumps(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


@pytest.fixture
def counter(tmp_path: Path) -> Path:
    return tmp_path / "bumps.jsonl"


@pytest.fixture
async def pool(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> AsyncIterator[McpPool]:
    monkeypatch.setenv("DURABLE_FAKE_FLEET_SECRET", "hunter2")  # the worker's own
    monkeypatch.setenv("LENT_TOKEN", "lent-value")
    monkeypatch.setenv("LENT_PATH", str(tmp_path / "lent-counter.jsonl"))
    policy = ToolPolicy(mcp_commands=f"{PYTHON},/bin/true", tool_secrets="LENT_TOKEN,LENT_PATH",
                        tool_http_allow="127.0.0.1")
    made = McpPool(policy, dict(os.environ), startup_timeout_s=30)
    yield made
    await made.close()


# -- stdio ------------------------------------------------------------------------------
async def test_stdio_tools_are_listed_and_called(pool: McpPool, counter: Path) -> None:
    server = stdio(counter)
    tools = await pool.tools("spec-a", server)
    assert {"add", "echo", "bump", "whoami", "env_keys"} <= {t.tool_name for t in tools}
    assert all(isinstance(t, MCPAgentTool) for t in tools)
    assert text(await call(pool, "spec-a", server, "add", a=2, b=3)) == "5"
    assert text(await call(pool, "spec-a", server, "echo", text="héllo")) == "héllo"
    assert text(await call(pool, "spec-a", server, "bump", n=41)) == "42"
    assert bumps(counter) == 1  # one real execution


async def test_a_server_is_reused_within_a_scope_and_not_shared_across(
        pool: McpPool, counter: Path) -> None:
    server = stdio(counter)
    # Concurrent first callers of one key start one process between them.
    listed = await asyncio.gather(*(pool.tools("spec-a", server) for _ in range(4)))
    assert all(listed)
    assert len(pids_of(str(counter))) == 1
    first = await pid_of(pool, "spec-a", server)
    assert await pid_of(pool, "spec-a", server) == first  # the next step reuses it
    other = await pid_of(pool, "spec-b", server)
    assert other != first
    assert pids_of(str(counter)) == {first, other}


async def test_a_killed_server_is_restarted_by_the_next_tools(
        pool: McpPool, counter: Path) -> None:
    server = stdio(counter)
    first = await pid_of(pool, "spec-a", server)
    kill_9(first)
    second = await pid_of(pool, "spec-a", server)
    assert second != first and alive(second)
    assert pids_of(str(counter)) == {second}


async def test_a_call_to_a_dead_server_fails_and_the_next_call_restarts_it(
        pool: McpPool, counter: Path) -> None:
    server = stdio(counter)
    bump = await tool_named(pool, "spec-a", server, "bump")
    whoami = await tool_named(pool, "spec-a", server, "whoami")
    first = int(text(await call_tool(whoami)))
    kill_9(first)
    failed = await call_tool(bump, n=1)
    assert failed["status"] == "error"  # the model sees the failure; retrying is its call
    assert bumps(counter) == 0
    # The same tool objects (the step's) reach a new server on their next call.
    assert text(await call_tool(bump, n=1)) == "2"
    second = int(text(await call_tool(whoami)))
    assert second != first and bumps(counter) == 1
    assert pids_of(str(counter)) == {second}


async def test_the_worker_environment_is_not_inherited(pool: McpPool, counter: Path) -> None:
    server = stdio(counter, SPEC_SETTING="plain", COUNTER_FILE="${LENT_PATH}")
    keys = text(await call(pool, "spec-a", server, "env_keys")).split(",")
    assert "DURABLE_FAKE_FLEET_SECRET" not in keys and "LENT_TOKEN" not in keys
    assert {"SPEC_SETTING", "COUNTER_FILE", "PATH"} <= set(keys)


async def test_a_lent_variable_is_substituted(pool: McpPool, tmp_path: Path) -> None:
    # No --counter-file: the server writes where the lent ${LENT_PATH} says.
    server = McpServer(id="lent", command=PYTHON, args=[str(STDIO_SERVER)],
                       env={"COUNTER_FILE": "${LENT_PATH}"})
    assert text(await call(pool, "spec-a", server, "bump", n=1)) == "2"
    assert bumps(tmp_path / "lent-counter.jsonl") == 1


async def test_an_unlent_or_unset_variable_is_refused(pool: McpPool, counter: Path) -> None:
    leak = stdio(counter, X="${DURABLE_FAKE_FLEET_SECRET}")
    with pytest.raises(McpRefused, match="DURABLE_FAKE_FLEET_SECRET") as info:
        await pool.tools("spec-a", leak)
    assert "DURABLE_TOOL_SECRETS" in str(info.value) and "hunter2" not in str(info.value)
    header = McpServer(id="h", url="http://127.0.0.1:9/mcp",
                       headers={"Authorization": "Bearer ${DURABLE_FAKE_FLEET_SECRET}"})
    with pytest.raises(McpRefused, match="DURABLE_TOOL_SECRETS"):
        await pool.tools("spec-a", header)
    unset = McpPool(pool.policy, {}, startup_timeout_s=30)
    with pytest.raises(McpRefused, match=r"LENT_TOKEN.*not set"):
        await unset.tools("spec-a", stdio(counter, T="${LENT_TOKEN}"))
    assert not pids_of(str(counter))


async def test_a_command_the_policy_does_not_list_is_refused(
        pool: McpPool, counter: Path) -> None:
    for command in ("bash", "python3", PYTHON + " "):  # exact match only
        server = McpServer(id="sh", command=command, args=[str(STDIO_SERVER), str(counter)])
        with pytest.raises(McpRefused, match="DURABLE_MCP_COMMANDS"):
            await pool.tools("spec-a", server)
    assert not pids_of(str(counter))


async def test_a_server_that_does_not_start_is_unavailable(
        pool: McpPool, counter: Path) -> None:
    quits = McpServer(id="quits", command="/bin/true")
    with pytest.raises(McpUnavailable, match="'quits' did not start"):
        await pool.tools("spec-a", quits)
    # Never answers the handshake: bounded by the startup timeout, and stopped.
    mute = McpServer(id="mute", command=PYTHON,
                     args=["-c", "import sys; sys.stdin.read()", str(counter)])
    slow = McpPool(pool.policy, {}, startup_timeout_s=2)
    began = time.monotonic()
    with pytest.raises(McpUnavailable, match="'mute' did not start: no handshake within 2 s"):
        await slow.tools("spec-a", mute)
    assert time.monotonic() - began < 15
    wait_for_sync(lambda: not pids_of(str(counter)), timeout_s=15,
                  what="the mute server to be stopped")


async def test_close_stops_every_server(pool: McpPool, counter: Path) -> None:
    server = stdio(counter)
    pids = {await pid_of(pool, scope, server) for scope in ("spec-a", "spec-b")}
    assert len(pids) == 2
    await pool.close()
    assert not any(alive(pid) for pid in pids)
    assert not pids_of(str(counter))
    with pytest.raises(McpUnavailable, match="shutting down"):
        await pool.tools("spec-a", server)


async def test_the_pool_keeps_at_most_max_clients(pool: McpPool, counter: Path) -> None:
    small = McpPool(pool.policy, {}, startup_timeout_s=30, max_clients=2)
    server = stdio(counter)
    try:
        oldest = await pid_of(small, "spec-1", server)
        await pid_of(small, "spec-2", server)
        await pid_of(small, "spec-3", server)  # the least recently used one goes
        assert not alive(oldest) and len(pids_of(str(counter))) == 2
    finally:
        await small.close()
    assert not pids_of(str(counter))


# -- streamable HTTP --------------------------------------------------------------------
@dataclass
class HttpServers:
    log: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self, port: int | None = None) -> tuple[str, subprocess.Popen[bytes]]:
        url, process = start_http_server(port, log=self.log)
        self.processes.append(process)
        return url, process


@pytest.fixture
def http_servers(tmp_path: Path) -> Iterator[HttpServers]:
    servers = HttpServers(tmp_path / "mcp-http.log")
    yield servers
    for process in servers.processes:
        kill(process)


async def test_an_http_server_is_called_with_lent_headers(
        pool: McpPool, http_servers: HttpServers) -> None:
    url, process = http_servers.start()
    server = McpServer(id="remote", url=url,
                       headers={"X-Token": "Bearer ${LENT_TOKEN}", "X-Plain": "p"})
    tools = await pool.tools("spec-a", server)
    assert {"add", "echo", "bump", "whoami", "env_keys"} <= {t.tool_name for t in tools}
    assert text(await call(pool, "spec-a", server, "add", a=20, b=22)) == "42"
    assert text(await call(pool, "spec-a", server, "header", name="X-Token")) == \
        "Bearer lent-value"
    assert text(await call(pool, "spec-a", server, "header", name="x-plain")) == "p"
    assert await pid_of(pool, "spec-a", server) == process.pid


async def test_a_restarted_http_server_is_reconnected(
        pool: McpPool, http_servers: HttpServers) -> None:
    url, first = http_servers.start()
    port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
    server = McpServer(id="remote", url=url)
    whoami = await tool_named(pool, "spec-a", server, "whoami")
    assert int(text(await call_tool(whoami))) == first.pid

    kill(first)
    assert (await call_tool(whoami))["status"] == "error"  # the connection broke
    _, second = http_servers.start(port)  # a new process on the same port
    assert int(text(await call_tool(whoami))) == second.pid
    kill(second)
    _, third = http_servers.start(port)
    assert await pid_of(pool, "spec-a", server) == third.pid  # found by tools() this time


async def test_an_http_url_must_be_http_and_allowed(pool: McpPool) -> None:
    for url in ("ftp://127.0.0.1/mcp", "http://169.254.169.254/mcp"):
        with pytest.raises(McpRefused, match="'remote'"):
            await pool.tools("spec-a", McpServer(id="remote", url=url))
