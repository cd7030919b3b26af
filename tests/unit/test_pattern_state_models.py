"""Each pattern's stored pattern_state has a typed model (patterns/state.py): planners
read and write attributes, the store keeps the JSON. The models must load every state
the store holds and dump it back byte for byte, so sessions stored before the models
(and those stored now) run on unchanged across an upgrade:

  * every state of every sample spec (tests/pattern_specs.py, strands-cli's corpus and
    the scenarios below), at every step, loads and dumps back to the identical JSON;
  * the states the previous code (commit 517b369, before the models) stored, pasted
    below as it wrote them, load and dump unchanged, and the planners still write them;
  * whatever a planner hands the store is its model's whole state: loadable, every
    field, nothing else (the check fails on a planner that writes anything else).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextvars import copy_context
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from helpers import FIXTURES
from pattern_specs import CASES
from pydantic import ValidationError

from strands_durable.api.cli.common import load
from strands_durable.models import SessionStatus, StepKind, StepResult, compact_json
from strands_durable.patterns import PATTERNS, Decision, PlanContext
from strands_durable.patterns.state import PatternState
from strands_durable.planning.advance import FINAL_RESPONSE
from strands_durable.settings import current_limits, current_tool_policy
from strands_durable.spec.loader import LoadedSpec, load_spec_text
from strands_durable.spec.script import ScriptConfig
from strands_durable.spec.telemetry import local_run

CORPUS = FIXTURES / "strands-cli-corpus"
RULES = FIXTURES / "scripts" / "corpus"
MAX_STEPS = 200


@pytest.fixture(autouse=True)
def _offline_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fleet's defaults, as tests/unit/test_strands_cli_corpus.py loads the corpus."""
    for name in list(os.environ):
        if name.startswith(("DURABLE_", "OTEL_")):
            monkeypatch.delenv(name)
    current_limits.cache_clear()
    current_tool_policy.cache_clear()


# --- the checks -------------------------------------------------------------------


def model_of(pattern_type: str) -> type[PatternState]:
    return PATTERNS[pattern_type].state_model


def assert_round_trip(pattern_type: str, state: Mapping[str, Any]) -> None:
    """The state loads into its pattern's model and dumps back to the identical JSON."""
    dumped = model_of(pattern_type).load(state).dump()
    assert dumped == state
    assert compact_json(dumped) == compact_json(state)  # the very bytes, key order too


def assert_planner_wrote_its_model(pattern_type: str, state: Mapping[str, Any]) -> None:
    """What a planner hands the store is its model's whole state: it loads (else
    ValidationError), sets every field and has no key the model lacks."""
    loaded = model_of(pattern_type).load(state)
    assert not loaded.model_extra, (
        f"{pattern_type}: keys its state model lacks: {sorted(loaded.model_extra or {})}")
    missing = set(type(loaded).model_fields) - loaded.model_fields_set
    assert not missing, f"{pattern_type}: fields its planner left out: {sorted(missing)}"
    assert_round_trip(pattern_type, state)


# --- driving a spec step by step --------------------------------------------------


@dataclass(frozen=True)
class Stored:
    """A state as the store got it: the planner's after `step` (None: the start), or
    the final one, with the session's final_response that planning/advance.py adds."""

    step: str | None
    state: dict[str, Any]
    final: bool = False


def drive(loaded: LoadedSpec, order: str = "fifo", human: str = "approved") -> list[Stored]:
    """Every state stored while the spec runs on its scripted rules, steps committed
    one at a time (the oldest scheduled first, or the newest with order="lifo"), a
    human step answered `human`; each planner decision checked as it is made."""
    spec = loaded.spec
    pattern_type = spec.pattern.type
    script = spec.runtime.script or ScriptConfig()
    planner = PATTERNS[pattern_type].planner
    results: dict[str, StepResult] = {}

    def ctx(state: Mapping[str, Any]) -> PlanContext:
        return PlanContext(spec=spec, variables=loaded.variables, state=state,
                           results=dict(results), session_id="s1")

    def checked(step: str | None, decision: Decision) -> Decision:
        assert_planner_wrote_its_model(pattern_type, decision.state)
        stored.append(Stored(step, decision.state))
        return decision

    stored: list[Stored] = []
    decision = checked(None, planner.start(ctx({})))
    queue = list(decision.schedule)
    while queue and decision.status == SessionStatus.RUNNING and len(stored) < MAX_STEPS:
        job = queue.pop(0 if order == "fifo" else -1)
        reply = human if job.kind == StepKind.HITL else script.answer_for(job.agent, job.input)
        done = StepResult(key=job.key, agent=job.agent, input_tokens=2, output_tokens=3,
                          response=reply if isinstance(reply, str) else "ok")
        decision = checked(job.key, planner.advance(ctx(decision.state), done))
        results[done.key] = done
        queue += decision.schedule
    if decision.status == SessionStatus.COMPLETED and decision.final_response is not None:
        final = {**decision.state, FINAL_RESPONSE: decision.final_response}
        stored.append(Stored(None, final, final=True))
    return stored


