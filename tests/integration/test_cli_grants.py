"""`durable run --allow*` as a user runs it, in real processes: a spec the fleet's
default tool policy refuses is refused on the user's machine too (exit 2, naming the flag
that would allow it), and runs with the grant: on the local store (a real
redis-server in DURABLE_HOME) and in memory. `durable validate` lists the grants a spec
needs. Grants never reach a fleet's Redis, and malformed ones are usage errors."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import REPO
from local_store import DURABLE, RUN_TIMEOUT_S, LocalHome, private_home

from strands_durable.settings import ToolPolicy

pytestmark = pytest.mark.integration


@pytest.fixture
def home(tmp_path: Path) -> Iterator[LocalHome]:
    yield from private_home(tmp_path)


def durable(home: LocalHome, *args: str | Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in home.env(OTEL_SDK_DISABLED="true", **env).items()
             if k not in {f"DURABLE_{f.upper()}" for f in ToolPolicy.model_fields}}
    clean.update(env)
    return subprocess.run([*DURABLE, *map(str, args)], cwd=REPO, env=clean,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)


def python_exec_spec(tmp_path: Path) -> tuple[Path, Path]:
    """A spec whose scripted model asks python_exec to write a file: the file exists
    only if the tool ran."""
    marker = tmp_path / "ran.txt"
    code = f"open({str(marker)!r}, 'w').write('ran')"
    data: dict[str, Any] = {
        "version": 0, "name": "exec", "runtime": {"provider": "scripted", "script": {"rules": [
            {"agent": "coder", "turn": 1,
             "tool_calls": [{"name": "python_exec", "input": {"code": code}}]},
            {"agent": "coder", "reply": "done"}]}},
        "agents": {"coder": {"prompt": "You run code.", "tools": ["python_exec"]}},
        "pattern": {"type": "chain", "config": {"steps": [{"agent": "coder",
                                                            "input": "go"}]}}}
    path = tmp_path / "exec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path, marker


def test_python_exec_refused_without_the_grant_and_run_with_it(
        home: LocalHome, tmp_path: Path) -> None:
    spec, marker = python_exec_spec(tmp_path)
    refused = durable(home, "run", spec)
    assert refused.returncode == 2, refused.stderr
    assert "--allow python_exec" in refused.stderr and "agents.coder.tools" in refused.stderr
    assert not marker.exists()
    ran = durable(home, "run", spec, "--allow", "python_exec")  # the local store
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "completed" in ran.stdout and marker.read_text() == "ran"


def test_validate_lists_the_grants_a_spec_needs(home: LocalHome, tmp_path: Path) -> None:
    spec = tmp_path / "needs.yaml"
    spec.write_text(yaml.safe_dump({
        "version": 0, "name": "needs", "runtime": {"provider": "scripted"},
        "tools": {"python": ["python_exec", "mypkg.tools"],
                  "mcp": [{"id": "gh", "command": "npx",
                           "env": {"TOKEN": "${GITHUB_TOKEN}"}}]},
        "agents": {"a": {"prompt": "p"}},
        "pattern": {"type": "chain", "config": {"steps": [{"agent": "a", "input": "go"}]}}}))
    text = durable(home, "validate", spec)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith("valid: needs") and lines[1].startswith("needs grants:")
    assert [line.strip() for line in lines[2:]] == [
        "--allow python_exec", "--allow-tool-module mypkg.tools",
        "--allow-mcp-command npx", "--allow-secret GITHUB_TOKEN"]
    doc = json.loads(durable(home, "validate", spec, "--json").stdout)
    assert [g["arg"] for g in doc["grants"]] == [line.strip() for line in lines[2:]]
    plain = durable(home, "validate", REPO / "examples" / "chain-research.yaml", "--json")
    assert json.loads(plain.stdout)["grants"] == []
    # What the operator allows needs no grant.
    fleet = durable(home, "validate", spec, "--json", DURABLE_TOOL_PYTHON_EXEC="true",
                    DURABLE_MCP_COMMANDS="npx")
    assert [g["arg"] for g in json.loads(fleet.stdout)["grants"]] == [
        "--allow-tool-module mypkg.tools", "--allow-secret GITHUB_TOKEN"]


def test_grants_do_not_reach_a_fleets_redis(home: LocalHome, tmp_path: Path) -> None:
    spec, marker = python_exec_spec(tmp_path)
    fleet = durable(home, "run", spec, "--allow", "python_exec",
                    DURABLE_REDIS_URL="redis://127.0.0.1:1/0")
    assert fleet.returncode == 2
    assert "DURABLE_REDIS_URL" in fleet.stderr and "--allow" in fleet.stderr
    assert not marker.exists()
    memory = durable(home, "run", spec, "--allow", "python_exec", "--ephemeral",
                     DURABLE_REDIS_URL="redis://127.0.0.1:1/0")
    assert memory.returncode == 0, memory.stderr  # in memory: this process runs it alone
    assert marker.exists()


@pytest.mark.parametrize(("flags", "message"), [
    (["--allow", "python"], "--allow takes python_exec"),
    (["--allow", "network"], "--allow takes python_exec"),
    (["--allow-secret", "A=B"], "--allow-secret 'A=B': not an environment variable name"),
    (["--allow-mcp-command", "npx;sh"], None),  # a command name: allowed form, no match
    (["--allow-tool-module", "../x"], "not a dotted module path"),
])
def test_malformed_grants_are_usage_errors(home: LocalHome, tmp_path: Path,
                                           flags: list[str], message: str | None) -> None:
    spec, marker = python_exec_spec(tmp_path)
    result = durable(home, "run", spec, "--ephemeral", *flags)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert (message or "--allow python_exec") in result.stderr
    assert not marker.exists()
