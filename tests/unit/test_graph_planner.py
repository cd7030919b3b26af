"""The graph planner is pure: spec + pattern_state + result -> decision (no Redis)."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from strands_durable.errors import TemplateError
from strands_durable.models import SessionStatus, StepJob, StepResult, now_ms
from strands_durable.patterns.base import Decision, PlanContext
from strands_durable.patterns.graph import (
    DEFAULT_MAX_STEPS,
    GraphPlanner,
    node_key,
    parse_key,
)
from strands_durable.planning.advance import Snapshot, plan_commit
from strands_durable.planning.artifacts import render_artifacts
from strands_durable.planning.budgets import Spend, exceeded, limits
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.store import CommitRequest

FIXTURE = Path(__file__).parents[1] / "fixtures" / "strands-cli" / "graph-loop-with-break.yaml"
planner = GraphPlanner()

Responder = Callable[[StepJob], str]


def spec_ctx(text: str, state: dict[str, Any], results: list[StepResult]) -> PlanContext:
    loaded = load_spec_text(text, "graph.yaml")
    return PlanContext(spec=loaded.spec, variables=loaded.variables, state=state,
                       results=OrderedDict((r.key, r) for r in results), session_id="s1")


def drive(text: str, respond: Responder, limit: int = 500
          ) -> tuple[Decision, list[StepJob], list[StepResult], dict[str, Any]]:
    """Run the planner as the worker does: start, then advance after every step, with
    `respond` answering each job. Returns the last decision, every job scheduled, the
    committed results and the last stored state."""
    decision = planner.start(spec_ctx(text, {}, []))
    jobs: list[StepJob] = []
    results: list[StepResult] = []
    state = decision.state
    while decision.status == SessionStatus.RUNNING and limit:
        limit -= 1
        (job,) = decision.schedule
        jobs.append(job)
        done = StepResult(key=job.key, agent=job.agent, response=respond(job),
                          input_tokens=1, output_tokens=2)
        decision = planner.advance(spec_ctx(text, state, results), done)
        results.append(done)
        state = decision.state
    return decision, jobs, results, state


def fixture_text() -> str:
    return FIXTURE.read_text()


# --- keys ----------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "parsed"), [
    ("node:process:1", ("process", 1)),
    ("node:a:b:12", ("a:b", 12)),
    ("step:0", None),
    ("node:x:", None),
    ("node::3", None),
])
def test_parse_key(key: str, parsed: tuple[str, int] | None) -> None:
    assert parse_key(key) == parsed
    if parsed is not None:
        assert node_key(*parsed) == key


# --- the strands-cli fixture: process -> check -> process ... -> finalize -------------


def test_fixture_loops_until_iteration_three_then_finalizes() -> None:
    decision, jobs, results, state = drive(fixture_text(), lambda job: f"R({job.key})")
    assert decision.status == SessionStatus.COMPLETED and decision.schedule == ()
    keys = [j.key for j in jobs]
    assert keys == ["node:process:1", "node:check:1", "node:process:2", "node:check:2",
                    "node:process:3", "node:check:3", "node:finalize:1"]
    assert len(set(keys)) == len(keys)  # each key scheduled once
    assert state == {"current_node": "finalize", "total_steps": 7,
                     "iteration_counts": {"process": 3, "check": 3, "finalize": 1}}
    # Inputs render with the previous visit's outputs.
    by_key = {j.key: j for j in jobs}
    assert by_key["node:process:1"].input == "Process data: Test data"
    assert by_key["node:check:2"].input == "Check iteration 2"
    assert by_key["node:finalize:1"].input == "Finalize: R(node:process:3)"
    # A node's agent prompt is its system prompt as written (strands-cli renders none).
    assert by_key["node:process:1"].system_prompt == by_key["node:process:3"].system_prompt
    assert "{{" in by_key["node:process:1"].system_prompt
    assert all(j.kind == "agent" and j.lane == "" for j in jobs)
    assert by_key["node:check:3"].meta == {"node": "check", "iteration": 3}

    assert decision.final_response == "R(node:finalize:1)"
    art = decision.artifact_context
    assert art["terminal_node"] == "finalize" and art["total_steps"] == 7
    assert art["last_response"] == "R(node:finalize:1)"
    assert art["data"] == "Test data"
    assert art["iteration_counts"] == {"process": 3, "check": 3, "finalize": 1}
    assert art["execution_path"] == ["process", "check"] * 3 + ["finalize"]
    assert art["cumulative_tokens"] == 7 * 3
    assert art["nodes"]["process"] == {"response": "R(node:process:3)", "agent": "processor",
                                       "status": "success", "iteration": 3}
    assert set(art["nodes"]) == {"process", "check", "finalize"}

    final_ctx = spec_ctx(fixture_text(), state, results)
    view = planner.view(final_ctx)
    assert view["current_node"] == "finalize"
    assert view["node_history"] == art["execution_path"]
    assert view["iteration_counts"] == state["iteration_counts"]
    assert view["node_outputs"]["check"] == {"response": "R(node:check:3)", "iteration": 3,
                                             "status": "success"}


def test_view_mid_run_and_state_stays_small() -> None:
    text = fixture_text()
    decision = planner.start(spec_ctx(text, {}, []))
    assert decision.state == {"current_node": "process", "iteration_counts": {"process": 1},
                              "total_steps": 0}
    view = planner.view(spec_ctx(text, decision.state, []))
    assert view["node_history"] == [] and view["current_node"] == "process"
    # Every node is there before it runs, as strands-cli pre-fills them.
    assert view["node_outputs"]["finalize"] == {"response": None, "iteration": 0,
                                                "status": "not_executed"}
    r1 = StepResult(key="node:process:1", agent="processor", response="P1")
    d2 = planner.advance(spec_ctx(text, decision.state, []), r1)
    assert [j.key for j in d2.schedule] == ["node:check:1"]
    assert set(d2.state) == {"current_node", "iteration_counts", "total_steps"}
    view = planner.view(spec_ctx(text, d2.state, [r1]))
    assert view["current_node"] == "check" and view["node_history"] == ["process"]
    assert view["node_outputs"]["process"] == {"response": "P1", "iteration": 1,
                                               "status": "success"}
    assert view["node_outputs"]["check"]["status"] == "not_executed"


# --- limits ----------------------------------------------------------------------------


def test_max_iterations_exceeded_fails_naming_the_node() -> None:
    text = fixture_text().replace("nodes.process.iteration >= 3", "nodes.process.iteration >= 9")
    decision, jobs, _, state = drive(text, lambda job: "again")
    assert decision.status == SessionStatus.FAILED and decision.schedule == ()
    assert "'process'" in decision.reason and "max_iterations" in decision.reason
    assert "(3)" in decision.reason
    assert [j.key for j in jobs][-1] == "node:check:3"
    assert state["iteration_counts"] == {"process": 3, "check": 3}


LOOP = """
version: 0
name: loop
runtime: {{provider: scripted{budgets}}}
agents:
  a: {{prompt: "A"}}
