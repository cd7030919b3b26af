"""parallel: branches run side by side (up to max_parallel at once), each branch's
steps in sequence; then the optional reduce step sees every branch.

Contexts (as strands-cli's parallel executor): a branch step sees the variables,
`steps` (this branch's earlier steps), `last_response` (the previous step of this
branch; "" for the first, as in chain), `hitl_response` (the branch's last HITL
answer) and its `vars`; reduce sees the variables and `branches.<id>` = {response
(the branch's last step), status, tokens_estimated, step_history}. Without reduce,
the final response is strands-cli's aggregate "Branch <id>:\\n<response>" of every
branch (sorted by id) joined by "\\n\\n---\\n\\n".

pattern_state (stored, state.ParallelState): {"in_flight": [step keys scheduled, not
    committed], "completed_branches": [id, ...] (spec order), "reduce_completed": bool}
pattern_state (view): {"completed_branches", "failed_branches" (branches with a step
    failed past its retries, awaiting a resume), "branch_outputs":
    {id: {response, tokens, steps: [...]}} (branches with a step done),
    "reduce_completed", "reduce_output"}

Step keys `branch:<id>:<i>` on lane `branch:<id>`; the reduce step is `reduce` on its
agent's own lane. A branch holds one of the max_parallel slots from its first step
to its last; at most one HITL step is scheduled at a time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from strands_durable.models import SessionStatus, StepJob, StepResult
from strands_durable.patterns import shapes
from strands_durable.patterns.base import (
    Decision,
    PlanContext,
    agent_job,
    hitl_job,
    split_key,
    with_result,
)
from strands_durable.patterns.definition import (
    PatternDefinition,
    StepSite,
    check_unique,
    indexed,
    name_set,
    optional,
)
from strands_durable.patterns.shapes import Shape
from strands_durable.patterns.state import ParallelState
from strands_durable.spec.steps import AgentStep, HitlStep, PatternConfig, SpecModel, Step


class Branch(SpecModel):
    """One branch of a parallel pattern: its own chain of steps."""

    id: str
    steps: list[Step]


class ParallelConfig(PatternConfig):
    """The parallel pattern: branches run side by side, then an optional reduce step."""

    branches: list[Branch]
    reduce: Step | None = None

REDUCE_KEY = "reduce"


def branch_key(branch_id: str, index: int) -> str:
    return f"branch:{branch_id}:{index}"


def _config(ctx: PlanContext) -> ParallelConfig:
    config = ctx.spec.pattern.config
    assert isinstance(config, ParallelConfig)
    return config



def _history(branch: Branch, done: Mapping[str, StepResult]) -> list[dict[str, Any]]:
    """The branch's committed steps, in order, as strands-cli's step_history."""
    records: list[dict[str, Any]] = []
    for index, step in enumerate(branch.steps):
        result = done.get(branch_key(branch.id, index))
        if result is None:
            break
        if isinstance(step, HitlStep):
            records.append({"index": index, "type": "hitl", "prompt": step.prompt,
                            "agent": "hitl", "response": result.response,
                            "tokens_estimated": 0, "tokens": 0})
        else:
            records.append({"index": index, "agent": step.agent, "response": result.response,
                            "tokens_estimated": result.tokens, "tokens": result.tokens})
    return records


def _step_context(ctx: PlanContext, history: list[dict[str, Any]], step: Step
                  ) -> dict[str, Any]:
    context: dict[str, Any] = {**ctx.variables, "steps": history,
                               "last_response": history[-1]["response"] if history else ""}
    for record in reversed(history):
        if record.get("type") == "hitl":
            context["hitl_response"] = record["response"]
            break
    if isinstance(step, AgentStep):
        context.update(step.vars or {})
    return context


Histories = dict[str, list[dict[str, Any]]]


def _histories(config: ParallelConfig, done: Mapping[str, StepResult]) -> Histories:
    """Every branch's committed steps, built once per decision."""
    return {branch.id: _history(branch, done) for branch in config.branches}


def _branches(config: ParallelConfig, histories: Histories) -> dict[str, dict[str, Any]]:
    """Finished branches as reduce and the artifacts see them (spec order)."""
    out: dict[str, dict[str, Any]] = {}
    for branch in config.branches:
        history = histories[branch.id]
        if len(history) == len(branch.steps):
            out[branch.id] = {"response": history[-1]["response"], "status": "success",
                              "tokens_estimated": sum(r["tokens"] for r in history),
                              "step_history": history}
    return out


def _branch_job(ctx: PlanContext, position: int, branch: Branch, index: int,
                history: list[dict[str, Any]]) -> StepJob:
    step = branch.steps[index]
    key = branch_key(branch.id, index)
    where = f"pattern.config.branches[{position}].steps[{index}]"
    context = _step_context(ctx, history, step)
    meta = {"branch": branch.id, "index": index}
    if isinstance(step, HitlStep):
        return hitl_job(ctx, key=key, step=step, context=context, where=where, meta=meta)
    return agent_job(ctx, key=key, agent=step.agent, input_template=step.input,
                     context=context, where=f"{where}.input", lane=f"branch:{branch.id}",
                     meta=meta)


def _reduce_job(ctx: PlanContext, step: Step, histories: Histories) -> StepJob:
    context = {**ctx.variables, "branches": _branches(_config(ctx), histories)}
    where = "pattern.config.reduce"
    if isinstance(step, HitlStep):
        return hitl_job(ctx, key=REDUCE_KEY, step=step, context=context, where=where,
                        meta={"reduce": True})
    context.update(step.vars or {})
    return agent_job(ctx, key=REDUCE_KEY, agent=step.agent, input_template=step.input,
                     context=context, where=f"{where}.input", meta={"reduce": True})