def corpus_rows() -> Iterator[tuple[str, dict[str, Any]]]:
    """strands-cli's corpus specs that run (tests/unit/test_strands_cli_corpus.py)."""
    table = yaml.safe_load((CORPUS / "EXPECTED.yaml").read_text(encoding="utf-8"))
    for name, row in sorted(table.items()):
        if row["outcome"] != "refused":
            yield name, row


def load_corpus(name: str, row: Mapping[str, Any]) -> LoadedSpec:
    """As `durable run FILE --provider scripted [--script] [--var]` loads it: a local
    run (its telemetry endpoint is the user's), set in a context of its own."""
    script = RULES / row["script"] if row.get("script") else None
    var = [f"{k}={v}" for k, v in (row.get("vars") or {}).items()]

    def local() -> LoadedSpec:
        local_run()
        return load(CORPUS / name, var, "scripted", script)

    return copy_context().run(local)


# --- scenarios: the paths the sample specs do not take ----------------------------

ROUTER = """
version: 0
name: r
runtime: {provider: scripted}
agents:
  router: {prompt: "Route."}
  faq: {prompt: "FAQ."}
pattern:
  type: routing
  config:
    router: {agent: router, input: "Classify {{ q }}", max_retries: 2%s}
    routes:
      faq: {then: [{agent: faq, input: "Answer {{ q }}"}]}
      empty: {then: []}
inputs: {values: {q: why}}
"""
REVIEW = ", review_router: {type: hitl, prompt: 'Route {{ router.chosen_route }}?'}"
EVALUATOR = """
version: 0
name: e
runtime: {provider: scripted}
agents:
  writer: {prompt: "Write about {{ topic }}."}
  critic: {prompt: "Grade."}
pattern:
  type: evaluator_optimizer
  config:
    producer: writer
    evaluator: {agent: critic}
    accept: {min_score: 80, max_iters: 2}%s
inputs: {values: {topic: tides}}
"""
GATE = "\n    review_gate: {type: hitl, prompt: 'Score {{ current_evaluation.score }}'}"
ORCHESTRATOR = """
version: 0
name: o
runtime: {provider: scripted}
agents:
  boss: {prompt: "Plan."}
  hand: {prompt: "Work."}
  editor: {prompt: "Edit."}
pattern:
  type: orchestrator_workers
  config:
    orchestrator: {agent: boss, limits: {max_workers: 1}}
    decomposition_review: {type: hitl, prompt: "Tasks {{ task_count }}?"}
    worker_template: {agent: hand}
    reduce_review: {type: hitl, prompt: "Reduce {{ worker_count }}?"}
    reduce: {agent: editor, input: "Merge {{ num_workers }}"}
    writeup: {agent: editor, input: "Write up {{ reduce_response }}"}
"""
GRAPH = """
version: 0
name: g
runtime: {provider: scripted}
agents:
  a: {prompt: "A."}
pattern:
  type: graph
  config:
    max_iterations: 2
    nodes:
      ping: {agent: a, input: "ping"}
      ask: {type: hitl, prompt: "Again?"}
    edges:
      - {from: ping, to: [ask]}
      - {from: ask, to: [ping]}
"""
CHAIN = """
version: 0
name: c
runtime: {provider: scripted}
agents:
  a: {prompt: "A."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "one"}
      - {type: hitl, prompt: "ok {{ last_response }}?"}
      - {agent: a, input: "two {{ hitl_response }}"}
"""
WORKFLOW = """
version: 0
name: w
runtime: {provider: scripted, max_parallel: 1}
agents:
  a: {prompt: "A."}
pattern:
  type: workflow
  config:
    tasks:
      - {id: left, agent: a, input: "left"}
      - {id: right, agent: a, input: "right"}
      - {id: check, type: hitl, prompt: "ok {{ tasks.left.response }}?", deps: [left]}
      - {id: end, agent: a, input: "end {{ tasks.check.response }}", deps: [check, right]}
"""
PARALLEL = """
version: 0
name: p
runtime: {provider: scripted, max_parallel: 1}
agents:
  a: {prompt: "A."}
pattern:
  type: parallel
  config:
    branches:
      - id: one
        steps: [{agent: a, input: "one"}, {type: hitl, prompt: "ok {{ last_response }}?"}]
      - id: two
        steps: [{agent: a, input: "two"}]
    reduce: {agent: a, input: "both {{ branches.one.response }}"}
"""