pattern:
  type: graph
  config:
    max_iterations: 1000
    nodes:
      ping: {{agent: a, input: "ping {{{{ nodes.pong.response }}}}"}}
      pong: {{agent: a, input: "pong {{{{ last_response }}}}"}}
    edges:
      - from: ping
        to: [pong]
      - from: pong
        to: [ping]
"""


@pytest.mark.parametrize("budgets", ["", ", budgets: {max_steps: 5}"])
def test_planner_leaves_the_step_budget_to_the_budget_check(budgets: str) -> None:
    # The planner alone never stops a loop on steps: the budget check after planning
    # does (below), so that it pauses and `resume --set budgets.max_steps=N` goes on.
    decision, jobs, _, state = drive(LOOP.format(budgets=budgets), lambda job: job.key,
                                     limit=DEFAULT_MAX_STEPS + 10)
    assert decision.status == SessionStatus.RUNNING
    assert len(jobs) == DEFAULT_MAX_STEPS + 10 and state["total_steps"] == len(jobs)
    assert jobs[1].input == "pong node:ping:1"  # last_response


def snapshot(text: str, state: dict[str, Any], results: list[StepResult], *, steps: int,
             overrides: dict[str, int] | None = None) -> Snapshot:
    """The session as the worker reads it before a commit: `steps` committed so far."""
    fields = {"version": "7", "state": json.dumps(state), "variables": "{}",
              "steps": str(steps), "tokens_in": "0", "tokens_out": "0",
              "started_ms": str(now_ms()), "budget_overrides": json.dumps(overrides or {})}
    spec = load_spec_text(text, "graph.yaml").spec
    return Snapshot(spec=spec, fields=fields,
                    results=OrderedDict((r.key, r) for r in results), session_id="s1")


def commit_after(text: str, visits: int, *, overrides: dict[str, int] | None = None
                 ) -> CommitRequest:
    """The commit of ping/pong visit number `visits` (1-based) of the LOOP graph."""
    results = [StepResult(key=node_key("ping" if i % 2 else "pong", (i + 1) // 2), agent="a",
                          response=f"r{i}") for i in range(1, visits)]
    state = {"current_node": "ping" if visits % 2 else "pong",
             "iteration_counts": {"ping": (visits + 1) // 2, "pong": visits // 2},
             "total_steps": visits - 1}
    last = node_key("ping" if visits % 2 else "pong", (visits + 1) // 2)
    job = StepJob(session_id="s1", key=last, agent="a", input="x")
    done = StepResult(key=last, agent="a", response=f"r{visits}")
    return plan_commit(snapshot(text, state, results, steps=visits - 1, overrides=overrides),
                       job, done, entry_id="1-0", consumer="w1")


@pytest.mark.parametrize(("budgets", "overrides", "visits", "status", "limit"), [
    ("", None, DEFAULT_MAX_STEPS - 1, SessionStatus.RUNNING, None),
    ("", None, DEFAULT_MAX_STEPS, SessionStatus.PAUSED, DEFAULT_MAX_STEPS),  # 100, no spec
    (", budgets: {max_steps: 5}", None, 4, SessionStatus.RUNNING, None),
    (", budgets: {max_steps: 5}", None, 5, SessionStatus.PAUSED, 5),
    (", budgets: {max_steps: 5}", {"max_steps": 8}, 5, SessionStatus.RUNNING, None),
    (", budgets: {max_steps: 5}", {"max_steps": 8}, 8, SessionStatus.PAUSED, 8),
    ("", {"max_steps": 300}, DEFAULT_MAX_STEPS, SessionStatus.RUNNING, None),
])
def test_step_budget_pauses_holding_the_next_node(
        budgets: str, overrides: dict[str, int] | None, visits: int, status: SessionStatus,
        limit: int | None) -> None:
    request = commit_after(LOOP.format(budgets=budgets), visits, overrides=overrides)
    assert request.status == status
    # The next node is planned either way; a paused commit holds it for the resume.
    (job,) = request.next_jobs
    assert job.key == node_key("pong" if visits % 2 else "ping", visits // 2 + 1)
    assert request.state["total_steps"] == visits
    if limit is None:
        assert request.reason == ""
        return
    assert request.reason == (f"budget max_steps reached: {visits} steps used, limit {limit} "
                              "(resume with a higher budgets.max_steps)")
    assert [e.type for e in request.events][-1] == "session_paused"


CHAIN = """
version: 0
name: c
runtime: {provider: scripted}
agents: {a: {prompt: "A"}}
pattern: {type: chain, config: {steps: [{agent: a, input: "go"}]}}
"""


def test_resume_is_refused_until_the_step_budget_is_raised() -> None:
    # control.resume checks exceeded(spend, limits(spec, overrides)) before continuing.
    spec = load_spec_text(LOOP.format(budgets=""), "graph.yaml").spec
    spent = Spend(tokens=0, steps=DEFAULT_MAX_STEPS, duration_s=0.0)
    assert limits(spec, {}) == {"max_steps": DEFAULT_MAX_STEPS}
    assert "budget max_steps reached" in (exceeded(spent, limits(spec, {})) or "")
    assert exceeded(spent, limits(spec, {"max_steps": DEFAULT_MAX_STEPS + 1})) is None
    # Other patterns have no step budget unless the spec or an operator sets one.
    chain = load_spec_text(CHAIN, "chain.yaml").spec
    assert limits(chain, {}) == {}


def test_max_iterations_still_fails_at_the_step_budget() -> None:
    # pong:2 is the 4th step: the budget of 4 is reached AND ping:3 would exceed
    # max_iterations. The failure wins: raising the budget could not help.
    text = LOOP.format(budgets=", budgets: {max_steps: 4}").replace("max_iterations: 1000",
                                                                  "max_iterations: 2")
    request = commit_after(text, 4)
    assert request.status == SessionStatus.FAILED and not request.next_jobs
    assert "graph node 'ping' exceeded its max_iterations limit (2)" in request.reason


# --- edges --------------------------------------------------------------------------

ROUTER = """
version: 0
name: router
runtime: {provider: scripted}
agents:
  a: {prompt: "You classify {{ topic }}."}
