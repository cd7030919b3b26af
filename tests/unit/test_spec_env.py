"""A spec's `env` section as strands-cli acts on it: `env.secrets` maps a `${NAME}`
placeholder to the environment variable actually read (checked against the fleet's
DURABLE_TOOL_SECRETS under that name); only `source: env`; `env.mounts` is refused."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from strands_durable.errors import SpecError
from strands_durable.settings import current_tool_policy
from strands_durable.spec.loader import load_spec_data


@pytest.fixture(autouse=True)
def lend(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("DURABLE_TOOL_SECRETS", "MY_GITHUB_PAT,PLAIN_TOKEN")
    monkeypatch.setenv("DURABLE_MCP_COMMANDS", "python")
    current_tool_policy.cache_clear()
    yield
    current_tool_policy.cache_clear()


def spec(env: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    return {
        "version": 0, "name": "github", "runtime": {"provider": "scripted"},
        "env": env,
        "tools": {
            "http_executors": [{"id": "gh", "base_url": "https://api.github.com",
                                "headers": headers}],
            "mcp": [{"id": "local", "command": "python", "args": ["-m", "srv"],
                     "env": {"TOKEN": headers.get("Authorization", "")}}],
        },
        "agents": {"a": {"prompt": "You help.", "tools": ["gh", "local"]}},
        "pattern": {"type": "chain", "config": {"steps": [{"agent": "a", "input": "go"}]}},
    }


GITHUB = {"secrets": [{"name": "GITHUB_TOKEN", "source": "env", "key": "MY_GITHUB_PAT"}]}


def test_a_named_secret_reads_its_key_as_strands_cli_does() -> None:
    loaded = load_spec_data(spec(GITHUB, {"Authorization": "Bearer ${GITHUB_TOKEN}",
                                          "X-Other": "${PLAIN_TOKEN}"}), "s.yaml")
    tools = loaded.spec.tools
    assert tools is not None
    assert tools.http_executors[0].headers == {"Authorization": "Bearer ${MY_GITHUB_PAT}",
                                               "X-Other": "${PLAIN_TOKEN}"}
    assert tools.mcp[0].env == {"TOKEN": "Bearer ${MY_GITHUB_PAT}"}
    assert loaded.spec.env is not None and loaded.spec.env.secrets[0].key == "MY_GITHUB_PAT"


def test_the_fleet_check_names_the_variable_actually_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DURABLE_TOOL_SECRETS", "GITHUB_TOKEN")
    current_tool_policy.cache_clear()
    with pytest.raises(SpecError) as info:
        load_spec_data(spec(GITHUB, {"Authorization": "Bearer ${GITHUB_TOKEN}"}), "s.yaml")
    assert info.value.path in ("tools.mcp[0].env.TOKEN",
                               "tools.http_executors[0].headers.Authorization")
    assert "${MY_GITHUB_PAT}" in info.value.problem


def test_a_secret_without_a_name_is_named_by_its_key() -> None:
    env = {"secrets": [{"source": "env", "key": "PLAIN_TOKEN"}]}
    loaded = load_spec_data(spec(env, {"X-Key": "${PLAIN_TOKEN}"}), "s.yaml")
    assert loaded.spec.tools is not None
    assert loaded.spec.tools.http_executors[0].headers == {"X-Key": "${PLAIN_TOKEN}"}


@pytest.mark.parametrize("source", ["secrets_manager", "ssm", "file"])
def test_only_env_secrets_are_supported(source: str) -> None:
    env = {"secrets": [{"source": "env", "key": "PLAIN_TOKEN"},
                       {"source": source, "key": "DB", "path": "arn:aws:x"}]}
    with pytest.raises(SpecError) as info:
        load_spec_data(spec(env, {}), "s.yaml")
    assert info.value.path == "env.secrets[1].source"
    assert repr(source) in info.value.problem and "use source: env" in info.value.problem


def test_mounts_are_refused_rather_than_ignored() -> None:
    with pytest.raises(SpecError) as info:
        load_spec_data(spec({"mounts": {"workspace": "/home/me/project"}}, {}), "s.yaml")
    assert info.value.path == "env.mounts"
    assert "DURABLE_TOOL_FILES_DIR" in info.value.problem