@dataclass(frozen=True)
class Scenario:
    text: str
    rules: tuple[dict[str, str], ...] = ()
    human: str = "approved"  # the answer to every human step

    def load(self, name: str) -> LoadedSpec:
        script = ScriptConfig.model_validate({"rules": list(self.rules)})
        return load_spec_text(self.text, f"{name}.yaml", script=script)


SCENARIOS = {
    "routing-malformed-then-fails": Scenario(ROUTER % "", (
        {"agent": "router", "reply": "no idea"},)),
    "routing-unknown-route-then-retry": Scenario(ROUTER % "", (
        {"agent": "router", "contains": "unknown route", "reply": '{"route": "faq"}'},
        {"agent": "router", "reply": '{"route": "nope"}'})),
    "routing-review-overrides-to-empty": Scenario(ROUTER % REVIEW, (
        {"agent": "router", "reply": '{"route": "faq"}'},), human="route: empty"),
    "evaluator-malformed-then-fails": Scenario(EVALUATOR % "", (
        {"agent": "critic", "reply": "fine"},)),
    "evaluator-max-iters": Scenario(EVALUATOR % "", (
        {"agent": "critic", "reply": '{"score": 10, "issues": ["x"], "fixes": []}'},)),
    "evaluator-review-stops": Scenario(EVALUATOR % GATE, (
        {"agent": "critic", "reply": '{"score": 10, "issues": [], "fixes": ["y"]}'},),
        human="stop"),
    "orchestrator-malformed-then-fails": Scenario(ORCHESTRATOR, (
        {"agent": "boss", "reply": "let me think"},)),
    "orchestrator-reviews-and-writeup": Scenario(ORCHESTRATOR, (
        {"agent": "boss", "reply": '{"tasks": ["t1", {"task": "t2"}]}'},)),
    "graph-max-iterations": Scenario(GRAPH, human="again"),
    "chain-hitl": Scenario(CHAIN, human="yes"),
    "workflow-slot-and-hitl": Scenario(WORKFLOW, human="fine"),
    "parallel-slot-hitl-reduce": Scenario(PARALLEL, human="fine"),
}

