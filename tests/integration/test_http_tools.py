"""The HTTP tools against real local HTTP servers: http_executors (Idempotency-Key,
secrets in headers, paths kept under base_url, timeouts) and http_request / web_fetch /
tavily_search, all behind the network guard (loopback, private and metadata addresses
refused unless DURABLE_TOOL_HTTP_ALLOW lists them, every redirect hop re-checked).

The servers listen on 127.0.0.1 and, for redirect targets, on 127.0.0.2: both loopback,
so each test shows the guard refusing what the machine could in fact reach."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from strands.types.tools import AgentTool, ToolResult, ToolUse

from strands_durable.settings import ToolPolicy, current_tool_policy
from strands_durable.spec.loader import load_spec_data
from strands_durable.spec.tools import HttpExecutor
from strands_durable.worker.tools.context import (
    INVOCATION_STATE_KEY,
    ToolCall,
    enter_tool_call,
    leave_tool_call,
)
from strands_durable.worker.tools.http_executor import build_http_executor, join_path
from strands_durable.worker.tools.native import load_native, tavily_search
from strands_durable.worker.tools.net_guard import ToolRefused, check_url, guarded_client

pytestmark = pytest.mark.integration

METADATA = "http://169.254.169.254/latest/meta-data/iam/security-credentials/"
SECRET = "tok-5f2a9c-very-secret"
LOOPBACK = ToolPolicy(tool_http_allow="127.0.0.1")


@dataclass
class Server:
    """A local HTTP server that records every request it gets."""

    host: str
    port: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    released: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str = "/") -> str:
        return f"http://{self.host}:{self.port}{path}"


def _handler(server: Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

        def _send(self, status: int, body: bytes, **headers: str) -> None:
            self.send_response(status)
            for name, value in {"Content-Length": str(len(body)), **headers}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            record = {"method": self.command, "path": self.path,
                      "headers": {k.lower(): v for k, v in self.headers.items()},
                      "body": self.rfile.read(length).decode() if length else ""}
            with server.lock:
                server.requests.append(record)
            route, query = urlsplit(self.path).path, parse_qs(urlsplit(self.path).query)
            if route.endswith("/slow"):
                server.released.wait(timeout=30)  # until the test ends: a hung API
                self._send(504, b"late")
            elif route.endswith("/redirect"):
                self._send(302, b"", Location=query["to"][0])
            elif route.endswith("/loop"):
                self._send(302, b"", Location=route)
            elif route.endswith("/echo"):
                self._send(200, json.dumps(record).encode(), **{"Content-Type": "application/json"})
            elif route.endswith("/missing"):
                self._send(404, b"no such thing")
            elif route.endswith("/big"):
                self._send(200, b"z" * (2 * 1024 * 1024))
            elif route == "/tavily":
                self._send(200, json.dumps({"results": [{"title": "Strands"}]}).encode(),
                           **{"Content-Type": "application/json"})
            elif route == "/tavily-broken":
                self._send(500, f"upstream broke for {self.headers['Authorization']}".encode())
            else:
                self._send(200, f"hello from {route}".encode())

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _answer

    return Handler


@pytest.fixture
def serve() -> Iterator[Callable[[str], Server]]:
    started: list[tuple[Server, ThreadingHTTPServer]] = []

    def start(host: str = "127.0.0.1") -> Server:
        state = Server(host)
        httpd = ThreadingHTTPServer((host, 0), _handler(state))
        state.port = httpd.server_address[1]
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        started.append((state, httpd))
        return state

    yield start
    for state, httpd in started:
        state.released.set()
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def server(serve: Callable[[str], Server]) -> Server:
    return serve("127.0.0.1")


@pytest.fixture
def other(serve: Callable[[str], Server]) -> Server:
    """A second loopback address: where a redirect tries to lead."""
    return serve("127.0.0.2")


@pytest.fixture
def allow(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Set DURABLE_TOOL_HTTP_ALLOW for the native tools (empty: nothing private)."""
    monkeypatch.delenv("DURABLE_TOOL_HTTP_ALLOW", raising=False)
    current_tool_policy.cache_clear()

    def set_allow(value: str) -> None:
        monkeypatch.setenv("DURABLE_TOOL_HTTP_ALLOW", value)
        current_tool_policy.cache_clear()

    yield set_allow
    current_tool_policy.cache_clear()


