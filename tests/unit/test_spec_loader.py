"""Spec loading: every strands-cli example loads; every bad spec fails with a precise
message naming the field path and the problem."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from strands_durable.errors import SpecError
from strands_durable.patterns.chain import ChainConfig
from strands_durable.patterns.evaluator_optimizer import EvaluatorOptimizerConfig
from strands_durable.patterns.graph import GraphConfig
from strands_durable.patterns.parallel import ParallelConfig
from strands_durable.patterns.workflow import HitlTask, WorkflowConfig
from strands_durable.spec.loader import (
    LoadedSpec,
    load_script_file,
    load_spec_data,
    load_spec_file,
    load_spec_text,
    parse_var_args,
)
from strands_durable.spec.model import Spec
from strands_durable.spec.script import ScriptConfig, ScriptRule
from strands_durable.spec.steps import AgentStep, HitlStep

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "strands-cli"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "strands-cli"
EXAMPLES = sorted(FIXTURES.glob("*.yaml"))
CHAIN = FIXTURES / "chain-3-step-research.yaml"


def _data(name: str = "chain-3-step-research.yaml") -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((FIXTURES / name).read_text())
    return data


def _spec_error(data: dict[str, Any], **kwargs: Any) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_spec_data(data, "bad.yaml", **kwargs)
    return info.value


# --- the shared examples -----------------------------------------------------


def test_fixtures_are_the_shared_examples() -> None:
    assert len(EXAMPLES) == 5
    if SHARED.is_dir():  # the copy must not drift from its source
        for path in EXAMPLES:
            assert path.read_text() == (SHARED / path.name).read_text(), path.name


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_loads_unchanged(path: Path) -> None:
    loaded = load_spec_file(path)
    assert loaded.source == str(path)
    assert loaded.text == path.read_text()
    assert loaded.spec_hash == hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_spec_round_trips_through_its_json_dump(path: Path) -> None:
    # The session stores the spec as JSON and workers rebuild it.
    spec = load_spec_file(path).spec
    dumped = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert Spec.model_validate(json.loads(json.dumps(dumped))) == spec


def test_chain_example_model() -> None:
    loaded = load_spec_file(CHAIN)
    spec = loaded.spec
    assert spec.runtime.provider == "ollama"
    assert spec.runtime.max_parallel == 5
    assert spec.runtime.budgets is not None and spec.runtime.budgets.max_tokens == 10000
    assert spec.runtime.failure_policy.retries == 2
    assert spec.runtime.failure_policy.backoff == "exponential"
    config = spec.pattern.config
    assert isinstance(config, ChainConfig)
    assert all(isinstance(step, AgentStep) for step in config.steps)
    step = config.steps[1]
    assert isinstance(step, AgentStep) and step.vars == {"analysis_depth": "detailed"}
    assert spec.outputs is not None and spec.outputs.artifacts[0].from_.startswith("# Research")
    assert loaded.variables == {"topic": "artificial intelligence safety"}


def test_examples_pick_their_config_model() -> None:
    kinds = {p.stem: type(load_spec_file(p).spec.pattern.config) for p in EXAMPLES}
    assert kinds == {
        "chain-3-step-research": ChainConfig,
        "evaluator-optimizer-writing-openai": EvaluatorOptimizerConfig,
        "graph-loop-with-break": GraphConfig,
        "parallel-with-reduce": ParallelConfig,
        "workflow-parallel-research": WorkflowConfig,
    }


def test_graph_and_workflow_details() -> None:
    graph = load_spec_file(FIXTURES / "graph-loop-with-break.yaml").spec.pattern.config
    assert isinstance(graph, GraphConfig)
    assert list(graph.nodes) == ["process", "check", "finalize"]  # first node is the entry
    assert graph.max_iterations == 3
    assert graph.edges[0].from_ == "process" and graph.edges[0].to == ["check"]
    assert graph.edges[1].choose is not None and graph.edges[1].choose[1].when == "else"
    flow = load_spec_file(FIXTURES / "workflow-parallel-research.yaml").spec
    assert flow.runtime.max_parallel == 2
    assert isinstance(flow.pattern.config, WorkflowConfig)
    assert flow.pattern.config.tasks[3].deps == ["technical", "applications"]


def test_unused_sections_are_kept() -> None:
    spec = load_spec_file(FIXTURES / "evaluator-optimizer-writing-openai.yaml").spec
    assert spec.model_extra == {"tags": ["evaluator-optimizer", "content", "openai"]}


def test_models_are_frozen() -> None:
    spec = load_spec_file(CHAIN).spec
    with pytest.raises(ValueError, match="frozen"):
        spec.name = "other"


def test_hitl_forms_are_parsed_by_type() -> None:
    data = _data()
    data["pattern"]["config"]["steps"].insert(
        1, {"type": "hitl", "prompt": "OK?", "context_display": "{{ steps[0].response }}"}
    )
    config = load_spec_data(data).spec.pattern.config
    assert isinstance(config, ChainConfig)
    assert isinstance(config.steps[1], HitlStep) and config.steps[1].prompt == "OK?"
    flow = _data("workflow-parallel-research.yaml")
    flow["pattern"]["config"]["tasks"].append(
        {"id": "review", "type": "hitl", "deps": ["synthesis"], "prompt": "Approve?"}
    )
    tasks = load_spec_data(flow).spec.pattern.config
    assert isinstance(tasks, WorkflowConfig) and isinstance(tasks.tasks[-1], HitlTask)


# --- hashing and overrides ---------------------------------------------------


def test_hash_is_stable_and_follows_the_text() -> None:
    text = CHAIN.read_text()
    first, second = load_spec_text(text), load_spec_text(text)
    assert first.spec_hash == second.spec_hash == hashlib.sha256(text.encode()).hexdigest()
    changed = load_spec_text(text.replace("3-5 key points", "4 key points"))
    assert changed.spec_hash != first.spec_hash
    assert load_spec_text(text + "\n# a comment\n").spec_hash != first.spec_hash


def test_overrides_and_provider_do_not_change_the_hash() -> None:
    plain = load_spec_file(CHAIN)
    other = load_spec_file(
        CHAIN, {"topic": "x"}, provider="scripted", script=ScriptConfig(delay_s=1.0)
    )
    assert other.spec_hash == plain.spec_hash
    assert other.text == plain.text


def test_dict_input_hashes_its_canonical_json() -> None:
    data = _data()
    loaded = load_spec_data(data, "<http>")
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
    assert loaded.text == canonical
    assert loaded.spec_hash == hashlib.sha256(canonical.encode()).hexdigest()
    reordered = dict(reversed(list(data.items())))
    assert load_spec_data(reordered).spec_hash == loaded.spec_hash
    assert loaded.source == "<http>"


def test_json_text_loads() -> None:
    text = json.dumps(_data(), indent="\t")
    assert load_spec_text(text).spec.name == "chain-3-step-research"


def test_overrides_beat_values_which_beat_defaults() -> None:
    data = _data()
    data["inputs"] = {
        "required": {"topic": {"type": "string", "default": "from default"}},
        "optional": {"tone": {"type": "string", "default": "dry"}, "extra": "string"},
        "values": {"topic": "from values"},
    }
    assert load_spec_data(data).variables == {"topic": "from values", "tone": "dry"}
    loaded = load_spec_data(data, overrides={"topic": "from --var", "new": "v"})
    assert loaded.variables == {"topic": "from --var", "tone": "dry", "new": "v"}
    assert loaded.spec.inputs is not None
    assert loaded.spec.inputs.values == {"topic": "from values"}  # the spec is untouched


@pytest.mark.parametrize(
    ("kind", "raw", "value"),
    [
        ("integer", "42", 42),
        ("integer", "-3", -3),
        ("number", "2.5", 2.5),
        ("number", "7", 7),
        ("boolean", "true", True),
        ("boolean", "No", False),
        ("string", "007", "007"),
        ("array", '["a", 1]', ["a", 1]),
        ("object", '{"k": 1}', {"k": 1}),
        ("integer", 5, 5),
    ],
)
def test_overrides_are_typed_by_their_declaration(kind: str, raw: Any, value: Any) -> None:
    data = _data()
    data["inputs"] = {"required": {"topic": "string", "n": kind}}
    loaded = load_spec_data(data, overrides={"topic": "t", "n": raw})
    assert loaded.variables["n"] == value
    assert type(loaded.variables["n"]) is type(value)


def test_provider_override_replaces_runtime_and_agent_providers() -> None:
    data = _data()
    data["agents"]["researcher"]["provider"] = "openai"
    spec = load_spec_data(data, provider="scripted").spec
    assert spec.runtime.provider == "scripted"
    assert spec.agents["researcher"].provider == "scripted"
    # Without the override the openai agent would send its key to the fixture's ollama
    # host (refused: test_provider_hosts.py); with the provider's own endpoint it loads.
    del data["runtime"]["host"]
    assert load_spec_data(data).spec.runtime.provider == "ollama"


def test_provider_override_rescues_an_unsupported_provider() -> None:
    data = _data()
    data["runtime"]["provider"] = "mistral"
    assert load_spec_data(data, provider="scripted").spec.runtime.provider == "scripted"


def test_script_from_spec_and_from_argument() -> None:
    data = _data()
    data["runtime"]["script"] = {"delay_s": 0.5, "rules": [{"agent": "researcher", "reply": "hi"}]}
    script = load_spec_data(data).spec.runtime.script
    assert script == ScriptConfig(delay_s=0.5, rules=(ScriptRule(agent="researcher", reply="hi"),))
    given = ScriptConfig(rules=(ScriptRule(reply="fixed"),))
    assert load_spec_data(data, script=given).spec.runtime.script == given
    assert load_spec_data(_data(), script=given).spec.runtime.script == given
    assert load_spec_data(_data()).spec.runtime.script is None


# --- bad specs -------------------------------------------------------------------


Mutation = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Mutation:
    """A mutation setting a dotted path ("pattern.config.steps.1.agent") to value."""

    def mutate(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = data
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return mutate


def _drop(path: str) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = data
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        del node[last]

    return mutate


BAD_CHAIN: list[tuple[str, Mutation, str, str]] = [
    # (id, mutation, expected path, expected problem fragment)
    (
        "unknown-pattern",
        _set("pattern.type", "pipeline"),
        "pattern.type",
        "must be one of: chain, routing, parallel, orchestrator_workers, evaluator_optimizer,"
        " graph, workflow (got 'pipeline')",
    ),
    (
        "missing-agent",
        _set("pattern.config.steps.1.agent", "writer"),
        "pattern.config.steps[1].agent",
        "unknown agent 'writer'; defined agents: researcher",
    ),
    (
        "agent-typo",
        _set("pattern.config.steps.1.agent", "reseacher"),
        "pattern.config.steps[1].agent",
        "unknown agent 'reseacher' (did you mean 'researcher'?)",
    ),
    (
        "undefined-template-variable",
        _set("pattern.config.steps.1.input", "About {{ topc }}"),
        "pattern.config.steps[1].input",
        "undefined template variable 'topc' (did you mean 'topic'?)",
    ),
    (
        "template-syntax",
        _set("pattern.config.steps.0.input", "line one\n{% for x in steps %}"),
        "pattern.config.steps[0].input",
        "template syntax error on line 2",
    ),
    (
        "unknown-filter",
        _set("pattern.config.steps.0.input", "{{ topic | shout }}"),
        "pattern.config.steps[0].input",
        "No filter named 'shout'",
    ),
    (
        "step-vars-are-per-step",
        _set("pattern.config.steps.2.input", "{{ analysis_depth }}"),
        "pattern.config.steps[2].input",
        "undefined template variable 'analysis_depth'",
    ),
    (
        "max-parallel-type",
        _set("runtime.max_parallel", "two"),
        "runtime.max_parallel",
        "expected integer, got string 'two'",
    ),
    (
        "max-parallel-minimum",
        _set("runtime.max_parallel", 0),
        "runtime.max_parallel",
        "must be >= 1 (got 0)",
    ),
    (
        "backoff-enum",
        _set("runtime.failure_policy", {"backoff": "linear"}),
        "runtime.failure_policy.backoff",
        "must be one of: constant, exponential, jittered",
    ),
    (
        "unknown-runtime-field",
        _set("runtime.max_paralel", 2),
        "runtime.max_paralel",
        "unknown field (did you mean 'max_parallel'?)",
    ),
    (
        "unknown-top-level-field",
        _set("patern", {}),
        "patern",
        "unknown field (did you mean 'pattern'?)",
    ),
    ("missing-name", _drop("name"), "", "missing required field 'name'"),
    (
        "step-type-wrong",
        _set("pattern.config.steps.1.agent", 5),
        "pattern.config.steps[1].agent",
        "expected string, got integer 5",
    ),
    (
        "step-field-typo",
        _set("pattern.config.steps.1", {"agnet": "researcher"}),
        "pattern.config.steps[1].agnet",
        "unknown field (did you mean 'agent'?)",
    ),
    (
        "hitl-without-prompt",
        _set("pattern.config.steps.1", {"type": "hitl"}),
        "pattern.config.steps[1]",
        "missing required field 'prompt'",
    ),
    (
        "hitl-wrong-type",
        _set("pattern.config.steps.1", {"type": "human", "prompt": "ok?"}),
        "pattern.config.steps[1].type",
        "must be 'hitl'",
    ),
    (
        "hitl-template",
        _set("pattern.config.steps.1", {"type": "hitl", "prompt": "{{ stepz }}"}),
        "pattern.config.steps[1].prompt",
        "undefined template variable 'stepz' (did you mean 'steps'?)",
    ),
    (
        "empty-steps",
        _set("pattern.config.steps", []),
        "pattern.config.steps",
        "needs at least 1 item",
    ),
    (
        "config-of-another-pattern",
        _set("pattern.config", {"tasks": [{"id": "a", "agent": "researcher"}]}),
        "pattern.config.tasks",
        "unknown field (allowed: steps) (pattern type 'chain')",
    ),
    (
        "unsupported-provider",
        _set("runtime.provider", "mistral"),
        "runtime.provider",
        "unsupported provider 'mistral'; supported: bedrock, openai, anthropic, gemini,"
        " ollama, litellm, llamacpp, scripted",
    ),
    (
        "unsupported-agent-provider",
        _set("agents.researcher.provider", "azure_openai"),
        "agents.researcher.provider",
        "unsupported provider 'azure_openai'",
    ),
    (
        "agent-ref",
        _set("agents.researcher", {"$ref": "./agents/researcher.yaml"}),
        "agents.researcher",
        "resolved relative to the spec's file",
    ),
    (
        "bad-script",
        _set("runtime.script", {"rules": [{"agent": "researcher"}]}),
        "runtime.script.rules[0]",
        "exactly one of `reply`, `error` or `tool_calls`",
    ),
    (
        "script-unknown-field",
        _set("runtime.script", {"delay": 1}),
        "runtime.script.delay",
        "unknown field",
    ),
    (
        "artifact-path-template",
        _set("outputs.artifacts.0.path", "{{ nmae }}.md"),
        "outputs.artifacts[0].path",
        "undefined template variable 'nmae' (did you mean 'name'?)",
    ),
    (
        "artifact-from-template",
        _set("outputs.artifacts.0.from", "{{ branches.a.response }}"),
        "outputs.artifacts[0].from",
        "undefined template variable 'branches'",
    ),
    (
        "missing-required-input",
        _set("inputs.required", {"topic": "string", "audience": "string"}),
        "inputs.required.audience",
        "required input 'audience' has no value; give it one among the variables",
    ),
    (
        "bad-input-value",
        _set("inputs.values.topic", ["a"]),
        "inputs.values.topic",
        "expected string or number or boolean, got array ['a']",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "path", "problem"),
    [case[1:] for case in BAD_CHAIN],
    ids=[case[0] for case in BAD_CHAIN],
)
def test_bad_chain_specs(mutate: Mutation, path: str, problem: str) -> None:
    data = _data()
    mutate(data)
    error = _spec_error(data)
    assert error.source == "bad.yaml"
    assert error.path == path
    assert problem in error.problem, error.problem


def _workflow(mutate: Mutation) -> dict[str, Any]:
    data = _data("workflow-parallel-research.yaml")
    mutate(data)
    return data


BAD_PATTERNS: list[tuple[str, str, Mutation, str, str]] = [
    # (id, fixture, mutation, expected path, expected problem fragment)
    (
        "workflow-unknown-dep",
        "workflow-parallel-research.yaml",
        _set("pattern.config.tasks.3.deps", ["technical", "aplications"]),
        "pattern.config.tasks[3].deps[1]",
        "unknown task 'aplications' (did you mean 'applications'?)",
    ),
    (
        "workflow-cycle",
        "workflow-parallel-research.yaml",
        _set("pattern.config.tasks.0.deps", ["synthesis"]),
        "pattern.config.tasks",
        "dependency cycle: overview -> synthesis -> technical -> overview",
    ),
    (
        "workflow-self-dep",
        "workflow-parallel-research.yaml",
        _set("pattern.config.tasks.1.deps", ["technical"]),
        "pattern.config.tasks",
        "dependency cycle: technical -> technical",
    ),
    (
        "workflow-duplicate-id",
        "workflow-parallel-research.yaml",
        _set("pattern.config.tasks.2.id", "technical"),
        "pattern.config.tasks[2].id",
        "duplicate task id 'technical'",
    ),
    (
        "workflow-missing-agent",
        "workflow-parallel-research.yaml",
        _set("pattern.config.tasks.2.agent", "analyst"),
        "pattern.config.tasks[2].agent",
        "unknown agent 'analyst'",
    ),
    (
        "workflow-bad-task-id",
        "workflow-parallel-research.yaml",
        _set("pattern.config.tasks.0.id", "has space"),
        "pattern.config.tasks[0].id",
        "does not match the pattern",
    ),
    (
        "workflow-wrong-names",
        "workflow-parallel-research.yaml",
        _set("pattern.config.tasks.1.input", "{{ steps[0].response }}"),
        "pattern.config.tasks[1].input",
        "undefined template variable 'steps'",
    ),
    (
        "graph-unknown-edge-source",
        "graph-loop-with-break.yaml",
        _set("pattern.config.edges.0.from", "proces"),
        "pattern.config.edges[0].from",
        "unknown node 'proces' (did you mean 'process'?); nodes: process, check, finalize",
    ),
    (
        "graph-unknown-target",
        "graph-loop-with-break.yaml",
        _set("pattern.config.edges.0.to", ["nowhere"]),
        "pattern.config.edges[0].to[0]",
        "unknown node 'nowhere'",
    ),
    (
        "graph-unknown-choice-target",
        "graph-loop-with-break.yaml",
        _set("pattern.config.edges.1.choose.1.to", "start"),
        "pattern.config.edges[1].choose[1].to",
        "unknown node 'start'",
    ),
    (
        "graph-edge-both",
        "graph-loop-with-break.yaml",
        _set("pattern.config.edges.0.choose", [{"when": "else", "to": "check"}]),
        "pattern.config.edges[0]",
        "an edge needs exactly one of 'to' or 'choose'",
    ),
    (
        "graph-condition-syntax",
        "graph-loop-with-break.yaml",
        _set("pattern.config.edges.1.choose.0.when", "nodes.check.response contains 'done'"),
        "pattern.config.edges[1].choose[0].when",
        "template syntax error on line 1: expected token 'end of print statement', got 'contains'",
    ),
    (
        "graph-condition-name",
        "graph-loop-with-break.yaml",
        _set("pattern.config.edges.1.choose.0.when", "{{ node.process.iteration >= 3 }}"),
        "pattern.config.edges[1].choose[0].when",
        "undefined template variable 'node' (did you mean 'nodes'?)",
    ),
    (
        "graph-missing-agent",
        "graph-loop-with-break.yaml",
        _set("pattern.config.nodes.check.agent", "judge"),
        "pattern.config.nodes.check.agent",
        "unknown agent 'judge'",
    ),
    (
        "graph-node-type",
        "graph-loop-with-break.yaml",
        _set("pattern.config.nodes.check", {"type": "hitl"}),
        "pattern.config.nodes.check",
        "missing required field 'prompt'",
    ),
    (
        "parallel-one-branch",
        "parallel-with-reduce.yaml",
        _set("pattern.config.branches", [{"id": "a", "steps": [{"agent": "researcher"}]}]),
        "pattern.config.branches",
        "needs at least 2 items",
    ),
    (
        "parallel-duplicate-branch",
        "parallel-with-reduce.yaml",
        _set("pattern.config.branches.1.id", "academic_perspective"),
        "pattern.config.branches[1].id",
        "duplicate branch id 'academic_perspective'",
    ),
    (
        "parallel-reduce-agent",
        "parallel-with-reduce.yaml",
        _set("pattern.config.reduce.agent", "summarizer"),
        "pattern.config.reduce.agent",
        "unknown agent 'summarizer'",
    ),
    (
        "parallel-branch-step-agent",
        "parallel-with-reduce.yaml",
        _set("pattern.config.branches.2.steps.0.agent", "lawyer"),
        "pattern.config.branches[2].steps[0].agent",
        "unknown agent 'lawyer'",
    ),
    (
        "evaluator-producer",
        "evaluator-optimizer-writing-openai.yaml",
        _set("pattern.config.producer", "author"),
        "pattern.config.producer",
        "unknown agent 'author'; defined agents: writer, critic",
    ),
    (
        "evaluator-accept",
        "evaluator-optimizer-writing-openai.yaml",
        _set("pattern.config.accept", {"max_iters": 3}),
        "pattern.config.accept",
        "missing required field 'min_score'",
    ),
    (
        "evaluator-min-score",
        "evaluator-optimizer-writing-openai.yaml",
        _set("pattern.config.accept.min_score", 101),
        "pattern.config.accept.min_score",
        "must be <= 100 (got 101)",
    ),
    (
        "evaluator-revise-prompt",
        "evaluator-optimizer-writing-openai.yaml",
        _set("pattern.config.revise_prompt", "{{ evalution.score }}"),
        "pattern.config.revise_prompt",
        "undefined template variable 'evalution' (did you mean 'evaluation'?)",
    ),
]


@pytest.mark.parametrize(
    ("fixture", "mutate", "path", "problem"),
    [case[1:] for case in BAD_PATTERNS],
    ids=[case[0] for case in BAD_PATTERNS],
)
def test_bad_pattern_specs(fixture: str, mutate: Mutation, path: str, problem: str) -> None:
    data = _data(fixture)
    mutate(data)
    error = _spec_error(data)
    assert error.path == path
    assert problem in error.problem, error.problem


def _routing() -> dict[str, Any]:
    return {
        "version": 0,
        "name": "router",
        "runtime": {"provider": "scripted"},
        "agents": {"classifier": {"prompt": "Classify."}, "helper": {"prompt": "Help."}},
        "pattern": {
            "type": "routing",
            "config": {
                "router": {"agent": "classifier", "input": "Route: {{ query }}"},
                "routes": {
                    "billing": {
                        "then": [
                            {
                                "agent": "helper",
                                "input": "{{ router.chosen_route }}: {{ query }}",
                            }
                        ]
                    }
                },
            },
        },
        "inputs": {"values": {"query": "my invoice"}},
    }


def _orchestrator() -> dict[str, Any]:
    return {
        "version": 0,
        "name": "swarm",
        "runtime": {"provider": "scripted"},
        "agents": {"boss": {"prompt": "Split."}, "worker": {"prompt": "Do."}},
        "pattern": {
            "type": "orchestrator_workers",
            "config": {
                "orchestrator": {"agent": "boss", "limits": {"max_workers": 3, "max_rounds": 1}},
                "decomposition_review": {
                    "type": "hitl",
                    "prompt": "OK?",
                    "context_display": "{{ orchestrator_response }}",
                    "validation": {"pattern": "^(yes|no)$"},
                },
                "worker_template": {"agent": "worker", "tools": []},
                "reduce": {"agent": "boss", "input": "{{ workers | length }} {{ num_workers }}"},
                "writeup": {
                    "agent": "boss",
                    "input": "{{ reduce_response }} {{ workers[0].response }}",
                },
            },
        },
    }


def test_routing_and_orchestrator_specs_load() -> None:
    routing = load_spec_data(_routing()).spec.pattern.config
    assert routing.router.max_retries == 2  # type: ignore[union-attr]
    orchestrator = load_spec_data(_orchestrator()).spec.pattern.config
    assert orchestrator.orchestrator.limits.max_workers == 3  # type: ignore[union-attr]
    assert orchestrator.decomposition_review.validation.pattern == "^(yes|no)$"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("build", "mutate", "path", "problem"),
    [
        (
            _routing,
            _set("pattern.config.routes", {}),
            "pattern.config.routes",
            "needs at least one route",
        ),
        (
            _routing,
            _set("pattern.config.router.agent", "classfier"),
            "pattern.config.router.agent",
            "unknown agent 'classfier' (did you mean 'classifier'?)",
        ),
        (
            _routing,
            _set("pattern.config.routes.billing.then.0.agent", "nobody"),
            "pattern.config.routes.billing.then[0].agent",
            "unknown agent 'nobody'",
        ),
        (
            _routing,
            _set("pattern.config.router.input", "{{ qeury }}"),
            "pattern.config.router.input",
            "undefined template variable 'qeury' (did you mean 'query'?)",
        ),
        (
            _orchestrator,
            _set("pattern.config.worker_template.agent", "intern"),
            "pattern.config.worker_template.agent",
            "unknown agent 'intern'",
        ),
        (
            _orchestrator,
            _set("pattern.config.orchestrator.limits.max_workers", 0),
            "pattern.config.orchestrator.limits.max_workers",
            "must be >= 1",
        ),
        (
            _orchestrator,
            _set("pattern.config.writeup.input", "{{ branches }}"),
            "pattern.config.writeup.input",
            "undefined template variable 'branches'",
        ),
    ],
)
def test_bad_routing_and_orchestrator_specs(
    build: Callable[[], dict[str, Any]], mutate: Mutation, path: str, problem: str
) -> None:
    data = build()
    mutate(data)
    error = _spec_error(data)
    assert error.path == path
    assert problem in error.problem, error.problem


@pytest.mark.parametrize(
    ("text", "path", "problem"),
    [
        ("name: x\nagents: [1, 2\nruntime: {}\n", "line 3, column 8", "invalid YAML"),
        ("a: 1\n  b: 2\n", "line 2, column 4", "mapping values are not allowed here"),
        ("name: a\nname: b\n", "line 2, column 1", "duplicate key 'name'"),
        ("- a\n- b\n", "", "a spec must be a mapping at the top level, got array"),
        ("", "", "a spec must be a mapping at the top level, got null"),
        ('{"name": }', "line 1, column 10", "invalid JSON"),
    ],
)
def test_unparseable_text(text: str, path: str, problem: str) -> None:
    with pytest.raises(SpecError) as info:
        load_spec_text(text, "broken.yaml")
    assert info.value.source == "broken.yaml"
    assert info.value.path == path
    assert problem in info.value.problem


def test_override_type_errors_name_the_variable() -> None:
    data = _data()
    data["inputs"] = {
        "required": {"topic": "string", "count": "integer"},
        "optional": {"level": {"type": "string", "enum": ["low", "high"]}, "on": "boolean"},
    }
    cases = [
        ({"count": "two"}, "variables.count", "'two' is not a valid integer"),
        ({"count": "2.5"}, "variables.count", "'2.5' is not a valid integer"),
        ({"count": "1", "on": "maybe"}, "variables.on", "'maybe' is not a valid boolean"),
        ({"count": "1", "level": "mid"}, "variables.level", "must be one of: low, high"),
    ]
    for overrides, path, problem in cases:
        error = _spec_error(copy.deepcopy(data), overrides={"topic": "t", **overrides})
        assert error.path == path
        assert problem in error.problem


def test_required_input_satisfied_by_override() -> None:
    data = _data()
    data["inputs"] = {"required": {"topic": "string"}}
    assert _spec_error(copy.deepcopy(data)).path == "inputs.required.topic"
    assert load_spec_data(data, overrides={"topic": "ai"}).variables == {"topic": "ai"}


def test_override_names_become_known_to_templates() -> None:
    data = _data()
    data["pattern"]["config"]["steps"][0]["input"] = "{{ topic }} for {{ audience }}"
    assert _spec_error(copy.deepcopy(data)).problem.startswith(
        "undefined template variable 'audience'"
    )
    assert load_spec_data(data, overrides={"audience": "kids"}).variables["audience"] == "kids"


def test_loaded_spec_is_frozen() -> None:
    loaded = load_spec_file(CHAIN)
    assert isinstance(loaded, LoadedSpec)
    with pytest.raises(AttributeError):
        loaded.source = "other"  # type: ignore[misc]


def test_missing_file() -> None:
    with pytest.raises(SpecError, match="cannot read file"):
        load_spec_file(FIXTURES / "nope.yaml")


# --- --var and script files ------------------------------------------------------


def test_parse_var_args() -> None:
    assert parse_var_args(["topic=AI safety", "eq=a=b", " k = v ", "empty=", "topic=x"]) == {
        "topic": "x",
        "eq": "a=b",
        "k": "v",
        "empty": "",
    }
    assert parse_var_args([]) == {}


@pytest.mark.parametrize(
    ("item", "problem"), [("topic", "expected KEY=VALUE"), ("=v", "empty name")]
)
def test_parse_var_args_rejects_malformed(item: str, problem: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_var_args(["ok=1", item])
    assert info.value.path == f"--var {item}"
    assert problem in info.value.problem


def test_load_script_file(tmp_path: Path) -> None:
    path = tmp_path / "script.yaml"
    path.write_text(
        "delay_s: 0.25\nrules:\n  - agent: researcher\n    contains: topic\n    reply: Found it\n"
        "  - reply: default\n"
    )
    script = load_script_file(path)
    assert script.delay_s == 0.25
    assert script.answer_for("researcher", "the topic is") == "Found it"
    assert script.answer_for("other", "x") == "default"


@pytest.mark.parametrize(
    ("content", "path", "problem"),
    [
        ("rules:\n  - agent: a\n", "rules[0]", "exactly one of `reply`, `error` or `tool_calls`"),
        ("delay_s: -1\n", "delay_s", "greater than or equal to 0"),
        ("delay: 1\n", "delay", "unknown field"),
        ("- reply: x\n", "", "a script file must be a mapping"),
        ("rules: [\n", "line 2, column 1", "invalid YAML"),
    ],
)
def test_load_script_file_rejects_bad_content(
    tmp_path: Path, content: str, path: str, problem: str
) -> None:
    file = tmp_path / "script.yaml"
    file.write_text(content)
    with pytest.raises(SpecError) as info:
        load_script_file(file)
    assert info.value.source == str(file)
    assert info.value.path == path
    assert problem in info.value.problem


def test_readable_schema_is_valid_and_has_no_one_of() -> None:
    from jsonschema import Draft202012Validator

    from strands_durable.spec import schema_check

    schema = schema_check._readable_schema()
    Draft202012Validator.check_schema(schema)
    assert '"oneOf"' not in json.dumps(schema)


def test_agent_prompts_are_used_as_written_not_rendered() -> None:
    """strands-cli renders step inputs, never `agents.*.prompt`: a prompt may show the
    model a literal template, or name a variable nobody defines."""
    data = _data()
    prompt = "Write specs like: input: '{{ steps[0].response }}' and {{ undefined_name }}"
    data["agents"]["researcher"]["prompt"] = prompt
    loaded = load_spec_data(data, "literal.yaml")
    assert loaded.spec.agents["researcher"].prompt == prompt


@pytest.mark.parametrize("loader", [load_spec_file, load_script_file])
def test_a_pipe_is_read_only_up_to_the_size_limit(tmp_path: Path,
                                                  loader: Callable[[Path], Any]) -> None:
    """A pipe or a device (/dev/zero) has no size to check first: reading stops at the
    limit rather than reading without end."""
    import os
    import threading

    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)

    def write() -> None:
        try:
            with fifo.open("w") as handle:
                handle.write("#" * (4 * 1024 * 1024) + "\n")
        except BrokenPipeError:  # the reader stopped at the limit: as it should
            pass

    writer = threading.Thread(target=write)
    writer.start()
    try:
        with pytest.raises(SpecError) as caught:
            loader(fifo)
    finally:
        writer.join()
    assert "DURABLE_MAX_SPEC_BYTES" in str(caught.value)