# What the previous code (commit 517b369, before the state models) stored for each
# scenario: one state a line, in commit order (the last with final_response when the
# session completed), the JSON exactly as it wrote it.
WRITTEN_BEFORE = {
    "routing-malformed-then-fails": r"""
{"phase":"router","router_attempts":1,"router_key":null,"router_choice":null,"current_step":0,"routed_agent_completed":false}
{"phase":"router","router_attempts":2,"router_key":null,"router_choice":null,"current_step":0,"routed_agent_completed":false}
{"phase":"router","router_attempts":3,"router_key":null,"router_choice":null,"current_step":0,"routed_agent_completed":false}
{"phase":"done","router_attempts":3,"router_key":null,"router_choice":null,"current_step":0,"routed_agent_completed":false}
""",
    "routing-unknown-route-then-retry": r"""
{"phase":"router","router_attempts":1,"router_key":null,"router_choice":null,"current_step":0,"routed_agent_completed":false}
{"phase":"router","router_attempts":2,"router_key":null,"router_choice":null,"current_step":0,"routed_agent_completed":false}
{"phase":"route","router_attempts":2,"router_key":"router:retry:1","router_choice":"faq","current_step":0,"routed_agent_completed":false}
{"phase":"done","router_attempts":2,"router_key":"router:retry:1","router_choice":"faq","current_step":1,"routed_agent_completed":true}
{"phase":"done","router_attempts":2,"router_key":"router:retry:1","router_choice":"faq","current_step":1,"routed_agent_completed":true,"final_response":"faq: Answer why"}
""",  # noqa: E501
    "routing-review-overrides-to-empty": r"""
{"phase":"router","router_attempts":1,"router_key":null,"router_choice":null,"current_step":0,"routed_agent_completed":false}
{"phase":"review","router_attempts":1,"router_key":"router","router_choice":"faq","current_step":0,"routed_agent_completed":false}
{"phase":"done","router_attempts":1,"router_key":"router","router_choice":"empty","current_step":0,"routed_agent_completed":false}
""",
    "evaluator-malformed-then-fails": r"""
{"current_iteration":1,"phase":"produce","evaluations":[],"accepted":false,"early_termination":false}
{"current_iteration":1,"phase":"evaluate","evaluations":[],"accepted":false,"early_termination":false}
{"current_iteration":1,"phase":"evaluate","evaluations":[],"accepted":false,"early_termination":false}
{"current_iteration":1,"phase":"done","evaluations":[],"accepted":false,"early_termination":false}
""",
    "evaluator-max-iters": r"""
{"current_iteration":1,"phase":"produce","evaluations":[],"accepted":false,"early_termination":false}
{"current_iteration":1,"phase":"evaluate","evaluations":[],"accepted":false,"early_termination":false}
{"current_iteration":2,"phase":"produce","evaluations":[{"iteration":1,"key":"evaluate:1","score":10}],"accepted":false,"early_termination":false}
{"current_iteration":2,"phase":"evaluate","evaluations":[{"iteration":1,"key":"evaluate:1","score":10}],"accepted":false,"early_termination":false}
{"current_iteration":2,"phase":"done","evaluations":[{"iteration":1,"key":"evaluate:1","score":10},{"iteration":2,"key":"evaluate:2","score":10}],"accepted":false,"early_termination":false}
""",
    "evaluator-review-stops": r"""
{"current_iteration":1,"phase":"produce","evaluations":[],"accepted":false,"early_termination":false}
{"current_iteration":1,"phase":"evaluate","evaluations":[],"accepted":false,"early_termination":false}
{"current_iteration":1,"phase":"review","evaluations":[{"iteration":1,"key":"evaluate:1","score":10}],"accepted":false,"early_termination":false}
{"current_iteration":1,"phase":"done","evaluations":[{"iteration":1,"key":"evaluate:1","score":10}],"accepted":false,"early_termination":true}
{"current_iteration":1,"phase":"done","evaluations":[{"iteration":1,"key":"evaluate:1","score":10}],"accepted":false,"early_termination":true,"final_response":"writer: Write about tides."}
""",  # noqa: E501
    "orchestrator-malformed-then-fails": r"""
{"phase":"orchestrate","current_round":1,"orchestrator_attempts":1,"rounds":[],"dispatched":0,"orchestrator_decision":"continue","reduce_completed":false,"writeup_completed":false}
{"phase":"orchestrate","current_round":1,"orchestrator_attempts":2,"rounds":[],"dispatched":0,"orchestrator_decision":"continue","reduce_completed":false,"writeup_completed":false}
{"phase":"orchestrate","current_round":1,"orchestrator_attempts":3,"rounds":[],"dispatched":0,"orchestrator_decision":"continue","reduce_completed":false,"writeup_completed":false}
{"phase":"done","current_round":1,"orchestrator_attempts":3,"rounds":[],"dispatched":0,"orchestrator_decision":"continue","reduce_completed":false,"writeup_completed":false}
""",
    "orchestrator-reviews-and-writeup": r"""
{"phase":"orchestrate","current_round":1,"orchestrator_attempts":1,"rounds":[],"dispatched":0,"orchestrator_decision":"continue","reduce_completed":false,"writeup_completed":false}
{"phase":"review_decomposition","current_round":1,"orchestrator_attempts":1,"rounds":[{"round":1,"tasks":["t1","t2"]}],"dispatched":0,"orchestrator_decision":"continue","reduce_completed":false,"writeup_completed":false}
{"phase":"workers","current_round":1,"orchestrator_attempts":1,"rounds":[{"round":1,"tasks":["t1","t2"]}],"dispatched":1,"orchestrator_decision":"continue","reduce_completed":false,"writeup_completed":false}
{"phase":"workers","current_round":1,"orchestrator_attempts":1,"rounds":[{"round":1,"tasks":["t1","t2"]}],"dispatched":2,"orchestrator_decision":"continue","reduce_completed":false,"writeup_completed":false}
{"phase":"review_reduce","current_round":1,"orchestrator_attempts":1,"rounds":[{"round":1,"tasks":["t1","t2"]}],"dispatched":2,"orchestrator_decision":"continue","reduce_completed":false,"writeup_completed":false}
{"phase":"reduce","current_round":1,"orchestrator_attempts":1,"rounds":[{"round":1,"tasks":["t1","t2"]}],"dispatched":2,"orchestrator_decision":"continue","reduce_completed":false,"writeup_completed":false}
{"phase":"writeup","current_round":1,"orchestrator_attempts":1,"rounds":[{"round":1,"tasks":["t1","t2"]}],"dispatched":2,"orchestrator_decision":"continue","reduce_completed":true,"writeup_completed":false}
{"phase":"done","current_round":1,"orchestrator_attempts":1,"rounds":[{"round":1,"tasks":["t1","t2"]}],"dispatched":2,"orchestrator_decision":"continue","reduce_completed":true,"writeup_completed":true}
{"phase":"done","current_round":1,"orchestrator_attempts":1,"rounds":[{"round":1,"tasks":["t1","t2"]}],"dispatched":2,"orchestrator_decision":"continue","reduce_completed":true,"writeup_completed":true,"final_response":"editor: Write up editor: Merge 2"}
""",  # noqa: E501
    "graph-max-iterations": r"""
{"current_node":"ping","iteration_counts":{"ping":1},"total_steps":0}
{"current_node":"ask","iteration_counts":{"ping":1,"ask":1},"total_steps":1}
{"current_node":"ping","iteration_counts":{"ping":2,"ask":1},"total_steps":1}
{"current_node":"ask","iteration_counts":{"ping":2,"ask":2},"total_steps":2}
{"current_node":"ask","iteration_counts":{"ping":2,"ask":2},"total_steps":2}
""",
    "chain-hitl": r"""
{"current_step":0}
{"current_step":1}
{"current_step":2}
{"current_step":3}
{"current_step":3,"final_response":"a: two yes"}
""",
    "workflow-slot-and-hitl": r"""
{"completed_tasks":[],"in_flight":["left"]}
{"completed_tasks":["left"],"in_flight":["right","check"]}
{"completed_tasks":["left","right"],"in_flight":["check"]}
{"completed_tasks":["left","right","check"],"in_flight":["end"]}
{"completed_tasks":["left","right","check","end"],"in_flight":[]}
{"completed_tasks":["left","right","check","end"],"in_flight":[],"final_response":"a: end fine"}
""",
    "parallel-slot-hitl-reduce": r"""
{"in_flight":["branch:one:0"],"completed_branches":[],"reduce_completed":false}
{"in_flight":["branch:one:1"],"completed_branches":[],"reduce_completed":false}
{"in_flight":["branch:two:0"],"completed_branches":["one"],"reduce_completed":false}
{"in_flight":["reduce"],"completed_branches":["one","two"],"reduce_completed":false}
{"in_flight":[],"completed_branches":["one","two"],"reduce_completed":true}
{"in_flight":[],"completed_branches":["one","two"],"reduce_completed":true,"final_response":"a: both fine"}
""",  # noqa: E501
}

