"""Specs in Python (spec/dump.py, spec/public.py): every spec that loads today dumps to
YAML that loads back to an equal model and passes the same checks; a spec built as
objects dumps to a file `durable validate` accepts; validate_spec reports what
`durable validate` would."""

from __future__ import annotations

import doctest
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import EXAMPLES, FIXTURES, REPO

import strands_durable.spec.dump as dump_module
import strands_durable.spec.public as public_module
from strands_durable import (
    AgentNode,
    AgentSpec,
    AgentStep,
    ChainConfig,
    Edge,
    GraphConfig,
    Inputs,
    InputVarSpec,
    Pattern,
    Runtime,
    ScriptConfig,
    ScriptRule,
    Spec,
    SpecError,
    WorkflowConfig,
    WorkflowTask,
    dump_spec,
    load_spec,
    validate_spec,
)

# Our examples, strands-cli's own (verbatim copies of ../shared/strands-cli) and its
# repository's corpus (tests/fixtures/strands-cli-corpus).
OURS = sorted(EXAMPLES.glob("*.yaml"))
THEIRS = sorted((FIXTURES / "strands-cli").glob("*.yaml")) \
    + sorted((FIXTURES / "strands-cli-corpus").rglob("*.yaml"))
DURABLE = Path(sys.executable).parent / "durable"


def _id(path: Path) -> str:
    return str(path.relative_to(REPO))


def _round_trip(path: Path, tmp_path: Path) -> tuple[Spec, str]:
    spec = load_spec(path)
    text = dump_spec(spec)
    # Beside nothing: skills and `$ref` agents were read from the original's folder and
    # are in the model now (inline agents; skills' files looked for relative to the copy).
    copy = tmp_path / path.name
    copy.write_text(text)
    again = load_spec(copy)
    assert again.model_copy(update={"skill_library": None}) \
        == spec.model_copy(update={"skill_library": None})
    assert dump_spec(again) == text  # stable: the dump of the dump is the same text
    return spec, text


def _key_paths(value: Any, prefix: str = "") -> set[str]:
    if isinstance(value, dict):
        found = set()
        for key, inner in value.items():
            found |= {f"{prefix}.{key}"} | _key_paths(inner, f"{prefix}.{key}")
        return found
    if isinstance(value, list):
        return set().union(*(_key_paths(item, f"{prefix}[{i}]")
                             for i, item in enumerate(value)))
    return set()


@pytest.mark.parametrize("path", OURS, ids=_id)
def test_our_examples_round_trip_and_write_only_what_they_say(path: Path,
                                                              tmp_path: Path) -> None:
    _spec, text = _round_trip(path, tmp_path)
    written = _key_paths(yaml.safe_load(text))
    original = _key_paths(yaml.safe_load(path.read_text()))
    assert written - original == set()  # no default the spec did not set


def test_every_strands_cli_spec_that_loads_round_trips(tmp_path: Path) -> None:
    """One test over the corpus (the specs refused today, as its EXPECTED.yaml says, are
    counted, not skipped one by one), and not vacuous: most of it loads."""
    loaded = 0
    for n, path in enumerate(THEIRS):
        try:
            load_spec(path)
        except SpecError:
            continue
        folder = tmp_path / str(n)
        folder.mkdir()
        try:
            _round_trip(path, folder)
        except AssertionError as error:
            raise AssertionError(f"{path}: {error}") from None
        loaded += 1
    assert loaded >= 60, loaded


def _built() -> Spec:
    """A spec as a program builds it: objects only, no YAML."""
    return Spec(
        version=0, name="built-in-python", description="Two steps, then a summary",
        runtime=Runtime(provider="scripted", script=ScriptConfig(rules=(
            ScriptRule(agent="writer", reply="Line one.\nLine two.\n"),))),
        inputs=Inputs(required={"topic": InputVarSpec(type="string")}),
        agents={"researcher": AgentSpec(prompt="Research {{ topic }}."),
                "writer": AgentSpec(prompt="Write it up.\nKeep it short.")},
        pattern=Pattern(type="chain", config=ChainConfig(steps=[
            AgentStep(agent="researcher", input="About {{ topic }}"),
            AgentStep(agent="writer", input="From:\n{{ steps[0].response }}")])))


def test_a_spec_built_as_objects_dumps_to_what_durable_validate_accepts(
        tmp_path: Path) -> None:
    spec = _built()
    assert validate_spec(spec, variables={"topic": "tides"}) == []
    path = tmp_path / "built.yaml"
    path.write_text(dump_spec(spec))
    done = subprocess.run([str(DURABLE), "validate", str(path), "--var", "topic=tides"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "valid: built-in-python (chain)" in done.stdout
    assert load_spec(path, variables={"topic": "tides"}) == spec.model_copy()


def test_the_dump_writes_prompts_as_blocks_and_no_defaults() -> None:
    text = dump_spec(_built())
    assert "prompt: |-\n      Write it up.\n      Keep it short.\n" in text
    data = yaml.safe_load(text)
    assert list(data) == ["version", "name", "description", "runtime", "agents", "pattern",
                          "inputs"]
    assert data["runtime"] == {"provider": "scripted", "script": {"rules": [
        {"agent": "writer", "reply": "Line one.\nLine two.\n"}]}}
    assert "failure_policy" not in text and "max_parallel" not in text


def test_other_patterns_built_as_objects_are_valid() -> None:
    agents = {"a": AgentSpec(prompt="A."), "b": AgentSpec(prompt="B.")}
    workflow = Spec(version=0, name="wf", runtime=Runtime(provider="scripted"), agents=agents,
                    pattern=Pattern(type="workflow", config=WorkflowConfig(tasks=[
                        WorkflowTask(id="first", agent="a"),
                        WorkflowTask(id="second", agent="b", deps=["first"])])))
    graph = Spec(version=0, name="g", runtime=Runtime(provider="scripted"), agents=agents,
                 pattern=Pattern(type="graph", config=GraphConfig(
                     nodes={"one": AgentNode(agent="a"), "two": AgentNode(agent="b")},
                     edges=[Edge.model_validate({"from": "one", "to": ["two"]})])))
    for spec in (workflow, graph):
        assert validate_spec(spec) == [], spec.name
        assert validate_spec(dump_spec(spec)) == [], spec.name


def test_validate_spec_reports_what_durable_validate_refuses(tmp_path: Path) -> None:
    wrong = _built().model_copy(update={"name": ""})
    problems = validate_spec(wrong, variables={"topic": "tides"})
    assert problems == ["<spec>: name: must not be empty"]
    assert validate_spec(_built()) == [
        "<spec>: inputs.required.topic: required input 'topic' has no value; "
        "give it one among the variables"]
    path = tmp_path / "wrong.yaml"
    path.write_text(dump_spec(wrong))
    done = subprocess.run([str(DURABLE), "validate", str(path), "--var", "topic=tides"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert "name: must not be empty" in done.stdout + done.stderr


def test_load_spec_raises_and_says_how_to_load_a_file() -> None:
    with pytest.raises(SpecError, match=r"pass a pathlib\.Path"):
        load_spec("examples/chain-research.yaml")
    with pytest.raises(SpecError, match="missing required field 'runtime'"):
        load_spec({"version": 0, "name": "x"})
    assert load_spec((EXAMPLES / "chain-research.yaml").read_text()).name == "chain-research"


@pytest.mark.parametrize("module", [dump_module, public_module], ids=lambda m: m.__name__)
def test_the_docstring_examples_are_true(module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # the examples name files relative to the repository
    failed, tried = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert tried > 0 and failed == 0
