"""strands-cli's legacy tool names (`strands_tools.http_request`, `strands_tools.file_read`,
`strands_tools.file_write`, on its allowlist before its native registry): accepted in an
agent's `tools:` and in `tools.python` (string, `{callable: ...}`, `module.function`),
mapped to the native tools, and run under exactly the native tools' policy (the file
sandbox, the network guard, the guardrails)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from helpers.cli import durable

from strands_durable.errors import SpecError
from strands_durable.settings import ToolPolicy, current_tool_policy
from strands_durable.spec.loader import load_spec_data
from strands_durable.tools import native_name
from strands_durable.worker.tools.toolbox import Toolbox

runner = CliRunner()


@pytest.fixture(autouse=True)
def default_policy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for field in ToolPolicy.model_fields:
        monkeypatch.delenv(f"DURABLE_{field.upper()}", raising=False)
    monkeypatch.delenv("DURABLE_REDIS_URL", raising=False)
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    current_tool_policy.cache_clear()
    yield
    current_tool_policy.cache_clear()


def policy(monkeypatch: pytest.MonkeyPatch, **values: str) -> None:
    for name, value in values.items():
        monkeypatch.setenv(f"DURABLE_{name.upper()}", value)
    current_tool_policy.cache_clear()


@pytest.mark.parametrize(("reference", "native"), [
    ("strands_tools.http_request", "http_request"),
    ("strands_tools.http_request.http_request", "http_request"),
    ("strands_tools.file_read", "file_read"),
    ("strands_tools.file_read.file_read", "file_read"),
    ("strands_tools.file_write", "file_write"),
    ("strands_tools.file_write.file_write", "file_write"),
    ("http_request", "http_request"),
    ("strands_cli.tools.file_read", "file_read"),
])
def test_legacy_names_map_to_the_native_tool(reference: str, native: str) -> None:
    assert native_name(reference) == native


@pytest.mark.parametrize("reference", [
    "strands_tools.python_repl",  # on no allowlist of strands-cli's: an import path
    "strands_tools.calculator",
    "strands_tools.file_read.file_write",  # a module's own function only
    "strands_tools.http_request.get",
    "strands_tools.http_requests",
    "strands_toolsx.http_request",
    "strands_tools.",
    "strands_tools.grep",  # native, but never a legacy strands_tools name
])
def test_other_strands_tools_paths_stay_import_paths(reference: str) -> None:
    assert native_name(reference) is None


def spec(agent_tools: list[str] | None, python: list[Any] | None = None,
         **extra: Any) -> dict[str, Any]:
    agent: dict[str, Any] = {"prompt": "You help."}
    if agent_tools is not None:
        agent["tools"] = agent_tools
    data: dict[str, Any] = {
        "version": 0, "name": "legacy", "runtime": {"provider": "scripted"},
        "agents": {"helper": agent},
        "pattern": {"type": "chain", "config": {"steps": [{"agent": "helper",
                                                            "input": "go"}]}},
        **extra}
    if python is not None:
        data["tools"] = {"python": python}
    return data


@pytest.mark.parametrize(("agent_tools", "python"), [
    (["strands_tools.http_request"], None),
    (["strands_tools.http_request.http_request"], None),
    (None, ["strands_tools.http_request"]),
    (None, [{"callable": "strands_tools.http_request"}]),
    (None, ["strands_tools.http_request.http_request"]),
    (["strands_tools.http_request"], ["strands_tools.http_request"]),
    (["http_request"], [{"callable": "strands_tools.http_request"}]),
    (["strands_tools.http_request"], ["http_request"]),
])
def test_every_form_loads_under_the_default_policy_as_the_native_tool(
        agent_tools: list[str] | None, python: list[Any] | None) -> None:
    loaded = load_spec_data(spec(agent_tools, python), "s.yaml")  # no DURABLE_TOOL_MODULES
    selected = loaded.spec.tools_for("helper")
    assert [tool.native for tool in selected.python] == ["http_request"]


async def test_the_worker_builds_the_native_tool_for_a_legacy_name() -> None:
    loaded = load_spec_data(spec(["strands_tools.file_read"], ["strands_tools.file_write"]),
                            "s.yaml")
    selection = loaded.spec.tools_for("helper")
    built = Toolbox(current_tool_policy())._static_tools(loaded.spec, "scope", "helper",
                                                         None, selection)
    assert sorted(tool.tool_name for tool in built) == ["file_read"]
    everyone = load_spec_data(spec(None, ["strands_tools.file_write.file_write"]), "s.yaml")
    built = Toolbox(current_tool_policy())._static_tools(
        everyone.spec, "scope2", "helper", None, everyone.spec.tools_for("helper"))
    assert [tool.tool_name for tool in built] == ["file_write"]


def test_the_guardrails_see_the_native_tool_behind_a_legacy_name() -> None:
    deny = {"security": {"guardrails": {"deny_network": True}}}
    with pytest.raises(SpecError, match="reaches the network"):
        load_spec_data(spec(["strands_tools.http_request"], **deny), "s.yaml")
    assert load_spec_data(spec(["strands_tools.file_read"], **deny), "s.yaml")
    # allow_tools names a native tool by any of its names, and the worker keeps to it.
    allow = {"security": {"guardrails": {"allow_tools": ["strands_tools.http_request"]}}}
    loaded = load_spec_data(spec(["http_request"], **allow), "s.yaml")
    assert [t.native for t in loaded.spec.tools_for("helper").python] == ["http_request"]
    allow = {"security": {"guardrails": {"allow_tools": ["http_request"]}}}
    loaded = load_spec_data(spec(["strands_tools.http_request.http_request"], **allow),
                            "s.yaml")
    assert [t.native for t in loaded.spec.tools_for("helper").python] == ["http_request"]
    allow = {"security": {"guardrails": {"allow_tools": ["file_read"]}}}
    with pytest.raises(SpecError, match=r"not in security\.guardrails\.allow_tools"):
        load_spec_data(spec(["strands_tools.http_request"], **allow), "s.yaml")


# ---- a run: the scripted model calls the tool by its legacy name -----------------------

def run_calling(tmp_path: Path, tool: str, calls: list[dict[str, Any]]) -> str:
    """`durable run --ephemeral` of an agent that has `tool` and asks for `calls`."""
    rules = [{"agent": "helper", "turn": turn + 1, "tool_calls": [call]}
             for turn, call in enumerate(calls)]
    rules.append({"agent": "helper", "reply": "done"})
    data = spec([tool], runtime={"provider": "scripted", "script": {"rules": rules}})
    path = tmp_path / "legacy.yaml"
    path.write_text(yaml.safe_dump(data))
    result = runner.invoke(durable(), ["run", str(path), "--ephemeral"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_file_write_by_its_legacy_name_stays_in_the_sandbox(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = tmp_path / "files"
    files.mkdir()
    policy(monkeypatch, tool_files_dir=str(files))
    run_calling(tmp_path, "strands_tools.file_write", [
        {"name": "file_write", "input": {"path": "note.txt", "content": "kept"}},
        {"name": "file_write", "input": {"path": "../escaped.txt", "content": "no"}},
        {"name": "file_write", "input": {"path": str(tmp_path / "abs.txt"), "content": "no"}},
    ])
    assert (files / "note.txt").read_text() == "kept"
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "abs.txt").exists()


class _Hits(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:
        self.hits.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def loopback_server() -> Iterator[tuple[str, list[str]]]:
    hits: list[str] = []
    handler = type("Handler", (_Hits,), {"hits": hits})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", hits
    server.shutdown()
    thread.join()


@pytest.mark.parametrize("name", ["strands_tools.http_request",
                                  "strands_tools.http_request.http_request"])
def test_http_request_by_its_legacy_name_keeps_the_network_guard(
        name: str, tmp_path: Path, loopback_server: tuple[str, list[str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    url, hits = loopback_server
    call = {"name": "http_request", "input": {"method": "GET", "url": f"{url}/private"}}
    run_calling(tmp_path, name, [call])
    assert hits == []  # loopback: refused by the SSRF guard, as the native tool is
    policy(monkeypatch, tool_http_allow="127.0.0.1")
    run_calling(tmp_path, name, [call])
    assert hits == ["/private"]  # the operator's allowance reaches it, and the tool ran
