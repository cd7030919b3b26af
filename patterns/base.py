"""What every pattern planner is: pure functions of spec + pattern_state + results.

A planner never does I/O. The worker feeds it the committed results and the step that
just finished; what it decides (new pattern_state, steps to schedule, completion,
failure, pause) is committed atomically with the step's result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from strands_durable.models import SessionStatus, StepJob, StepKind, StepResult
from strands_durable.spec.steps import HitlStep
from strands_durable.spec.templates import render

if TYPE_CHECKING:  # spec.model picks pattern configs through this package's registry
    from strands_durable.spec.model import Spec


@dataclass(frozen=True)
class PlanContext:
    spec: Spec
    variables: Mapping[str, Any]
    # The stored pattern_state, as JSON: planners read it through their pattern's
    # model (`state_model.load`, patterns/state.py).
    state: Mapping[str, Any]
    # Committed results by step key, in commit order.
    results: Mapping[str, StepResult]
    session_id: str = ""
    # Steps that failed past their retries, waiting for a resume (views only).
    failed_steps: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Decision:
    state: dict[str, Any]  # the pattern_state to store: the model's `dump()`
    schedule: tuple[StepJob, ...] = ()
    status: SessionStatus = SessionStatus.RUNNING
    reason: str = ""  # the error when failed, the reason when paused
    final_response: str | None = None
    # Context the artifacts render with, once the session completes.
    artifact_context: Mapping[str, Any] = field(default_factory=dict)


def with_result(ctx: PlanContext, extra: StepResult | None) -> dict[str, StepResult]:
    """The committed results plus the one just finished (which ctx.results excludes)."""
    results = dict(ctx.results)
    if extra is not None:
        results[extra.key] = extra
    return results


def split_key(key: str, prefix: str) -> tuple[str, int] | None:
    """("id", n) of a key "<prefix><id>:<n>"; ids may themselves contain ':'."""
    if not key.startswith(prefix):
        return None
    name, _, number = key[len(prefix):].rpartition(":")
    return (name, int(number)) if name and number.isdigit() else None


EXCERPT_CHARS = 200


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """An LLM reply shortened to one line, for error messages."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def agent_job(ctx: PlanContext, *, key: str, agent: str, input_template: str | None,
              context: Mapping[str, Any], where: str, lane: str = "",
              meta: Mapping[str, Any] | None = None) -> StepJob:
    """A job for `agent` with its input rendered in `context`; its system prompt is the
    agent's prompt as written, as strands-cli uses it (a literal `{{` stays literal)."""
    prompt = ctx.spec.agents[agent].prompt if agent in ctx.spec.agents else ""
    return StepJob(
        session_id=ctx.session_id, key=key, agent=agent,
        input=render(input_template or "", context, where),
        system_prompt=prompt,
        lane=lane, meta=dict(meta or {}),
    )


HITL_AGENT = "hitl"


def hitl_job(ctx: PlanContext, *, key: str, step: HitlStep, context: Mapping[str, Any],
             where: str, meta: Mapping[str, Any] | None = None) -> StepJob:
    """A human-in-the-loop step. The worker never runs it: scheduling one pauses the
    session until a response (or, after `timeout_seconds`, the default) is committed
    as this step's result, with agent "hitl"."""
    prompt = render(step.prompt, context, f"{where}.prompt")
    return StepJob(
        session_id=ctx.session_id, key=key, agent=HITL_AGENT, kind=StepKind.HITL, input=prompt,
        meta={**(meta or {}),
              "prompt": prompt,
              "context_display": render(step.context_display or "", context,
                                        f"{where}.context_display"),
              "default": step.default, "timeout_seconds": step.timeout_seconds or 0},
    )


class Planner(Protocol):
    def start(self, ctx: PlanContext) -> Decision: ...

    def advance(self, ctx: PlanContext, result: StepResult) -> Decision: ...

    def view(self, ctx: PlanContext) -> dict[str, Any]:
        """pattern_state in the shape of seed 000/001, for people and the API."""
        ...