# A few more states the previous code stored, by pattern: from the sample specs
# (tests/pattern_specs.py) and strands-cli's corpus, mid-run and completed.
STORED_BEFORE = {
    "chain": r"""
{"current_step":2}
{"current_step":3,"final_response":"analyst: User review: approved\n\n\nAnalyze these research findings and provide recommendations:\nresearcher: Research the topic: AI Safety\n"}
""",  # noqa: E501
    "workflow": r"""
{"completed_tasks":["overview","technical"],"in_flight":["applications"]}
{"completed_tasks":["overview","technical","applications","synthesis"],"in_flight":[],"final_response":"researcher: Synthesize the following research into a cohesive report:\n\nTechnical Details:\nresearcher: Topic: edge computing\nOverview: researcher: Provide a brief overview (2-3 sentences) of: edge computing\n\nResea"}
""",  # noqa: E501
    "parallel": r"""
{"in_flight":["branch:regulatory_perspective:0"],"completed_branches":["academic_perspective","industry_perspective"],"reduce_completed":false}
{"in_flight":[],"completed_branches":["technical_analysis","business_impact"],"reduce_completed":false,"final_response":"Branch business_impact:\nresearcher: Analyze the business impact of artificial intelligence in healthcare\n\n---\n\nBranch technical_analysis:\nresearcher: Analyze the technical aspects of artificial intelligence in healthcare"}
""",  # noqa: E501
    "routing": r"""
{"phase":"route","router_attempts":1,"router_key":"router","router_choice":"billing","current_step":0,"routed_agent_completed":false}
{"phase":"review","router_attempts":1,"router_key":"router","router_choice":"billing","current_step":0,"routed_agent_completed":false}
{"phase":"done","router_attempts":1,"router_key":"router","router_choice":"billing","current_step":1,"routed_agent_completed":true,"final_response":"billing_agent: Customer has billing inquiry:\nI can't log in to my account\n\nRouter classification: billing\n\nProvide clear billing support and policy information."}
""",  # noqa: E501
    "evaluator_optimizer": r"""
{"current_iteration":2,"phase":"evaluate","evaluations":[{"iteration":1,"key":"evaluate:1","score":55}],"accepted":false,"early_termination":false}
{"current_iteration":2,"phase":"review","evaluations":[{"iteration":1,"key":"evaluate:1","score":60},{"iteration":2,"key":"evaluate:2","score":92}],"accepted":false,"early_termination":false}
{"current_iteration":2,"phase":"done","evaluations":[{"iteration":1,"key":"evaluate:1","score":55},{"iteration":2,"key":"evaluate:2","score":91}],"accepted":true,"early_termination":false,"final_response":"Draft two: AI, explained with depth."}
""",  # noqa: E501
    "orchestrator_workers": r"""
{"phase":"workers","current_round":2,"orchestrator_attempts":1,"rounds":[{"round":1,"tasks":["find tide tables","find harbour charts"]},{"round":2,"tasks":["check the moon data"]}],"dispatched":1,"orchestrator_decision":"continue","reduce_completed":false,"writeup_completed":false}
{"phase":"done","current_round":2,"orchestrator_attempts":2,"rounds":[{"round":1,"tasks":["description of subtask 1","description of subtask 2"]},{"round":2,"tasks":["description of subtask 1","description of subtask 2"]}],"dispatched":2,"orchestrator_decision":"continue","reduce_completed":true,"writeup_completed":false,"final_response":"aggregator: Aggregate all category analyses"}
""",  # noqa: E501
    "graph": r"""
{"current_node":"process","iteration_counts":{"process":2,"check":1},"total_steps":2}
{"current_node":"rejected","iteration_counts":{"initial_plan":1,"manager_review":1,"rejected":1},"total_steps":1,"final_response":"approved"}
{"current_node":"finalize","iteration_counts":{"process":3,"check":3,"finalize":1},"total_steps":7,"final_response":"finalizer: Finalize: processor: Process data: Test data"}
""",  # noqa: E501
}