pattern:
  type: graph
  config:
    nodes:
      classify: {agent: a, input: "Classify {{ topic }}"}
      urgent: {agent: a, input: "Urgent: {{ nodes.classify.response }}"}
      normal: {agent: a}
      unused: {agent: a}
    edges:
      - from: classify
        choose:
          - when: "{{ 'URGENT' in nodes.classify.response }}"
            to: urgent
          - when: "nodes.classify.response == 'mild' and topic == 'tides'"
            to: unused
          - when: else
            to: normal
      - from: classify
        to: [unused]
inputs:
  values: {topic: tides}
"""


@pytest.mark.parametrize(("first", "path"), [
    ("URGENT!", ["classify", "urgent"]),
    ("mild", ["classify", "unused"]),
    ("calm", ["classify", "normal"]),  # the else branch
])
def test_choose_first_true_when_else_last(first: str, path: list[str]) -> None:
    decision, jobs, _, _ = drive(ROUTER, lambda job: first if job.key.startswith(
        "node:classify") else "done")
    assert decision.status == SessionStatus.COMPLETED
    assert decision.artifact_context["execution_path"] == path
    assert decision.artifact_context["terminal_node"] == path[-1]
    nodes = decision.artifact_context["nodes"]
    assert set(nodes) == {"classify", "urgent", "normal", "unused"}
    assert all(nodes[n]["status"] == "not_executed" and nodes[n]["response"] is None
               and nodes[n]["iteration"] == 0 for n in nodes if n not in path)
    assert jobs[0].system_prompt == "You classify {{ topic }}."


def test_node_without_input_gets_strands_cli_default() -> None:
    _, jobs, _, _ = drive(ROUTER, lambda job: "calm")
    assert jobs[1].input == ("Execute task for node 'normal'. "
                             "Prior nodes: classify, urgent, normal, unused.")


@pytest.mark.parametrize(("edges", "terminal"), [
    ("      - from: a\n        to: [b, c]\n", "b"),  # only the first static target runs
    ("      - from: a\n        choose:\n          - {when: \"last_response == 'no'\", to: c}\n",
     "a"),  # no condition true: terminal
    ("      - from: b\n        to: [c]\n", "a"),  # no edge from a: terminal
])
def test_terminal_detection(edges: str, terminal: str) -> None:
    text = f"""
