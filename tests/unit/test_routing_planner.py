"""The routing planner, driven by a fake worker pool with scripted replies."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from strands_durable.models import SessionStatus, StepJob, StepResult
from strands_durable.patterns.base import Decision, PlanContext
from strands_durable.patterns.routing import ROUTER_LANE, RoutingPlanner
from strands_durable.spec.loader import load_spec_text

SPEC = """
version: 0
name: support
runtime: {provider: scripted}
agents:
  router: {prompt: "You classify {{ query }}."}
  faq_bot: {prompt: "You answer FAQs."}
  billing: {prompt: "You handle billing."}
pattern:
  type: routing
  config:
    router:
      agent: router
      input: "Classify: {{ query }}"
      max_retries: 2
    routes:
      faq:
        then:
          - agent: faq_bot
            input: "Answer {{ query }} via {{ router.chosen_route }}"
          - agent: router
            input: "Polish {{ steps[0].response }} / {{ last_response }} ({{ tone }})"
            vars: {tone: warm}
      billing:
        then:
          - agent: billing
            input: "Bill {{ query }}; router said {{ router.response }}"
inputs:
  values: {query: refunds}
outputs:
  artifacts:
    - path: out.md
      from: "{{ router.chosen_route }}|{{ steps[0].response }}|{{ last_response }}"
"""

REVIEW = """
      review_router:
        type: hitl
        prompt: "Route {{ router.chosen_route }} ok?"
        context_display: "{{ router.response }}"