def call(tool: AgentTool | str, state: dict[str, Any] | None = None, **inputs: Any
         ) -> ToolResult:
    """One tool call through `stream()`; its last event's result."""
    agent_tool = load_native(tool) if isinstance(tool, str) else tool

    async def drive() -> ToolResult:
        last: Any = None
        use: ToolUse = {"toolUseId": "t-1", "name": agent_tool.tool_name, "input": inputs}
        async for event in agent_tool.stream(use, state or {}):
            last = event
        return last.tool_result

    return asyncio.run(drive())


def text(result: ToolResult) -> str:
    return "".join(str(block.get("text", block.get("json", ""))) for block in result["content"])


def succeeded(result: ToolResult) -> str:
    assert result["status"] == "success", text(result)
    return text(result)


def failed(result: ToolResult) -> str:
    assert result["status"] == "error", text(result)
    assert "Traceback" not in text(result)
    return text(result)


def executor_for(server: Server, policy: ToolPolicy = LOOPBACK,
                 environ: dict[str, str] | None = None, **fields: Any) -> AgentTool:
    spec = HttpExecutor(id="api", base_url=server.url("/api"), **fields)
    return build_http_executor(spec, policy, environ or {})


# ---- http_executors ------------------------------------------------------------------

def test_executor_sends_the_tool_calls_idempotency_key(server: Server) -> None:
    api = executor_for(server)
    call_3 = ToolCall("s-1", "draft", 3, "api")
    succeeded(call(api, {INVOCATION_STATE_KEY: call_3}, method="POST", path="/orders",
                   json_data={"item": "book"}, params={"q": "x y"}))
    token = enter_tool_call(ToolCall("s-1", "draft", 4, "api"))
    try:
        succeeded(call(api, path="orders"))  # from current_tool_call()
    finally:
        leave_tool_call(token)
    succeeded(call(api, path="orders"))  # outside a durable call: no key
    first, second, third = server.requests
    assert first["headers"]["idempotency-key"] == "s-1:draft:3"
    assert (first["method"], first["path"]) == ("POST", "/api/orders?q=x+y")
    assert json.loads(first["body"]) == {"item": "book"}
    assert second["headers"]["idempotency-key"] == "s-1:draft:4"
    assert "idempotency-key" not in third["headers"]


def test_executor_fills_in_listed_secrets_and_never_shows_them(server: Server) -> None:
    policy = ToolPolicy(tool_http_allow="127.0.0.1", tool_secrets="API_TOKEN")
    api = executor_for(server, policy, {"API_TOKEN": SECRET},
                       headers={"Authorization": "Bearer ${API_TOKEN}", "X-Plain": "static"})
    shown = succeeded(call(api, path="/echo"))  # the server echoes the headers back
    (request,) = server.requests
    assert request["headers"]["authorization"] == f"Bearer {SECRET}"
    assert request["headers"]["x-plain"] == "static"
    assert SECRET not in shown and "Bearer ***" in shown