version: 0
name: t
runtime: {{provider: scripted}}
agents:
  x: {{prompt: "X"}}
pattern:
  type: graph
  config:
    nodes:
      a: {{agent: x}}
      b: {{agent: x}}
      c: {{agent: x}}
    edges:
{edges}"""
    decision, jobs, _, state = drive(text, lambda job: f"out-{job.key}")
    assert decision.status == SessionStatus.COMPLETED
    assert jobs[-1].key == node_key(terminal, 1)
    assert decision.final_response == f"out-node:{terminal}:1"
    assert decision.artifact_context["terminal_node"] == terminal
    assert state["current_node"] == terminal


def test_condition_error_fails_naming_the_edge() -> None:
    text = ROUTER.replace("'URGENT' in nodes.classify.response", "nodes.classify.score > 3")
    decision, _, _, _ = drive(text, lambda job: "x")
    assert decision.status == SessionStatus.FAILED
    assert "edge from 'classify'" in decision.reason
    assert "pattern.config.edges[0].choose[0].when" in decision.reason


def test_input_render_error_names_the_node() -> None:
    text = ROUTER.replace("Urgent: {{ nodes.classify.response }}",
                          "Urgent: {{ nodes.classify.response.missing }}")
    c = spec_ctx(text, {"current_node": "classify", "iteration_counts": {"classify": 1},
                        "total_steps": 0}, [])
    with pytest.raises(TemplateError, match=r"pattern.config.nodes.urgent.input"):
        planner.advance(c, StepResult(key="node:classify:1", agent="a", response="URGENT"))


# --- human in the loop -------------------------------------------------------------

HITL = """
version: 0
name: review
runtime: {provider: scripted}
agents:
  w: {prompt: "You write."}
