"""The native tools (worker/tools/native/) and python tool loading (worker/tools/python_tools.py):
strands-cli's behaviour within the operator's tool policy. Each tool is driven through its
Strands `stream()`, as an agent would call it; the policy comes from the environment."""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from strands.types.tools import AgentTool, ToolResult, ToolUse

from strands_durable.settings import ToolPolicy, current_tool_policy
from strands_durable.tools import NATIVE_TOOLS
from strands_durable.worker.tools.native import load_native
from strands_durable.worker.tools.python_tools import ToolLoadError, load_python_tool

SetEnv = Callable[..., None]


def call(tool: AgentTool | str, **inputs: Any) -> ToolResult:
    """Run one tool call through `stream()`; its last event's result."""
    agent_tool = load_native(tool) if isinstance(tool, str) else tool

    async def drive() -> ToolResult:
        last: Any = None
        use: ToolUse = {"toolUseId": "t-1", "name": agent_tool.tool_name, "input": inputs}
        async for event in agent_tool.stream(use, {}):
            last = event
        return last.tool_result if hasattr(last, "tool_result") else last

    return asyncio.run(drive())


def text(result: ToolResult) -> str:
    return "".join(str(block.get("text", block.get("json", ""))) for block in result["content"])


def succeeded(result: ToolResult) -> str:
    assert result["status"] == "success", text(result)
    assert result["toolUseId"] == "t-1"
    return text(result)


def failed(result: ToolResult) -> str:
    assert result["status"] == "error", text(result)
    assert "Traceback" not in text(result)
    return text(result)


@pytest.fixture
def set_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[SetEnv]:
    """A clean tool policy; `set_env(tool_files_dir=...)` sets DURABLE_* and re-reads it."""
    for field in ToolPolicy.model_fields:
        monkeypatch.delenv(f"DURABLE_{field.upper()}", raising=False)
    current_tool_policy.cache_clear()

    def set_values(**values: str) -> None:
        for name, value in values.items():
            monkeypatch.setenv(f"DURABLE_{name.upper()}", value)
        current_tool_policy.cache_clear()

    yield set_values
    current_tool_policy.cache_clear()


# ---- loading -------------------------------------------------------------------------

def test_every_native_name_loads_with_its_strands_cli_schema() -> None:
    for name in NATIVE_TOOLS:
        tool = load_native(name)
        assert tool.tool_name == name == tool.tool_spec["name"]
        assert tool.tool_spec["inputSchema"]["json"]["type"] == "object"
    with pytest.raises(ValueError, match="not a native tool"):
        load_native("os_system")


# ---- calculator ----------------------------------------------------------------------

@pytest.mark.parametrize(("expression", "shown"), [
    ("2 + 3 * 4", "14"), ("7 / 2", "3.5"), ("2 ** 10", "1024"), ("-3 + +5", "2"),
    ("10 // 3", "3"), ("10 % 3", "1"), ("(1 + 2) * 3", "9"), ("6 / 3", "2"),
    ("2 ** -1", "0.5"), ("9" * 500 + " - 1", "9" * 499 + "8"),
])
def test_calculator_evaluates_arithmetic(expression: str, shown: str) -> None:
    assert succeeded(call("calculator", expression=expression)) == f"{expression} = {shown}"


@pytest.mark.parametrize(("expression", "says"), [
    ("9 ** 9 ** 9", "too large"),
    ("10 ** 10 ** 10", "too large"),
    ("2 ** 100000", "too large"),
    ("(2 ** 5000) * (2 ** 5000) * (2 ** 5000)", "too large"),
    ("2.0 ** 100000", "too large"),
    ("__import__('os').system('id')", "Unsupported"),
    ("().__class__.__bases__", "Unsupported"),
    ("open('/etc/passwd').read()", "Unsupported"),
    ("x + 1", "Unsupported"),
    ("'a' * 10", "Unsupported constant"),
    ("[1] * 10", "Unsupported"),
    ("True + 1", "Unsupported constant"),
    ("lambda: 1", "Unsupported"),
    ("1 << 100000", "Unsupported operation"),
    ("1 / 0", "Division by zero"),
    ("5 % 0", "Division by zero"),
    ("-" * 80 + "1", "nested"),
    ("(" * 300 + "1" + ")" * 300, "Syntax error"),
    ("1 +", "Syntax error"),
    ("1 + " * 400 + "1", "longer than"),
    ("", "required"),
])
def test_calculator_refuses_hostile_and_invalid_input_quickly(expression: str, says: str) -> None:
    started = time.monotonic()
    assert says in failed(call("calculator", expression=expression))
    assert time.monotonic() - started < 5  # bounded before computing, not after


# ---- current_time --------------------------------------------------------------------