def parse_key(key: str) -> tuple[str, int] | None:
    """(branch id, step index) of a branch step key, else None."""
    return split_key(key, "branch:")


def _is_hitl(config: ParallelConfig, key: str) -> bool:
    if key == REDUCE_KEY:
        return isinstance(config.reduce, HitlStep)
    parsed = parse_key(key)
    for branch in config.branches:
        if parsed is not None and parsed[0] == branch.id and parsed[1] < len(branch.steps):
            return isinstance(branch.steps[parsed[1]], HitlStep)
    return False


def _plan(ctx: PlanContext, done: Mapping[str, StepResult], histories: Histories,
          in_flight: Sequence[str]) -> tuple[list[str], list[StepJob]]:
    config = _config(ctx)
    running = [key for key in in_flight if key not in done]
    hitl_busy = any(_is_hitl(config, key) for key in running)
    running_branches = {parsed[0] for parsed in map(parse_key, running) if parsed}
    started = {b.id for b in config.branches if histories[b.id] or b.id in running_branches}
    active = {b.id for b in config.branches
              if b.id in started and len(histories[b.id]) < len(b.steps)}
    free = max(ctx.spec.runtime.max_parallel, 1) - len(active)
    chosen: list[StepJob] = []
    for position, branch in enumerate(config.branches):
        index = len(histories[branch.id])
        if index == len(branch.steps) or branch_key(branch.id, index) in running:
            continue
        if branch.id not in active and free <= 0:
            continue
        if isinstance(branch.steps[index], HitlStep):
            if hitl_busy:
                continue
            hitl_busy = True
        if branch.id not in active:
            free -= 1
        chosen.append(_branch_job(ctx, position, branch, index, histories[branch.id]))
    all_done = all(len(histories[b.id]) == len(b.steps) for b in config.branches)
    if (all_done and config.reduce is not None and REDUCE_KEY not in done
            and REDUCE_KEY not in running):
        chosen.append(_reduce_job(ctx, config.reduce, histories))
    return running + [job.key for job in chosen], chosen


def _failed_branches(config: ParallelConfig, failed_steps: frozenset[str]) -> list[str]:
    """Branches with a step failed past its retries (spec order); a resume re-runs them."""
    failed = {parsed[0] for parsed in map(parse_key, failed_steps) if parsed}
    return [branch.id for branch in config.branches if branch.id in failed]


def _aggregate(branches: Mapping[str, Mapping[str, Any]]) -> str:
    return "\n\n---\n\n".join(f"Branch {bid}:\n{data['response']}"
                              for bid, data in sorted(branches.items()))


class ParallelPlanner:
    def start(self, ctx: PlanContext) -> Decision:
        return self._decide(ctx, with_result(ctx, None))

    def advance(self, ctx: PlanContext, result: StepResult) -> Decision:
        return self._decide(ctx, with_result(ctx, result))

    def _decide(self, ctx: PlanContext, done: dict[str, StepResult]) -> Decision:
        config = _config(ctx)
        histories = _histories(config, done)
        in_flight, jobs = _plan(ctx, done, histories, ParallelState.load(ctx.state).in_flight)
        branches = _branches(config, histories)
        state = ParallelState(in_flight=in_flight, completed_branches=list(branches),
                              reduce_completed=REDUCE_KEY in done).dump()
        if len(branches) < len(config.branches) or (
                config.reduce is not None and REDUCE_KEY not in done):
            return Decision(state=state, schedule=tuple(jobs))
        final = done[REDUCE_KEY].response if config.reduce is not None else _aggregate(branches)
        return Decision(state=state, status=SessionStatus.COMPLETED, final_response=final,
                        artifact_context={"last_response": final, **ctx.variables,
                                          "branches": branches})

    def view(self, ctx: PlanContext) -> dict[str, Any]:
        config = _config(ctx)
        done = with_result(ctx, None)
        histories = _histories(config, done)
        outputs: dict[str, dict[str, Any]] = {}
        for branch in config.branches:
            history = histories[branch.id]
            if history:
                outputs[branch.id] = {"response": history[-1]["response"],
                                      "tokens": sum(r["tokens"] for r in history),
                                      "steps": history}
        reduce = done.get(REDUCE_KEY)
        return {
            "completed_branches": list(_branches(config, histories)),
            "failed_branches": _failed_branches(config, ctx.failed_steps),
            "branch_outputs": outputs,
            "reduce_completed": reduce is not None,
            "reduce_output": reduce.response if reduce is not None else None,
        }


class ParallelPattern(PatternDefinition[ParallelConfig]):
    pattern_type = "parallel"
    parts_field = "branches"
    config_model = ParallelConfig
    schema_def = "parallelConfig"
    context_names = name_set("branches steps")
    planner = ParallelPlanner()
    state_model = ParallelState

    def steps(self, config: ParallelConfig) -> Iterator[StepSite]:
        for i, branch in enumerate(config.branches):
            yield from indexed(f"pattern.config.branches[{i}].steps", branch.steps)
        yield from optional("pattern.config.reduce", config.reduce)

    def check(self, config: ParallelConfig, source: str) -> None:
        check_unique([b.id for b in config.branches], "pattern.config.branches", "branch",
                     source)

    def shape(self, view: Mapping[str, Any]) -> Shape:
        return shapes.parallel(view)


PATTERN = ParallelPattern()