def lines(block: str) -> list[str]:
    return block.strip().splitlines()


def pattern_of(scenario: str) -> str:
    return SCENARIOS[scenario].load(scenario).spec.pattern.type


# --- the tests ----------------------------------------------------------------------


def test_every_pattern_has_a_state_model_of_its_own() -> None:
    models = {t: d.state_model for t, d in PATTERNS.items()}
    raw = sorted(t for t, m in models.items() if m is PatternState)
    assert not raw, f"patterns without a state model: {raw}"
    assert all(issubclass(m, PatternState) for m in models.values())
    assert len(set(models.values())) == len(models), "two patterns share a model"
    assert set(STORED_BEFORE) == set(PATTERNS) == set(CASES)
    assert {pattern_of(name) for name in SCENARIOS} == set(PATTERNS)


@pytest.mark.parametrize("order", ["fifo", "lifo"])
@pytest.mark.parametrize("pattern_type", sorted(CASES))
def test_sample_spec_states_round_trip_at_every_step(pattern_type: str, order: str) -> None:
    stored = drive(CASES[pattern_type].load(), order)
    assert stored[-1].final, "the sample spec completes"
    for entry in stored:
        assert_round_trip(pattern_type, entry.state)


@pytest.mark.parametrize("name", [name for name, _ in corpus_rows()])
def test_corpus_spec_states_round_trip_at_every_step(name: str) -> None:
    loaded = load_corpus(name, dict(corpus_rows())[name])
    stored = drive(loaded)
    assert len(stored) > 1
    for entry in stored:
        assert_round_trip(loaded.spec.pattern.type, entry.state)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_planners_still_write_what_the_previous_code_wrote(name: str) -> None:
    """Byte for byte, step by step: a session that started before the upgrade and goes
    on after it stores the states it would have stored."""
    stored = drive(SCENARIOS[name].load(name), human=SCENARIOS[name].human)
    assert [compact_json(entry.state) for entry in stored] == lines(WRITTEN_BEFORE[name])