def test_a_secret_named_in_env_secrets_is_read_from_its_key(
        server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    # strands-cli's github example: ${GITHUB_TOKEN} is read from MY_GITHUB_PAT.
    monkeypatch.setenv("DURABLE_TOOL_SECRETS", "MY_GITHUB_PAT")
    monkeypatch.setenv("DURABLE_TOOL_HTTP_ALLOW", "127.0.0.1")
    current_tool_policy.cache_clear()
    data = {"version": 0, "name": "gh", "runtime": {"provider": "scripted"},
            "env": {"secrets": [{"name": "GITHUB_TOKEN", "source": "env",
                                 "key": "MY_GITHUB_PAT"}]},
            "tools": {"http_executors": [{
                "id": "api", "base_url": server.url("/api"),
                "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}}]},
            "agents": {"a": {"prompt": "You help.", "tools": ["api"]}},
            "pattern": {"type": "chain", "config": {"steps": [{"agent": "a",
                                                               "input": "go"}]}}}
    tools = load_spec_data(data, "gh.yaml").spec.tools
    assert tools is not None
    policy = ToolPolicy(tool_http_allow="127.0.0.1", tool_secrets="MY_GITHUB_PAT")
    api = build_http_executor(tools.http_executors[0], policy,
                              {"MY_GITHUB_PAT": SECRET, "GITHUB_TOKEN": "not-this-one"})
    succeeded(call(api, path="/echo"))
    (request,) = server.requests
    assert request["headers"]["authorization"] == f"Bearer {SECRET}"
    current_tool_policy.cache_clear()


def test_executor_refuses_unlisted_or_unset_variables_without_a_request(server: Server) -> None:
    environ = {"DB_PASSWORD": "pw-must-not-leak", "API_TOKEN": SECRET}
    policy = ToolPolicy(tool_http_allow="127.0.0.1", tool_secrets="API_TOKEN,MISSING")
    api = executor_for(server, policy, environ, headers={"X-Key": "${DB_PASSWORD}"})
    message = failed(call(api, path="/echo"))
    assert "DB_PASSWORD" in message and "DURABLE_TOOL_SECRETS" in message
    assert "pw-must-not-leak" not in message
    unset = executor_for(server, policy, environ, headers={"X-Key": "${MISSING}"})
    assert "MISSING" in failed(call(unset, path="/echo"))
    assert server.requests == []


@pytest.mark.parametrize("path", [
    "http://{host}/other", "//{host}/other", "https://example.com/", "../other",
    "%2e%2e/other", "/x/../../other", "a\\..\\..\\other", "",
])
def test_executor_paths_stay_under_base_url(server: Server, path: str) -> None:
    host = f"127.0.0.1:{server.port}"
    assert failed(call(executor_for(server), path=path.format(host=host)))
    assert server.requests == []


def test_join_path_appends_like_httpx_base_url() -> None:
    assert join_path("https://api.example.com/v1", "/users") == "https://api.example.com/v1/users"
    assert join_path("https://api.example.com/v1/", "users?page=2") \
        == "https://api.example.com/v1/users?page=2"
    assert join_path("https://api.example.com", "a/./b") == "https://api.example.com/a/b"
    with pytest.raises(ToolRefused):
        join_path("https://api.example.com/v1", "/../v2/users")


def test_executor_timeout_and_http_errors_are_error_results(server: Server) -> None:
    assert "timed out after 0.3 s" in failed(call(executor_for(server, timeout_ms=300),
                                                  path="/slow"))
    missing = failed(call(executor_for(server), path="/missing"))
    assert "Status: 404" in missing and "no such thing" in missing


def test_executor_reaches_loopback_only_when_allowed(server: Server) -> None:
    message = failed(call(executor_for(server, ToolPolicy()), path="/ping"))
    assert "DURABLE_TOOL_HTTP_ALLOW" in message and server.requests == []
    for allowed in ("127.0.0.1", "127.0.0.0/8", "localhost"):
        api = build_http_executor(
            HttpExecutor(id="api", base_url=f"http://localhost:{server.port}/api"),
            ToolPolicy(tool_http_allow=allowed), {})
        assert succeeded(call(api, path="/ping")) == "Status: 200\n\nhello from /api/ping"


def test_executor_returns_redirects_without_following_them(server: Server, other: Server
                                                          ) -> None:
    api = executor_for(server, ToolPolicy(tool_http_allow="127.0.0.0/8"))
    shown = succeeded(call(api, path=f"/redirect?to={other.url('/x')}"))
    assert shown.startswith("Status: 302") and other.requests == []


def test_executor_describes_its_api_to_the_model(server: Server) -> None:
    api = executor_for(server, description="Orders API", response_format="JSON",
                       common_endpoints=[{"method": "GET", "path": "/orders",
                                          "description": "list orders"}])
    spec = api.tool_spec
    assert spec["name"] == "api" == api.tool_name
    assert "Orders API" in spec["description"] and "- GET /orders: list orders" \
        in spec["description"] and "Response format: JSON" in spec["description"]
    assert spec["inputSchema"]["json"]["required"] == ["path"]
    assert {"method", "path", "json_data", "headers_override"} \
        <= set(spec["inputSchema"]["json"]["properties"])


# ---- http_request, web_fetch ---------------------------------------------------------

@pytest.mark.parametrize("tool", ["http_request", "web_fetch"])
def test_http_tools_reach_loopback_only_when_allowed(
        tool: str, server: Server, allow: Callable[[str], None]) -> None:
    for url in (server.url("/ping"), f"http://localhost:{server.port}/ping",
                f"http://[::ffff:127.0.0.1]:{server.port}/ping"):
        assert "DURABLE_TOOL_HTTP_ALLOW" in failed(call(tool, url=url))
    assert server.requests == []
    allow("127.0.0.1")
    assert "hello from /ping" in succeeded(call(tool, url=server.url("/ping")))


def test_web_fetch_checks_every_redirect_hop(server: Server, other: Server,
                                            allow: Callable[[str], None]) -> None:
    allow("127.0.0.1")
    message = failed(call("web_fetch", url=server.url(f"/redirect?to={other.url('/secret')}")))
    assert "127.0.0.2" in message and other.requests == []
    assert "169.254.169.254" in failed(call("web_fetch",
                                            url=server.url(f"/redirect?to={METADATA}")))
    assert "more than 5 redirects" in failed(call("web_fetch", url=server.url("/loop")))
    allow("127.0.0.0/8")  # the same redirect, allowed: it would have been followed
    fetched = succeeded(call("web_fetch", url=server.url(f"/redirect?to={other.url('/secret')}")))
    assert "hello from /secret" in fetched and len(other.requests) == 1


def test_http_request_returns_redirects_and_bounds_the_body(
        server: Server, other: Server, allow: Callable[[str], None]) -> None:
    allow("127.0.0.0/8")
    shown = succeeded(call("http_request", url=server.url(f"/redirect?to={other.url('/x')}")))
    assert shown.startswith("Status: 302") and other.requests == []
    big = succeeded(call("http_request", url=server.url("/big")))
    assert big.count("z") == 1024 * 1024 and "[truncated:" in big
    posted = succeeded(call("http_request", url=server.url("/echo"), method="POST",
                            body="payload", headers={"X-Test": "1"}))
    assert '"body": "payload"' in posted and '"x-test": "1"' in posted


def test_metadata_and_other_schemes_are_refused_without_any_network(
        monkeypatch: pytest.MonkeyPatch, allow: Callable[[str], None]) -> None:
    def tripwire(*args: Any) -> None:
        raise AssertionError("a socket was connected")

    monkeypatch.setattr(socket.socket, "connect", tripwire)
    for url in (METADATA, "http://[fd00::1]/", "http://10.0.0.1/", "http://0.0.0.0/"):
        with pytest.raises(ToolRefused, match="DURABLE_TOOL_HTTP_ALLOW"):
            check_url(url, ToolPolicy())
    assert "169.254.169.254" in failed(call("http_request", url=METADATA))
    assert "169.254.169.254" in failed(call("web_fetch", url=METADATA))
    metadata_api = build_http_executor(
        HttpExecutor(id="meta", base_url="http://169.254.169.254/latest"), ToolPolicy(), {})
    assert "169.254.169.254" in failed(call(metadata_api, path="/meta-data"))
    for url in ("file:///etc/passwd", "ftp://example.com/x", "gopher://example.com/"):
        assert "only http and https" in failed(call("http_request", url=url))


def test_every_connection_is_checked_where_it_is_opened(server: Server) -> None:
    """The check that holds against DNS rebinding: in the transport, on the address the
    socket goes to, with no check_url before it."""
    with guarded_client(ToolPolicy()) as client, pytest.raises(ToolRefused, match=r"127\.0\.0\.1"):
        client.get(f"http://localhost:{server.port}/ping")
    assert server.requests == []
    with guarded_client(LOOPBACK) as client:
        assert client.get(f"http://localhost:{server.port}/ping").text == "hello from /ping"


# ---- tavily_search -------------------------------------------------------------------

def test_tavily_search_sends_the_key_and_never_shows_it(
        server: Server, allow: Callable[[str], None], monkeypatch: pytest.MonkeyPatch) -> None:
    allow("127.0.0.1")
    monkeypatch.setenv("TAVILY_API_KEY", SECRET)
    monkeypatch.setattr(tavily_search, "API_URL", server.url("/tavily"))
    found = succeeded(call("tavily_search", query="strands agents", max_results=3))
    assert "Strands" in found
    (request,) = server.requests
    assert request["headers"]["authorization"] == f"Bearer {SECRET}"
    assert json.loads(request["body"]) == {"query": "strands agents", "max_results": 3,
                                           "include_answer": False}
    monkeypatch.setattr(tavily_search, "API_URL", server.url("/tavily-broken"))
    broken = failed(call("tavily_search", query="strands"))
    assert "HTTP 500" in broken and SECRET not in broken and "***" in broken