"""

Reply = Callable[[StepJob], str]


@dataclass
class Run:
    decision: Decision
    jobs: list[StepJob]
    results: Mapping[str, StepResult]
    state: dict[str, Any]
    view: dict[str, Any]

    @property
    def keys(self) -> list[str]:
        return [j.key for j in self.jobs]

    def job(self, key: str) -> StepJob:
        return next(j for j in self.jobs if j.key == key)


def drive(spec_text: str, reply: Reply) -> Run:
    """Complete scheduled steps one at a time (routing never runs steps in parallel)."""
    loaded = load_spec_text(spec_text, "routing.yaml")
    planner = RoutingPlanner()
    results: OrderedDict[str, StepResult] = OrderedDict()
    state: dict[str, Any] = {}

    def ctx() -> PlanContext:
        return PlanContext(spec=loaded.spec, variables=loaded.variables, state=state,
                           results=results, session_id="s1")

    decision = planner.start(ctx())
    jobs, pending = list(decision.schedule), list(decision.schedule)
    state = decision.state
    while decision.status == SessionStatus.RUNNING:
        assert len(pending) == 1, f"routing runs one step at a time, got {pending}"
        job = pending.pop()
        agent = "hitl" if job.kind == "hitl" else job.agent
        result = StepResult(key=job.key, agent=agent, response=reply(job),
                            input_tokens=1, output_tokens=2)
        before = ctx()
        decision = planner.advance(before, result)
        assert planner.advance(before, result) == decision  # a re-plan decides the same
        json.loads(json.dumps(decision.state))  # the stored state is plain JSON
        results[result.key] = result
        state = decision.state
        jobs += decision.schedule
        pending += decision.schedule
    keys = [j.key for j in jobs]
    assert len(keys) == len(set(keys)), f"a key was scheduled twice: {keys}"
    assert not pending
    return Run(decision, jobs, results, state, planner.view(ctx()))


def scripted(replies: Mapping[str, str | list[str]]) -> Reply:
    """Reply by step key; a route step not listed echoes its input."""
    def reply(job: StepJob) -> str:
        if job.key in replies:
            value = replies[job.key]
            return value if isinstance(value, str) else value.pop(0)
        return f"<{job.input}>"
    return reply


def test_router_then_route_chain_completes_with_contexts() -> None:
    run = drive(SPEC, scripted({"router": '{"route": "faq"}', "route:faq:0": "A0",
                                "route:faq:1": "A1"}))
    assert run.keys == ["router", "route:faq:0", "route:faq:1"]
    router = run.job("router")
    assert router.input == 'Classify: refunds\n\nRespond with valid JSON: {"route": "<route_name>"}'
    assert router.system_prompt == "You classify {{ query }}." and router.lane == ROUTER_LANE
    assert run.job("route:faq:0").input == "Answer refunds via faq"
    assert run.job("route:faq:1").input == "Polish A0 / A0 (warm)"
    # Route steps use their agent's own lane, apart from the router's (even same agent).
    assert run.job("route:faq:1").agent == "router" and run.job("route:faq:1").lane == ""
    d = run.decision
    assert d.status == SessionStatus.COMPLETED and d.final_response == "A1"
    assert d.artifact_context["router"] == {"chosen_route": "faq", "response": '{"route": "faq"}'}
    assert [s["response"] for s in d.artifact_context["steps"]] == ["A0", "A1"]
    assert d.artifact_context["last_response"] == "A1"
    assert d.artifact_context["chosen_route"] == "faq"
    assert d.artifact_context["router_agent"] == "router"
    assert run.view == {
        "phase": "done", "router_choice": "faq", "routed_agent_completed": True,
        "router_attempts": 1, "router_response": '{"route": "faq"}', "current_step": 2,
        "step_history": [
            {"index": 0, "agent": "faq_bot", "response": "A0", "tokens": 3},
            {"index": 1, "agent": "router", "response": "A1", "tokens": 3},
        ],
        "final_response": "A1",
    }


@pytest.mark.parametrize("reply", [
    '```json\n{"route": "billing"}\n```',
    'After thought, I pick {"route": "billing"}.',
    '{"route": "billing", "confidence": 0.9}',
    'Billing it is.\n\n```\n{"route": "billing"}\n```\nHope that helps [1].',
    '  {"route": "billing"}\n',
    'Reasoning: [refund, invoice]. Decision:\n{\n  "route": "billing"\n}',
])
def test_tolerant_router_replies(reply: str) -> None:
    run = drive(SPEC, scripted({"router": reply}))
    assert run.keys == ["router", "route:billing:0"]
    assert run.job("route:billing:0").input == f"Bill refunds; router said {reply}"
    assert run.decision.status == SessionStatus.COMPLETED


@pytest.mark.parametrize(("bad", "retries"), [
    (["no idea", '{"route": "faq"}'], ["router", "router:retry:1"]),
    (["no idea", '["faq"]', '{"route": "faq"}'], ["router", "router:retry:1", "router:retry:2"]),
    (["{}", '{"route": 3}', '{"route": "faq"}'], ["router", "router:retry:1", "router:retry:2"]),
])
def test_malformed_router_reply_is_retried_with_a_correction(bad: list[str],
                                                              retries: list[str]) -> None:
    replies = iter(bad)
    run = drive(SPEC, lambda job: next(replies) if job.key.startswith("router") else "ok")
    assert run.keys == [*retries, "route:faq:0", "route:faq:1"]
    retry = run.job(retries[-1])
    assert retry.input == ("Classify: refunds\n\nPrevious response was malformed. "
                           'Respond with ONLY valid JSON: {"route": "<route_name>"}')
    assert retry.lane == ROUTER_LANE  # the router's conversation continues
    assert run.decision.status == SessionStatus.COMPLETED
    assert run.view["router_attempts"] == len(retries)


@pytest.mark.parametrize(("max_retries", "last_key"), [
    (0, "router"), (1, "router:retry:1"), (2, "router:retry:2"), (4, "router:retry:4"),
])
def test_router_gives_up_after_max_retries_naming_step_and_reply(max_retries: int,
                                                                  last_key: str) -> None:
    spec = SPEC.replace("max_retries: 2", f"max_retries: {max_retries}")
    run = drive(spec, lambda job: "I would say faq, probably")
    assert run.keys[-1] == last_key and len(run.keys) == max_retries + 1
    d = run.decision
    assert d.status == SessionStatus.FAILED
    assert f"step '{last_key}'" in d.reason
    assert f"after {max_retries + 1} attempts" in d.reason
    assert "I would say faq, probably" in d.reason
    assert run.view["router_choice"] is None and not run.view["routed_agent_completed"]


def test_unknown_route_is_retried_naming_the_valid_routes() -> None:
    replies = iter(['{"route": "shipping"}', 'Fine: {"route": "billing"}'])
    run = drive(SPEC, lambda job: next(replies) if job.key.startswith("router") else "ok")
    assert run.keys == ["router", "router:retry:1", "route:billing:0"]
    retry = run.job("router:retry:1")
    assert retry.input == ("Classify: refunds\n\nPrevious response chose the unknown route "
                           "'shipping'. Valid routes: 'faq', 'billing'. Respond with ONLY "
                           'valid JSON: {"route": "<route_name>"}')
    assert retry.lane == ROUTER_LANE
    assert run.decision.status == SessionStatus.COMPLETED
    assert run.view["router_choice"] == "billing" and run.view["router_attempts"] == 2
    assert run.view["router_response"] == 'Fine: {"route": "billing"}'


@pytest.mark.parametrize(("max_retries", "last_key"), [
    (0, "router"), (1, "router:retry:1"), (2, "router:retry:2"),
])
def test_unknown_route_fails_after_max_retries_naming_reply_and_routes(
        max_retries: int, last_key: str) -> None:
    spec = SPEC.replace("max_retries: 2", f"max_retries: {max_retries}")
    run = drive(spec, lambda job: 'I pick {"route": "shipping"}')
    assert run.keys == ["router"] + [f"router:retry:{n}" for n in range(1, max_retries + 1)]
    d = run.decision
    assert d.status == SessionStatus.FAILED
    assert f"step '{last_key}'" in d.reason
    assert f"invalid route 'shipping' selected by router after {max_retries + 1} attempts" \
        in d.reason
    assert "Valid routes: 'faq', 'billing'" in d.reason
    assert """last reply: 'I pick {"route": "shipping"}'""" in d.reason
    assert run.view["router_choice"] is None and run.view["phase"] == "done"


def test_malformed_then_unknown_then_valid_uses_the_matching_note() -> None:
    replies = iter(["no idea", '{"route": "Billing"}', '{"route": "billing"}'])
    run = drive(SPEC, lambda job: next(replies) if job.key.startswith("router") else "ok")
    assert run.keys == ["router", "router:retry:1", "router:retry:2", "route:billing:0"]
    assert "was malformed" in run.job("router:retry:1").input
    # Route names are exact: "Billing" is unknown, and the retry says so.
    assert "unknown route 'Billing'" in run.job("router:retry:2").input
    assert run.decision.status == SessionStatus.COMPLETED


def test_route_steps_see_strands_cli_tokens_estimated() -> None:
    spec = SPEC.replace("Polish {{ steps[0].response }}",
                        "Polish {{ steps[0].response }} #{{ steps[0].tokens_estimated }}")
    run = drive(spec, scripted({"router": '{"route": "faq"}', "route:faq:0": "A0"}))
    assert run.job("route:faq:1").input == "Polish A0 #3 / A0 (warm)"
    assert run.decision.artifact_context["steps"][0]["tokens_estimated"] == 3
    # The view keeps the seed's shape.
    assert "tokens_estimated" not in run.view["step_history"][0]


def test_router_reply_with_template_syntax_is_not_rendered() -> None:
    reply = '{"route": "billing", "why": "{{ secret }}"}'
    run = drive(SPEC, scripted({"router": reply}))
    assert run.job("route:billing:0").input == f"Bill refunds; router said {reply}"


@pytest.mark.parametrize(("answer", "keys", "status", "reason"), [
    ("approved", ["router", "router:review", "route:faq:0", "route:faq:1"],
     SessionStatus.COMPLETED, ""),
    (" Approved ", ["router", "router:review", "route:faq:0", "route:faq:1"],
     SessionStatus.COMPLETED, ""),
    ("route:billing", ["router", "router:review", "route:billing:0"],
     SessionStatus.COMPLETED, ""),
    ("ROUTE: Billing", ["router", "router:review", "route:billing:0"],
     SessionStatus.COMPLETED, ""),
    ("route:shipping", ["router", "router:review"], SessionStatus.FAILED,
     "invalid route 'shipping'"),
    ("maybe", ["router", "router:review"], SessionStatus.FAILED,
     "expected 'approved' or 'route:<route_name>'"),
])
def test_review_router_gate(answer: str, keys: list[str], status: SessionStatus,
                            reason: str) -> None:
    spec = SPEC.replace("      max_retries: 2\n", "      max_retries: 2\n" + REVIEW)
    run = drive(spec, scripted({"router": '{"route": "faq"}', "router:review": answer}))
    assert run.keys == keys
    review = run.job("router:review")
    assert review.kind == "hitl" and review.input == "Route faq ok?"
    assert review.meta["context_display"] == '{"route": "faq"}'
    assert run.decision.status == status
    assert reason in run.decision.reason
    if status == SessionStatus.COMPLETED:
        chosen = keys[-1].split(":")[1]
        assert run.decision.artifact_context["router"]["chosen_route"] == chosen
        assert run.view["router_choice"] == chosen


def test_hitl_step_inside_a_route() -> None:
    spec = SPEC.replace(
        """          - agent: billing
            input: "Bill {{ query }}; router said {{ router.response }}\"""",
        """          - type: hitl
            prompt: "Refund {{ query }}?"
          - agent: billing
            input: "Human said {{ hitl_response }} / {{ steps[0].response }}\"""")
    run = drive(spec, scripted({"router": '{"route": "billing"}', "route:billing:0": "yes"}))
    assert run.keys == ["router", "route:billing:0", "route:billing:1"]
    assert run.job("route:billing:0").kind == "hitl"
    assert run.job("route:billing:1").input == "Human said yes / yes"
    assert run.view["step_history"][0] == {"index": 0, "agent": "hitl", "response": "yes",
                                           "tokens": 3, "type": "hitl",
                                           "prompt": "Refund {{ query }}?"}


def test_view_mid_route_and_before_any_step() -> None:
    loaded = load_spec_text(SPEC, "routing.yaml")
    planner = RoutingPlanner()
    empty = PlanContext(spec=loaded.spec, variables=loaded.variables, state={}, results={})
    assert planner.view(empty)["router_choice"] is None
    assert planner.view(empty)["step_history"] == []
    results = OrderedDict([
        ("router", StepResult(key="router", agent="router", response='{"route": "faq"}')),
        ("route:faq:0", StepResult(key="route:faq:0", agent="faq_bot", response="A0")),
    ])
    state = {"phase": "route", "router_attempts": 1, "router_key": "router",
             "router_choice": "faq", "current_step": 1, "routed_agent_completed": False}
    view = planner.view(PlanContext(spec=loaded.spec, variables=loaded.variables,
                                    state=state, results=results))
    assert view["router_choice"] == "faq" and not view["routed_agent_completed"]
    assert [s["response"] for s in view["step_history"]] == ["A0"]
    assert "final_response" not in view
