"""The grant decision (spec/grants.py, spec/tool_checks.py tool_needs): what a spec needs
beyond the tool policy, each with the `durable run` flag that allows it; the flags'
values checked; a grant widens exactly its part of the policy and nothing else."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from strands_durable.errors import SpecError
from strands_durable.settings import ToolPolicy, current_tool_policy
from strands_durable.spec.grants import (
    Grant,
    Grants,
    grant,
    granted,
    parse_grants,
    surveying,
    widen,
)
from strands_durable.spec.loader import load_spec_data
from strands_durable.spec.tool_checks import check_tools, tool_needs


@pytest.fixture(autouse=True)
def default_policy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for field in ToolPolicy.model_fields:
        monkeypatch.delenv(f"DURABLE_{field.upper()}", raising=False)
    current_tool_policy.cache_clear()
    yield
    current_tool_policy.cache_clear()


DEFAULT = ToolPolicy(_env_file=None, tool_modules="", mcp_commands="", tool_secrets="",
                     tool_python_exec=False)


def spec(**tools: Any) -> dict[str, Any]:
    return {"version": 0, "name": "g", "runtime": {"provider": "scripted"},
            "tools": tools, "agents": {"a": {"prompt": "p"}},
            "pattern": {"type": "chain", "config": {"steps": [{"agent": "a",
                                                                "input": "go"}]}}}


EVERYTHING = spec(
    python=["python_exec", "mypkg.tools:search"],
    mcp=[{"id": "fs", "command": "npx", "env": {"T": "${GITHUB_TOKEN}"}},
         {"id": "web", "url": "https://mcp.example.com", "headers": {"A": "Bearer ${WEB}"}}],
    http_executors=[{"id": "api", "base_url": "https://api.example.com",
                     "headers": {"Authorization": "${API_TOKEN}"}}])
NEEDED = [Grant("--allow", "python_exec"), Grant("--allow-tool-module", "mypkg.tools"),
          Grant("--allow-mcp-command", "npx"), Grant("--allow-secret", "GITHUB_TOKEN"),
          Grant("--allow-secret", "WEB"), Grant("--allow-secret", "API_TOKEN")]


def surveyed(data: dict[str, Any]) -> tuple[Any, list[Grant]]:
    with surveying() as needs:
        loaded = load_spec_data(data, "g.yaml")
    return loaded, list(needs)


def test_each_need_names_its_grant_in_the_specs_order() -> None:
    loaded, _ = surveyed(EVERYTHING)
    needs = tool_needs(loaded.spec, DEFAULT)
    assert [need.grant for need in needs] == NEEDED
    assert [need.path for need in needs][:3] == ["tools.python[0]", "tools.python[1]",
                                                 "tools.mcp[0].command"]
    for need in needs:
        assert str(need.grant) in need.problem  # the refusal names the flag


def test_the_operators_policy_needs_no_grant() -> None:
    loaded, _ = surveyed(EVERYTHING)
    fleet = ToolPolicy(tool_modules="mypkg", mcp_commands="npx", tool_python_exec=True,
                       tool_secrets="GITHUB_TOKEN,WEB,API_TOKEN")
    assert tool_needs(loaded.spec, fleet) == []


def test_a_grant_widens_exactly_its_part_and_nothing_needed_is_left() -> None:
    loaded, _ = surveyed(EVERYTHING)
    grants = Grants(python_exec=True, mcp_commands=("npx",), tool_modules=("mypkg.tools",),
                    secrets=("GITHUB_TOKEN", "WEB", "API_TOKEN"))
    assert tool_needs(loaded.spec, widen(DEFAULT, grants)) == []
    check_tools(loaded.spec, "g.yaml", DEFAULT, grants)  # accepted
    partial = Grants(mcp_commands=("npx",))
    left = [need.grant for need in tool_needs(loaded.spec, widen(DEFAULT, partial))]
    assert left == [g for g in NEEDED if g.flag != "--allow-mcp-command"]
    with pytest.raises(SpecError, match=r"--allow python_exec"):
        check_tools(loaded.spec, "g.yaml", DEFAULT, partial)


def test_widen_adds_to_the_operators_lists_and_never_narrows() -> None:
    fleet = ToolPolicy(mcp_commands="uvx", tool_secrets="A", tool_modules="acme",
                       tool_python_exec=True, tool_http_allow="10.0.0.1")
    wide = widen(fleet, Grants(mcp_commands=("npx", "uvx"), secrets=("B",)))
    assert wide.commands == ("uvx", "npx") and wide.secrets == ("A", "B")
    assert wide.module_prefixes == ("acme",) and wide.tool_python_exec
    assert wide.http_allow == ("10.0.0.1",)  # not a grant: untouched
    assert widen(fleet, Grants()) is fleet
    assert not widen(DEFAULT, Grants(secrets=("X",))).tool_python_exec


def test_without_a_grant_the_first_need_is_refused_naming_the_flag() -> None:
    with pytest.raises(SpecError) as info:
        load_spec_data(EVERYTHING, "g.yaml")
    text = str(info.value)
    assert "tools.python[0]" in text and "--allow python_exec" in text
    assert "DURABLE_TOOL_PYTHON_EXEC" in text


def test_the_context_grant_is_what_the_check_reads_and_only_there() -> None:
    import contextvars

    def in_a_run() -> Any:
        grant(parse_grants(["python_exec"], ["npx"], ["GITHUB_TOKEN", "WEB", "API_TOKEN"],
                           ["mypkg.tools"]))
        return load_spec_data(EVERYTHING, "g.yaml")

    assert contextvars.copy_context().run(in_a_run).spec.name == "g"
    assert granted() == Grants()  # the grant stayed in that run's context
    with pytest.raises(SpecError):
        load_spec_data(EVERYTHING, "g.yaml")


def test_a_survey_lists_every_need_once_and_refuses_nothing() -> None:
    twice = spec(python=["python_exec"], http_executors=[
        {"id": "x", "base_url": "https://a.example.com", "headers": {"A": "${K}", "B": "${K}"}}])
    twice["agents"]["a"]["tools"] = ["python_exec", "x"]
    _, needs = surveyed(twice)
    assert needs == [Grant("--allow", "python_exec"), Grant("--allow-secret", "K")]
    _, none = surveyed(spec(python=["calculator"]))
    assert none == []


def test_a_survey_still_refuses_what_no_grant_allows() -> None:
    bad = spec(python=["python_exec"],
               http_executors=[{"id": "x", "base_url": "file:///etc/passwd"}])
    with surveying(), pytest.raises(SpecError, match="not an http"):
        load_spec_data(bad, "g.yaml")


@pytest.mark.parametrize(("args", "message"), [
    ({"allow": ["python-exec"]}, "--allow 'python-exec': not a grant; --allow takes python_exec"),
    ({"allow": ["everything"]}, "--allow takes python_exec"),
    ({"mcp_commands": ["npx,sh"]}, "--allow-mcp-command 'npx,sh': not a command"),
    ({"mcp_commands": ["npx -y"]}, "not a command"),
    ({"mcp_commands": [""]}, "not a command"),
    ({"secrets": ["GITHUB-TOKEN"]}, "--allow-secret 'GITHUB-TOKEN': not an environment"),
    ({"secrets": ["A,B"]}, "not an environment variable name"),
    ({"tool_modules": ["my pkg"]}, "--allow-tool-module 'my pkg': not a dotted module"),
    ({"tool_modules": [""]}, "not a dotted module"),
    ({"tool_modules": ["a," + "b"]}, "not a dotted module"),
    ({"secrets": ["X" * 500]}, "..."),
])
def test_malformed_grants_are_refused_naming_the_flag(args: dict[str, Any],
                                                      message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_grants(**args)
    assert message in str(info.value)
    assert len(str(info.value)) < 300  # a hostile value is not quoted back whole


def test_parsed_grants_in_order_without_repeats() -> None:
    grants = parse_grants(["python_exec", "python_exec"], ["npx", "npx", "/usr/bin/uvx"],
                          ["A"], ["acme.tools"])
    assert grants == Grants(True, ("npx", "/usr/bin/uvx"), ("A",), ("acme.tools",))
    assert [str(g) for g in grants.listed()][:2] == ["--allow python_exec",
                                                     "--allow-mcp-command npx"]
    assert parse_grants().empty
