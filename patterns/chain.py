"""chain: steps run one after another; step i sees steps[0..i-1] and last_response.

pattern_state (stored, state.ChainState): {"current_step": i} - the next step to run.
pattern_state (view):   + "step_history": [{index, agent, response, tokens}, ...]
Templates see each step record with strands-cli's `tokens_estimated` too.
"""

from __future__ import annotations

import bisect
import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

from strands_durable.errors import SpecError
from strands_durable.models import SessionStatus, StepJob, StepResult
from strands_durable.patterns import shapes
from strands_durable.patterns.base import (
    HITL_AGENT,
    Decision,
    PlanContext,
    agent_job,
    hitl_job,
)
from strands_durable.patterns.definition import (
    PatternDefinition,
    StepSite,
    indexed,
    name_set,
)
from strands_durable.patterns.shapes import Shape
from strands_durable.patterns.state import ChainState
from strands_durable.spec.steps import AgentStep, PatternConfig, Step
from strands_durable.spec.templates import literal_indexes


class ChainConfig(PatternConfig):
    """The chain pattern: its steps run one after another, each seeing the ones before."""

    steps: list[Step]


def step_key(index: int) -> str:
    return f"step:{index}"


def _config(ctx: PlanContext) -> ChainConfig:
    config = ctx.spec.pattern.config
    assert isinstance(config, ChainConfig)
    return config


def _record(index: int, result: StepResult) -> dict[str, Any]:
    """strands-cli's step record (`tokens_estimated`), plus `tokens` (the same count)."""
    if result.agent == HITL_AGENT:
        return {"index": index, "type": "hitl", "prompt": result.meta.get("prompt", ""),
                "response": result.response, "tokens": 0, "tokens_estimated": 0}
    return {"index": index, "agent": result.agent, "response": result.response,
            "tokens": result.tokens, "tokens_estimated": result.tokens}


class StepHistory(Sequence[dict[str, Any]]):
    """`steps` as templates see it: steps[0..n-1], built only where a template looks,
    so planning step 1,000 costs what planning step 10 does."""

    def __init__(self, results: Mapping[str, StepResult], count: int,
                 extra: StepResult | None = None) -> None:
        self._results = results
        self._extra = extra
        self._count = count
        self._built: dict[int, dict[str, Any]] = {}

    def __len__(self) -> int:
        return self._count

    def undefined_message(self, name: object) -> str:
        """What a template that asked for `steps[name]` is told (spec/sandbox.py)."""
        if self._count == 0:
            return f"steps[{name}]: no step has run before this one"
        return (f"steps[{name}]: {self._count} step(s) ran before this one "
                f"(steps[0] to steps[{self._count - 1}])")

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._count))]
        index = i + self._count if i < 0 else i
        if not 0 <= index < self._count:
            raise IndexError(f"steps[{i}]: only {self._count} step(s) have run")
        record = self._built.get(index)
        if record is None:
            key = step_key(index)
            result = self._extra if self._extra and self._extra.key == key \
                else self._results[key]
            record = self._built[index] = _record(index, result)
        return record


def history(ctx: PlanContext, extra: StepResult | None = None) -> StepHistory:
    count = sum(1 for k in ctx.results if k.startswith("step:"))
    if extra is not None and extra.key not in ctx.results:
        count += 1
    return StepHistory(ctx.results, count, extra)


def _context(ctx: PlanContext, steps: StepHistory, step_vars: Mapping[str, Any]
             ) -> dict[str, Any]:
    context = {**ctx.variables, "steps": steps,
               "last_response": steps[-1]["response"] if steps else "", **step_vars}
    # strands-cli: the latest human answer is also `hitl_response`.
    human = _human_steps(_config(ctx))
    latest = bisect.bisect_left(human, len(steps)) - 1
    if latest >= 0:
        context["hitl_response"] = steps[human[latest]]["response"]
    return context