pattern:
  type: graph
  config:
    nodes:
      draft: {agent: w, input: "Write about {{ topic }} {{ nodes.review.response }}"}
      review:
        type: hitl
        prompt: "Approve draft {{ nodes.draft.iteration }}?"
        context_display: "{{ nodes.draft.response }}"
        default: "approve"
      publish: {agent: w, input: "Publish {{ nodes.draft.response }}"}
    edges:
      - from: draft
        to: [review]
      - from: review
        choose:
          - when: "{{ nodes.review.response == 'approve' }}"
            to: publish
          - when: else
            to: draft
inputs:
  values: {topic: tides}
"""


def test_hitl_node_pauses_then_continues_with_the_answer() -> None:
    start = planner.start(spec_ctx(HITL, {}, []))
    r1 = StepResult(key="node:draft:1", agent="w", response="D1")
    d = planner.advance(spec_ctx(HITL, start.state, []), r1)
    assert d.status == SessionStatus.RUNNING
    (job,) = d.schedule
    assert (job.key, job.kind, job.agent) == ("node:review:1", "hitl", "hitl")
    assert job.meta["prompt"] == "Approve draft 1?" and job.meta["context_display"] == "D1"
    assert job.meta["default"] == "approve" and job.meta["node"] == "review"
    assert d.state["current_node"] == "review"

    view = planner.view(spec_ctx(HITL, d.state, [r1]))
    assert view["node_outputs"]["review"] == {"response": None, "iteration": 1,
                                              "status": "waiting_for_user"}

    answer = StepResult(key="node:review:1", agent="hitl", response="revise")
    d = planner.advance(spec_ctx(HITL, d.state, [r1]), answer)
    (job,) = d.schedule
    assert (job.key, job.kind, job.input) == ("node:draft:2", "agent",
                                              "Write about tides revise")
    # HITL answers are not agent steps (strands-cli's total_steps).
    assert d.state["total_steps"] == 1


def test_hitl_full_run() -> None:
    answers = iter(["revise", "approve"])

    def respond(job: StepJob) -> str:
        return next(answers) if job.kind == "hitl" else f"out-{job.key}"

    decision, jobs, _, state = drive(HITL, respond)
    assert decision.status == SessionStatus.COMPLETED
    assert [j.key for j in jobs] == ["node:draft:1", "node:review:1", "node:draft:2",
                                     "node:review:2", "node:publish:1"]
    assert jobs[-1].input == "Publish out-node:draft:2"
    assert state["total_steps"] == 3
    review = decision.artifact_context["nodes"]["review"]
    assert review["response"] == "approve" and review["status"] == "success"
    assert review["iteration"] == 2 and review["type"] == "hitl"


def test_hitl_entry_node_loops_on_itself() -> None:
    text = HITL.replace("      draft: {agent: w, input: \"Write about {{ topic }} "
                        "{{ nodes.review.response }}\"}\n", "")
    text = text.replace("      - from: draft\n        to: [review]\n", "")
    text = text.replace("Approve draft {{ nodes.draft.iteration }}?", "Go?")
    text = text.replace("{{ nodes.draft.response }}", "{{ topic }}")
    text = text.replace("Publish {{ nodes.draft.response }}", "Publish")
    text = text.replace("            to: draft", "            to: review")
    start = planner.start(spec_ctx(text, {}, []))
    (job,) = start.schedule
    assert (job.key, job.kind, job.meta["prompt"]) == ("node:review:1", "hitl", "Go?")
    answer = StepResult(key="node:review:1", agent="hitl", response="nope")
    d = planner.advance(spec_ctx(text, start.state, []), answer)
    assert [j.key for j in d.schedule] == ["node:review:2"]


def test_hitl_terminal_node_completes_with_the_answer() -> None:
    text = HITL.replace("""      - from: review
        choose:
          - when: "{{ nodes.review.response == 'approve' }}"
            to: publish
          - when: else
            to: draft