def previous_states() -> Iterator[tuple[str, str]]:
    for name, block in WRITTEN_BEFORE.items():
        yield from ((pattern_of(name), line) for line in lines(block))
    for pattern_type, block in STORED_BEFORE.items():
        yield from ((pattern_type, line) for line in lines(block))


@pytest.mark.parametrize("pattern_type", sorted(PATTERNS))
def test_states_the_previous_code_stored_load_and_dump_unchanged(pattern_type: str) -> None:
    texts = [text for t, text in previous_states() if t == pattern_type]
    assert len(texts) >= 5
    for text in texts:
        state = json.loads(text)
        assert compact_json(model_of(pattern_type).load(state).dump()) == text
        if FINAL_RESPONSE not in state:  # as the planner wrote it
            assert_planner_wrote_its_model(pattern_type, state)


@pytest.mark.parametrize("pattern_type", sorted(PATTERNS))
def test_the_check_fails_a_planner_state_its_model_cannot_load(pattern_type: str) -> None:
    good = json.loads(lines(STORED_BEFORE[pattern_type])[0])
    first = next(iter(good))
    unloadable = {**good, first: {"not": "a value it takes"}}
    with pytest.raises(ValidationError):
        assert_planner_wrote_its_model(pattern_type, unloadable)
    with pytest.raises(AssertionError, match="keys its state model lacks"):
        assert_planner_wrote_its_model(pattern_type, {**good, "typo": 1})
    with pytest.raises(AssertionError, match="fields its planner left out"):
        assert_planner_wrote_its_model(pattern_type, {k: v for k, v in good.items()
                                                      if k != first})


def test_a_planner_writing_a_state_its_model_cannot_load_fails_the_drive(
        monkeypatch: pytest.MonkeyPatch) -> None:
    planner = PATTERNS["chain"].planner
    start = planner.start

    def bad_start(ctx: PlanContext) -> Decision:
        decision = start(ctx)
        return Decision(state={"current_step": "first"}, schedule=decision.schedule)

    monkeypatch.setattr(planner, "start", bad_start)
    with pytest.raises(ValidationError):
        drive(CASES["chain"].load())


@pytest.mark.parametrize("pattern_type", sorted(PATTERNS))
def test_a_key_the_stored_state_lacks_stays_out_until_set(pattern_type: str) -> None:
    """Loaded, a state missing keys reads the views' defaults and dumps as it was;
    made by a planner, a model dumps every field."""
    model = model_of(pattern_type)
    assert model.load({}).dump() == {}
    assert model.load({FINAL_RESPONSE: "done"}).dump() == {FINAL_RESPONSE: "done"}
    assert list(model().dump()) == list(model.model_fields)