# id(config) -> (the config, weakly, its human steps); an entry goes with its config.
_HUMAN: dict[int, tuple[weakref.ref[ChainConfig], tuple[int, ...]]] = {}


def _human_steps(config: ChainConfig) -> tuple[int, ...]:
    """Indexes of the chain's human steps, in order: found once per config, not per
    step (a scan of the steps before each one made planning O(steps) per step). Not a
    private attribute: pydantic compares those, and two equal specs must stay equal."""
    key = id(config)
    entry = _HUMAN.get(key)
    if entry is not None and entry[0]() is config:
        return entry[1]
    found = tuple(i for i, step in enumerate(config.steps) if not isinstance(step, AgentStep))
    _HUMAN[key] = (weakref.ref(config, lambda _: _HUMAN.pop(key, None)), found)
    return found


def _job(ctx: PlanContext, index: int, steps: StepHistory) -> StepJob:
    step = _config(ctx).steps[index]
    where = f"pattern.config.steps[{index}]"
    if not isinstance(step, AgentStep):
        return hitl_job(ctx, key=step_key(index), step=step, context=_context(ctx, steps, {}),
                        where=where, meta={"index": index})
    meta: dict[str, object] = {"index": index}
    if step.tool_overrides:  # strands-cli: an empty list overrides nothing
        meta["tool_overrides"] = list(step.tool_overrides)
    return agent_job(ctx, key=step_key(index), agent=step.agent, input_template=step.input,
                     context=_context(ctx, steps, step.vars or {}),
                     where=f"pattern.config.steps[{index}].input", meta=meta)


class ChainPlanner:
    def start(self, ctx: PlanContext) -> Decision:
        return Decision(state=ChainState(current_step=0).dump(),
                        schedule=(_job(ctx, 0, StepHistory(ctx.results, 0)),))

    def advance(self, ctx: PlanContext, result: StepResult) -> Decision:
        done = int(result.key.split(":", 1)[1])
        nxt = done + 1
        steps = StepHistory(ctx.results, nxt, result)  # steps 0..done have all run
        state = ChainState(current_step=nxt).dump()
        if nxt < len(_config(ctx).steps):
            return Decision(state=state, schedule=(_job(ctx, nxt, steps),))
        return Decision(state=state, status=SessionStatus.COMPLETED,
                        final_response=result.response,
                        artifact_context={**ctx.variables, "steps": steps,
                                          "last_response": result.response})

    def view(self, ctx: PlanContext) -> dict[str, Any]:
        # The seed's shape: templates' strands-cli alias `tokens_estimated` left out.
        return {"current_step": ChainState.load(ctx.state).current_step,
                "step_history": [{k: v for k, v in record.items() if k != "tokens_estimated"}
                                 for record in history(ctx)]}


class ChainPattern(PatternDefinition[ChainConfig]):
    pattern_type = "chain"
    parts_field = "steps"
    config_model = ChainConfig
    schema_def = "chainConfig"
    context_names = name_set("steps")
    planner = ChainPlanner()
    state_model = ChainState

    def steps(self, config: ChainConfig) -> Iterator[StepSite]:
        return indexed("pattern.config.steps", config.steps)

    def check(self, config: ChainConfig, source: str) -> None:
        """A step's input that names `steps[N]` of a step not before it would fail only
        when it runs, after the steps before it ran (and were paid for)."""
        for i, step in enumerate(config.steps):
            text = getattr(step, "input", None)
            if not isinstance(text, str):
                continue
            for n in literal_indexes(text, "steps"):
                if not -i <= n < i:
                    before = f"steps[0] to steps[{i - 1}]" if i else "none"
                    raise SpecError(source, f"pattern.config.steps[{i}].input",
                                    f"steps[{n}]: {i} step(s) run before this one ({before})")

    def shape(self, view: Mapping[str, Any]) -> Shape:
        return shapes.chain(view)


PATTERN = ChainPattern()
