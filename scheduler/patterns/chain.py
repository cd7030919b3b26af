"""chain: steps run one after another; step i sees steps[0..i-1] and last_response.

pattern_state (stored): {"current_step": i} - the next step to run.
pattern_state (view):   + "step_history": [{index, agent, response, tokens}, ...]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.patterns.base import HITL_AGENT, Decision, PlanContext, agent_job, hitl_job
from scheduler.spec import AgentStep, ChainConfig
from sessions.models import SessionStatus, StepJob, StepResult


def step_key(index: int) -> str:
    return f"step:{index}"


def _config(ctx: PlanContext) -> ChainConfig:
    config = ctx.spec.pattern.config
    assert isinstance(config, ChainConfig)
    return config


def history(ctx: PlanContext, extra: StepResult | None = None) -> list[dict[str, Any]]:
    results = dict(ctx.results)
    if extra is not None:
        results[extra.key] = extra
    records = []
    for result in results.values():
        if not result.key.startswith("step:"):
            continue
        index = int(result.key.split(":", 1)[1])
        if result.agent == HITL_AGENT:
            records.append({"index": index, "type": "hitl",
                            "prompt": result.meta.get("prompt", ""),
                            "response": result.response, "tokens": 0})
        else:
            records.append({"index": index, "agent": result.agent,
                            "response": result.response, "tokens": result.tokens})
    return sorted(records, key=lambda r: r["index"])


def _context(ctx: PlanContext, steps: list[dict[str, Any]], step_vars: Mapping[str, Any]
             ) -> dict[str, Any]:
    context = {**ctx.variables, "steps": steps,
               "last_response": steps[-1]["response"] if steps else "", **step_vars}
    # strands-cli: the latest human answer is also `hitl_response`.
    human = [s for s in steps if s.get("type") == "hitl"]
    if human:
        context["hitl_response"] = human[-1]["response"]
    return context


def _job(ctx: PlanContext, index: int, steps: list[dict[str, Any]]) -> StepJob:
    step = _config(ctx).steps[index]
    where = f"pattern.config.steps[{index}]"
    if not isinstance(step, AgentStep):
        return hitl_job(ctx, key=step_key(index), step=step, context=_context(ctx, steps, {}),
                        where=where, meta={"index": index})
    return agent_job(ctx, key=step_key(index), agent=step.agent, input_template=step.input,
                     context=_context(ctx, steps, step.vars or {}),
                     where=f"pattern.config.steps[{index}].input", meta={"index": index})


class ChainPlanner:
    def start(self, ctx: PlanContext) -> Decision:
        return Decision(state={"current_step": 0}, schedule=(_job(ctx, 0, []),))

    def advance(self, ctx: PlanContext, result: StepResult) -> Decision:
        steps = history(ctx, result)
        done = int(result.key.split(":", 1)[1])
        nxt = done + 1
        state = {"current_step": nxt}
        if nxt < len(_config(ctx).steps):
            return Decision(state=state, schedule=(_job(ctx, nxt, steps),))
        return Decision(state=state, status=SessionStatus.COMPLETED,
                        final_response=result.response,
                        artifact_context={**ctx.variables, "steps": steps,
                                          "last_response": result.response})

    def view(self, ctx: PlanContext) -> dict[str, Any]:
        return {"current_step": ctx.state.get("current_step", 0), "step_history": history(ctx)}