""", "")
    decision, jobs, _, state = drive(text, lambda job: "ok" if job.kind == "hitl" else "D")
    assert decision.status == SessionStatus.COMPLETED
    assert [j.key for j in jobs] == ["node:draft:1", "node:review:1"]
    assert decision.final_response == "ok"
    assert decision.artifact_context["terminal_node"] == "review"
    assert state == {"current_node": "review", "total_steps": 1,
                     "iteration_counts": {"draft": 1, "review": 1}}


# --- hitl_response (strands-cli: the latest HITL answer, None before any) -------------


def test_hitl_response_is_none_before_an_answer_then_the_latest_answer() -> None:
    text = HITL.replace("Write about {{ topic }} {{ nodes.review.response }}",
                        "Write about {{ topic }} (human: {{ hitl_response }})")
    text = text.replace('when: "{{ nodes.review.response == \'approve\' }}"',
                        'when: "{{ hitl_response == \'approve\' }}"')
    text = text.replace("Publish {{ nodes.draft.response }}",
                        "Publish {{ nodes.draft.response }} ({{ hitl_response }})")
    answers = iter(["shorter please", "approve"])

    def respond(job: StepJob) -> str:
        return next(answers) if job.kind == "hitl" else f"out-{job.key}"

    decision, jobs, _, _ = drive(text, respond)
    assert decision.status == SessionStatus.COMPLETED
    by_key = {j.key: j for j in jobs}
    assert by_key["node:draft:1"].input == "Write about tides (human: None)"
    assert by_key["node:draft:2"].input == "Write about tides (human: shorter please)"
    assert by_key["node:publish:1"].input == "Publish out-node:draft:2 (approve)"
    assert decision.artifact_context["hitl_response"] == "approve"


def test_graph_without_hitl_nodes_sees_hitl_response_none() -> None:
    decision, _, _, _ = drive(fixture_text(), lambda job: "x")
    assert decision.artifact_context["hitl_response"] is None


# --- artifact context (strands-cli's graph execution_context + artifact writer) -------

ARTIFACTS = """
outputs:
  artifacts:
    - path: "{{ name }}-{{ terminal_node }}.md"
      from: |
        {{ name }} at {{ timestamp }} [{{ TRACE }}]
        terminal={{ terminal_node }} steps={{ total_steps }} tokens={{ cumulative_tokens }}
        counts={{ iteration_counts | tojson }}
        {% for id, node in nodes.items() -%}
        {{ id }}:{{ node.status }}:{{ node.iteration }}:{{ node.response }}
        {% endfor %}last={{ last_response }} data={{ data }}
"""


def test_graph_artifacts_see_strands_cli_execution_context() -> None:
    text = fixture_text().split("outputs:")[0] + ARTIFACTS
    text = text.replace("          - when: \"{{ nodes.process.iteration >= 3 }}\"",
                        "          - when: \"{{ nodes.process.iteration >= 2 }}\"")
    decision, _, _, _ = drive(text, lambda job: f"R({job.key})")
    assert decision.status == SessionStatus.COMPLETED
    spec = load_spec_text(text, "graph.yaml").spec
    ((path, body),) = render_artifacts(spec, decision.artifact_context).items()
    assert path == "test-graph-loop-with-break-finalize.md"
    head, *rest = body.splitlines()
    assert head.startswith("test-graph-loop-with-break at 20") and head.endswith("[]")
    assert rest[0] == "terminal=finalize steps=5 tokens=15"
    assert rest[1] == 'counts={"process": 2, "check": 2, "finalize": 1}'
    assert rest[2:5] == ["process:success:2:R(node:process:2)",
                         "check:success:2:R(node:check:2)",
                         "finalize:success:1:R(node:finalize:1)"]
    assert rest[5].strip() == "last=R(node:finalize:1) data=Test data"


def test_graph_artifacts_list_nodes_never_executed() -> None:
    text = ROUTER + ARTIFACTS.replace("data={{ data }}", "topic={{ topic }}")
    decision, _, _, _ = drive(text, lambda job: "calm" if "classify" in job.key else "ok")
    spec = load_spec_text(text, "graph.yaml").spec
    ((_, body),) = render_artifacts(spec, decision.artifact_context).items()
    assert "urgent:not_executed:0:None" in body and "unused:not_executed:0:None" in body
    assert "normal:success:1:ok" in body and "terminal=normal steps=2" in body