def test_current_time_formats() -> None:
    stamp = datetime.fromisoformat(succeeded(call("current_time")))
    assert stamp.tzinfo is not None and abs((datetime.now(UTC) - stamp).total_seconds()) < 60
    assert abs(int(succeeded(call("current_time", format="unix"))) - time.time()) < 60
    assert succeeded(call("current_time", format="human")).endswith(" UTC")
    local = succeeded(call("current_time", format="human", timezone="local"))
    assert not local.endswith("UTC")
    assert "Invalid format" in failed(call("current_time", format="rfc"))
    assert "Invalid timezone" in failed(call("current_time", timezone="mars"))


# ---- file tools ----------------------------------------------------------------------

FILE_CALLS: dict[str, Callable[[str], dict[str, Any]]] = {
    "file_read": lambda path: {"path": path},
    "head": lambda path: {"path": path},
    "tail": lambda path: {"path": path},
    "grep": lambda path: {"path": path, "pattern": "SECRET"},
    "search": lambda path: {"path": path, "query": "SECRET"},
    "file_write": lambda path: {"path": path, "content": "overwritten"},
}


@pytest.fixture
def files(tmp_path: Path, set_env: SetEnv) -> Path:
    """The files directory (set as DURABLE_TOOL_FILES_DIR), next to a secret outside it."""
    root = tmp_path / "files"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("TOP SECRET value\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("TOP SECRET value\n")
    (root / "notes.txt").write_text("first line\nSECRET inside is fine\nlast line\n")
    (root / "link_out.txt").symlink_to(tmp_path / "secret.txt")
    (root / "link_dir").symlink_to(tmp_path / "outside")
    (root / "link_in.txt").symlink_to(root / "notes.txt")
    set_env(tool_files_dir=str(root))
    return root


@pytest.mark.parametrize("tool", FILE_CALLS)
def test_file_tools_refuse_every_path_when_no_directory_is_set(
        tool: str, set_env: SetEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "notes.txt").write_text("SECRET\n")
    monkeypatch.chdir(tmp_path)
    for path in ("notes.txt", str(tmp_path / "notes.txt")):
        assert "DURABLE_TOOL_FILES_DIR" in failed(call(tool, **FILE_CALLS[tool](path)))
    assert (tmp_path / "notes.txt").read_text() == "SECRET\n"


@pytest.mark.parametrize("tool", FILE_CALLS)
@pytest.mark.parametrize("escape", [
    "../secret.txt", "sub/../../secret.txt", "{tmp}/secret.txt", "/etc/passwd",
    "link_out.txt", "link_dir/secret.txt", "{root}/../secret.txt",
])
def test_file_tools_stay_inside_the_directory(tool: str, escape: str, files: Path) -> None:
    path = escape.format(tmp=files.parent, root=files)
    message = failed(call(tool, **FILE_CALLS[tool](path)))
    assert "outside the files directory" in message and "TOP SECRET" not in message
    assert (files.parent / "secret.txt").read_text() == "TOP SECRET value\n"
    assert (files.parent / "outside" / "secret.txt").read_text() == "TOP SECRET value\n"


def test_file_tools_work_inside_the_directory(files: Path) -> None:
    assert succeeded(call("file_read", path="notes.txt")).startswith("first line\n")
    assert "SECRET inside" in succeeded(call("file_read", path=str(files / "link_in.txt")))
    assert ">>>SECRET<<< inside" in succeeded(call("search", path="notes.txt", query="secret"))
    found = succeeded(call("grep", path="./notes.txt", pattern="SECRET", context_lines=1))
    assert "--- Match at line 2 ---" in found and ">    2 | SECRET inside" in found
    assert "1 | first line" in found and str(files) not in found  # paths shown relative


def test_file_write_creates_files_only_inside(files: Path, tmp_path: Path) -> None:
    assert "Successfully wrote 5 characters to a/b/c.txt" in succeeded(
        call("file_write", path="a/b/c.txt", content="hello", create_dirs=True))
    assert (files / "a" / "b" / "c.txt").read_text() == "hello"
    assert "Parent directory does not exist" in failed(
        call("file_write", path="x/y.txt", content="hello"))
    (files / "dangling").symlink_to(tmp_path / "created_outside.txt")
    assert "outside" in failed(call("file_write", path="dangling", content="x"))
    assert not (tmp_path / "created_outside.txt").exists()
    assert "outside" in failed(call("file_write", path="../../escape/x.txt", content="x",
                                    create_dirs=True))
    assert not (tmp_path.parent / "escape").exists()
    assert "larger than" in failed(call("file_write", path="big.txt",
                                        content="x" * (1024 * 1024 + 1)))
    assert "directory" in failed(call("file_write", path=".", content="x"))


def test_file_read_is_bounded_and_refuses_what_is_not_a_file(files: Path) -> None:
    (files / "big.txt").write_bytes(b"y" * (1024 * 1024 + 10))
    result = succeeded(call("file_read", path="big.txt"))
    body, note = result.split("\n", 1)
    assert body == "y" * 1024 * 1024 and note.startswith("[truncated:")
    os.mkfifo(files / "pipe")  # a FIFO with no writer would hang a plain open()
    for tool in ("file_read", "head", "tail", "grep"):
        assert "not a file" in failed(call(tool, **FILE_CALLS[tool]("pipe")))
    assert "not a file" in failed(call("file_read", path="."))
    assert "File not found" in failed(call("file_read", path="nope.txt"))
    (files / "blob.bin").write_bytes(b"\x00\x01" * 100)
    assert "Binary file" in failed(call("grep", path="blob.bin", pattern="x"))


def test_head_and_tail_number_lines_as_in_the_file(files: Path) -> None:
    (files / "log.txt").write_text("".join(f"line {n}\n" for n in range(1, 101)))
    first = succeeded(call("head", path="log.txt", lines=3))
    assert first.splitlines()[-3:] == ["   1 | line 1", "   2 | line 2", "   3 | line 3"]
    last = succeeded(call("tail", path="log.txt", lines=3))
    assert last.splitlines()[-3:] == ["  98 | line 98", "  99 | line 99", " 100 | line 100"]
    # 20 bytes from the end begin inside "line 98": that partial line is left out.
    window = succeeded(call("tail", path="log.txt", lines=10, bytes_limit=20))
    assert window.splitlines()[-2:] == ["  99 | line 99", " 100 | line 100"]
    assert "line 98" not in window and "only the last 20 bytes" in window
    assert "byte limit" in succeeded(call("head", path="log.txt", lines=50, bytes_limit=30))
    assert "at least 1" in failed(call("head", path="log.txt", lines=0))


def test_grep_bounds_matches_and_pattern_time(files: Path, set_env: SetEnv) -> None:
    (files / "many.txt").write_text("hit\n" * 5000)
    assert "Showing first 1000 matches" in succeeded(
        call("search", path="many.txt", query="hit", max_matches=10**9))
    assert "Invalid regex" in failed(call("grep", path="notes.txt", pattern="(unclosed"))
    (files / "redos.txt").write_text("a" * 40 + "b\n")
    set_env(tool_timeout_s="0.5")
    assert "took longer than 0.5 s" in failed(
        call("grep", path="redos.txt", pattern="(a|aa)+$"))


# ---- python_exec ---------------------------------------------------------------------

def test_python_exec_is_off_unless_the_operator_turns_it_on(set_env: SetEnv,
                                                            tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    message = failed(call("python_exec", code=f"open({str(marker)!r}, 'w').write('x')"))
    assert "DURABLE_TOOL_PYTHON_EXEC" in message and not marker.exists()
    set_env(tool_python_exec="false")
    assert "off" in failed(call("python_exec", code="print(1)"))


def test_python_exec_runs_in_a_scrubbed_bounded_process(
        set_env: SetEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    set_env(tool_python_exec="true")
    monkeypatch.setenv("DURABLE_REDIS_URL", "redis://:hunter2@redis:6379/0")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    shown = succeeded(call("python_exec", code="import os\nprint(sorted(os.environ.items()))"))
    assert "hunter2" not in shown and "sk-do-not-leak" not in shown
    assert "DURABLE_" not in shown and "'PATH'" in shown
    assert succeeded(call("python_exec", code="print(sum(range(10)))")) == "45\n"
    assert "no output" in succeeded(call("python_exec", code="x = 1"))
    assert "ValueError: boom (line 2)" in failed(
        call("python_exec", code="x = 1\nraise ValueError('boom')"))
    assert "SyntaxError" in failed(call("python_exec", code="def ("))
    assert "exit status 3" in failed(call("python_exec", code="raise SystemExit(3)"))
    assert "[truncated:" in succeeded(call("python_exec", code="print('x' * 200000)"))
    stopped = failed(call("python_exec", timeout=1,
                          code="print('started', flush=True)\nwhile True: pass"))
    assert "timed out after 1 s" in stopped and stopped.endswith("\nstarted\n")


# ---- search services -----------------------------------------------------------------

def test_search_services_say_what_they_miss(monkeypatch: pytest.MonkeyPatch) -> None:
    if "ddgs" not in sys.modules:
        try:
            __import__("ddgs")
        except ImportError:
            assert "ddgs" in failed(call("duckduckgo_search", query="strands"))
    assert "between 1 and 50" in failed(call("duckduckgo_search", query="x", max_results=99))
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    assert "TAVILY_API_KEY" in failed(call("tavily_search", query="strands"))
    assert "No search query" in failed(call("tavily_search", query=" "))


# ---- python tools by import path -----------------------------------------------------

@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh importable package of tools (unique name: no sys.modules leftovers)."""
    name = f"durable_test_tools_{uuid.uuid4().hex[:8]}"
    root = tmp_path / "site" / name
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "decorated.py").write_text(
        "from strands import tool\n\n@tool\ndef add(a: int, b: int) -> int:\n"
        "    '''Add two numbers.'''\n    return a + b\n\n"
        "@tool\ndef shout(text: str) -> str:\n    '''Upper-case.'''\n    return text.upper()\n")
    (root / "echo.py").write_text(
        "TOOL_SPEC = {'name': 'echo', 'description': 'Echo', 'inputSchema': {'json': "
        "{'type': 'object', 'properties': {'text': {'type': 'string'}}}}}\n\n"
        "def echo(tool, **kwargs):\n    return {'toolUseId': tool['toolUseId'], "
        "'status': 'success', 'content': [{'text': tool['input']['text']}]}\n")
    (root / "broken.py").write_text("raise RuntimeError('import-time\\nfailure')\n")
    (root / "plain.py").write_text("def helper():\n    return 1\n")
    (root / "side_effect.py").write_text(f"open({str(tmp_path / 'imported')!r}, 'w')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    yield name
    for module in [m for m in sys.modules if m.startswith(name)]:
        del sys.modules[module]


def test_python_tools_load_by_each_reference_form(package: str) -> None:
    policy = ToolPolicy(tool_modules=package)
    assert [t.tool_name for t in load_python_tool("calculator", ToolPolicy())] == ["calculator"]
    assert [t.tool_name for t in load_python_tool("strands_cli.tools.grep", ToolPolicy())] \
        == ["grep"]
    assert sorted(t.tool_name for t in load_python_tool(f"{package}.decorated", policy)) \
        == ["add", "shout"]
    for reference in (f"{package}.decorated.add", f"{package}.decorated:add"):
        (tool,) = load_python_tool(reference, policy)
        assert tool.tool_name == "add"
    (echo,) = load_python_tool(f"{package}.echo", policy)
    assert succeeded(call(echo, text="hi")) == "hi"
    (echo_fn,) = load_python_tool(f"{package}.echo.echo", policy)
    assert echo_fn.tool_name == "echo"


def test_python_tools_outside_the_allowed_modules_are_not_imported(package: str,
                                                                  tmp_path: Path) -> None:
    for policy in (ToolPolicy(), ToolPolicy(tool_modules=f"{package}.other"),
                   ToolPolicy(tool_modules=package[:-2])):
        with pytest.raises(ToolLoadError, match="DURABLE_TOOL_MODULES") as refused:
            load_python_tool(f"{package}.side_effect", policy)
        assert f"{package}.side_effect" in str(refused.value)
    assert not (tmp_path / "imported").exists()
    with pytest.raises(ToolLoadError, match="not one of strands-cli's native"):
        load_python_tool("strands_cli.tools.shell", ToolPolicy(tool_modules="strands_cli"))
    for reference in ("/tmp/tool.py", ".relative", "pkg.mod:a:b", "pkg mod"):
        with pytest.raises(ToolLoadError, match="not an import path"):
            load_python_tool(reference, ToolPolicy(tool_modules="pkg,/tmp"))


@pytest.mark.parametrize(("suffix", "says"), [
    (".missing", "cannot import"), (".missing.fn", "cannot import"),
    (".broken", "RuntimeError: import-time failure"), (".decorated.nothing", "no attribute"),
    (".decorated:nothing", "no attribute"), (".plain", "not a valid module"),
    (".plain.helper", "neither a @tool function"),
])
def test_python_tool_failures_are_one_line_load_errors(package: str, suffix: str,
                                                       says: str) -> None:
    with pytest.raises(ToolLoadError) as failure:
        load_python_tool(package + suffix, ToolPolicy(tool_modules=package))
    assert says in str(failure.value) and "\n" not in str(failure.value)
    assert package + suffix in str(failure.value)


def test_spec_verify_reports_a_valid_spec_and_names_what_is_wrong() -> None:
    import json as _json

    good = ("version: 0\nname: ok\nruntime: {provider: scripted}\n"
            "inputs: {required: {topic: string}}\n"
            "agents: {a: {prompt: 'A.'}}\n"
            "pattern: {type: chain, config: {steps: [{agent: a, input: '{{ topic }}'}]}}\n")
    report = _json.loads(succeeded(call("spec_verify", spec_content=good)))
    assert report["schema_valid"] is True and report["spec_info"]["pattern_type"] == "chain"
    bad = good.replace("agent: a,", "agent: nobody,")
    report = _json.loads(succeeded(call("spec_verify", spec_content=bad)))
    assert report["schema_valid"] is False and "unknown agent 'nobody'" in \
        report["errors"][0]["message"]
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True))
    report = _json.loads(succeeded(call("spec_verify", spec_content=bomb)))
    assert report["schema_valid"] is False
