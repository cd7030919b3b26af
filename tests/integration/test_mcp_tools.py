"""MCP servers written with the `mcp` package (tests/mcp_servers/), stdio and
streamable HTTP, through Strands' MCP client in the worker's pool: tools listed and
called, one server per spec reused across steps, restarted after it dies, no inherited
secrets, and the fleet's policy (commands, lent variables) enforced."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import free_port, wait_for, wait_for_sync

from strands_durable.models import SessionStatus
from strands_durable.sessions.history import event_docs
from strands_durable.sessions.start import start_session
from strands_durable.settings import ToolPolicy, current_tool_policy
from strands_durable.spec.loader import load_spec_data
from strands_durable.spec.tools import McpServer
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer
from strands_durable.worker.tools.mcp_pool import McpPool, McpRefused

pytestmark = pytest.mark.integration

SERVER = Path(__file__).resolve().parents[1] / "mcp_servers" / "stdio_server.py"
HTTP_SERVER = SERVER.with_name("http_server.py")
PYTHON = sys.executable
STDIO = McpServer(id="local", command=PYTHON, args=[str(SERVER)])


async def call(tool: Any, tool_name: str, **args: Any) -> dict[str, Any]:
    result: dict[str, Any] = {}
    use = {"toolUseId": f"u-{tool_name}", "name": tool_name, "input": args}
    async for event in tool.stream(use, {}):
        result = getattr(event, "tool_result", None) or result
    return result


def text(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result["content"])


async def tool_named(pool: McpPool, scope: str, server: McpServer, name: str) -> Any:
    return next(t for t in await pool.tools(scope, server) if t.tool_name == name)


@pytest.fixture
async def pool(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[McpPool]:
    monkeypatch.setenv("DURABLE_FLEET_SECRET", "hunter2")  # the worker's own secret
    monkeypatch.setenv("LENT_TOKEN", "lent-value")
    policy = ToolPolicy(mcp_commands=PYTHON, tool_secrets="LENT_TOKEN",
                        tool_http_allow="127.0.0.1")
    made = McpPool(policy, dict(os.environ), startup_timeout_s=30)
    yield made
    await made.close()


async def test_a_stdio_server_is_started_once_reused_and_restarted(pool: McpPool) -> None:
    names = {t.tool_name for t in await pool.tools("spec-1", STDIO)}
    assert {"add", "echo", "bump", "whoami", "env_keys"} <= names
    assert text(await call(await tool_named(pool, "spec-1", STDIO, "add"), "add",
                           a=2, b=3)) == "5"
    pid = int(text(await call(await tool_named(pool, "spec-1", STDIO, "whoami"), "whoami")))
    again = int(text(await call(await tool_named(pool, "spec-1", STDIO, "whoami"), "whoami")))
    assert again == pid  # the next step reuses the server
    other = int(text(await call(await tool_named(pool, "spec-2", STDIO, "whoami"), "whoami")))
    assert other != pid  # another spec gets its own

    os.kill(pid, signal.SIGKILL)
    wait_for_sync(lambda: not _alive(pid), what="the server to die")
    restarted = int(text(await call(await tool_named(pool, "spec-1", STDIO, "whoami"),
                                    "whoami")))
    assert restarted not in (pid, other)

    await pool.close()
    wait_for_sync(lambda: not _alive(restarted) and not _alive(other),
                  what="close() to stop the servers")


async def test_a_stdio_server_inherits_no_secret_but_gets_what_it_is_lent(
        pool: McpPool) -> None:
    server = McpServer(id="env", command=PYTHON, args=[str(SERVER)],
                       env={"TOKEN": "Bearer ${LENT_TOKEN}"})
    keys = text(await call(await tool_named(pool, "s", server, "env_keys"), "env_keys"))
    assert "DURABLE_FLEET_SECRET" not in keys.split(",") and "TOKEN" in keys.split(",")


async def test_the_fleet_policy_is_enforced_on_the_worker(pool: McpPool) -> None:
    with pytest.raises(McpRefused, match="DURABLE_MCP_COMMANDS"):
        await pool.tools("s", McpServer(id="sh", command="bash", args=["-c", "env"]))
    leak = McpServer(id="leak", command=PYTHON, args=[str(SERVER)],
                     env={"X": "${DURABLE_FLEET_SECRET}"})
    with pytest.raises(McpRefused, match="DURABLE_TOOL_SECRETS") as info:
        await pool.tools("s", leak)
    assert "hunter2" not in str(info.value)
    private = McpServer(id="meta", url="http://169.254.169.254/mcp")
    with pytest.raises(McpRefused, match=r"169\.254\.169\.254"):
        await pool.tools("s", private)


# -- streamable HTTP ------------------------------------------------------------------
class HttpServer:
    def __init__(self, port: int, log: Path) -> None:
        self.port, self.log = port, log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> int:
        self.proc = subprocess.Popen([PYTHON, str(HTTP_SERVER), "--port", str(self.port)],
                                     stdout=self.log.open("ab"), stderr=subprocess.STDOUT)
        wait_for_sync(self._up, timeout_s=30, what="the MCP HTTP server to listen")
        return self.proc.pid

    def _up(self) -> bool:
        try:
            httpx.get(f"http://127.0.0.1:{self.port}/", timeout=1)
            return True
        except httpx.TransportError:
            return False

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[HttpServer]:
    server = HttpServer(free_port(), tmp_path / "mcp-http.log")
    server.start()
    yield server
    server.kill()


async def test_an_http_server_is_called_with_its_headers_and_reconnected(
        pool: McpPool, http_server: HttpServer) -> None:
    server = McpServer(id="remote", url=http_server.url,
                       headers={"X-Test": "${LENT_TOKEN}"})
    assert text(await call(await tool_named(pool, "s", server, "echo"), "echo",
                           text="hi")) == "hi"
    seen = text(await call(await tool_named(pool, "s", server, "header"), "header",
                           name="X-Test"))
    assert seen == "lent-value"
    first = text(await call(await tool_named(pool, "s", server, "whoami"), "whoami"))

    http_server.kill()
    http_server.start()  # a new process on the same port
    second = text(await call(await tool_named(pool, "s", server, "whoami"), "whoami"))
    assert second != first


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie child of this process counts as gone
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


# -- a whole session: an agent whose tools are an MCP server ----------------------------
@pytest.fixture
def mcp_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    counter = tmp_path / "bumps.jsonl"
    monkeypatch.setenv("DURABLE_MCP_COMMANDS", PYTHON)
    current_tool_policy.cache_clear()
    yield counter
    current_tool_policy.cache_clear()


async def test_an_agent_calls_an_mcp_tool_in_a_session(
        mcp_env: Path, store: Store, consumer: StepConsumer) -> None:
    spec = {
        "version": 0, "name": "mcp-session",
        "runtime": {"provider": "scripted", "script": {"rules": [
            {"agent": "clerk", "turn": 1, "tool_calls": [{"name": "bump", "input": {"n": 41}}]},
            {"agent": "clerk", "turn": 2, "reply": "bumped"}]}},
        "tools": {"mcp": [{"id": "counter", "command": PYTHON, "args": [str(SERVER)],
                           "env": {"COUNTER_FILE": str(mcp_env)}}]},
        "agents": {"clerk": {"prompt": "Count.", "tools": ["counter"]}},
        "pattern": {"type": "chain", "config": {"steps": [
            {"agent": "clerk", "input": "one"}, {"agent": "clerk", "input": "two"}]}},
    }
    sid, _ = await start_session(store, load_spec_data(spec))

    async def ended() -> bool:
        return (await store.get_session(sid)).status != SessionStatus.RUNNING

    await wait_for(ended, timeout_s=60, what="the session to end")
    record = await store.get_session(sid)
    assert record.status == SessionStatus.COMPLETED, record.error
    calls = [json.loads(line) for line in mcp_env.read_text().splitlines()]
    assert [c["n"] for c in calls] == [41, 41]
    assert len({c["pid"] for c in calls}) == 1  # both steps used the same server process
    done = [d for d in event_docs(await store.events(sid)) if d["type"] == "tool_call_completed"]
    assert [(d["tool"], d["outcome"]) for d in done] == [("bump", "ok"), ("bump", "ok")]
