"""Each pattern's stored pattern_state as a typed model.

The store keeps the JSON: `Decision.state` and `PlanContext.state` stay plain dicts. A
planner loads its pattern's model from `ctx.state`, reads and sets attributes, and hands
`state.dump()` back in its Decision; `PatternDefinition.state_model` names the model.

`Model.load(stored).dump()` is the stored dict again, key for key and in the same order,
so a session stored by an earlier version runs on unchanged and every state a planner
writes is the JSON it always wrote:
  * the keys are the fields in their declared order, the order every planner writes;
  * a field the stored state lacks stays out of the dump until the planner sets it (a
    model made by a planner, rather than loaded, dumps every field);
  * keys that are not fields ride along after them untouched: `final_response`, which
    planning/advance.py adds to the state it stores when a session completes.
Defaults are what the views assumed when a key was missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

__all__ = [
    "ChainState",
    "EvaluationRecord",
    "EvaluatorOptimizerState",
    "GraphState",
    "OrchestratorWorkersState",
    "ParallelState",
    "PatternState",
    "RoundRecord",
    "RoutingState",
    "WorkflowState",
]


class StoredModel(BaseModel):
    """A model of stored JSON: unknown keys kept, assignments checked."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)


class PatternState(StoredModel):
    """A pattern_state. This base has no fields: every key is kept as it is (the raw
    state of a pattern without a model of its own)."""

    _loaded: bool = PrivateAttr(default=False)

    @classmethod
    def load(cls, state: Mapping[str, Any]) -> Self:
        """The model of a stored state; ValidationError (a ValueError) if it is not one."""
        model = cls.model_validate(dict(state))
        model._loaded = True
        return model

    def dump(self) -> dict[str, Any]:
        """The state to store: what `load` read, with the planner's changes."""
        return self.model_dump(exclude_unset=self._loaded)


class ChainState(PatternState):
    current_step: int = 0  # the next step to run


class WorkflowState(PatternState):
    completed_tasks: list[str] = Field(default_factory=list)  # in execution order
    in_flight: list[str] = Field(default_factory=list)  # task ids scheduled, not committed


class ParallelState(PatternState):
    in_flight: list[str] = Field(default_factory=list)  # step keys scheduled, not committed
    completed_branches: list[str] = Field(default_factory=list)  # in spec order
    reduce_completed: bool = False


class RoutingState(PatternState):
    phase: Literal["router", "review", "route", "done"] = "router"
    router_attempts: int = 0
    router_key: str | None = None  # the key of the accepted router reply
    router_choice: str | None = None
    current_step: int = 0  # the next route step
    routed_agent_completed: bool = False


class EvaluationRecord(StoredModel):
    """An evaluated draft: its iteration, the evaluation step's key and its score."""

    iteration: int
    key: str
    score: int


class EvaluatorOptimizerState(PatternState):
    current_iteration: int = 1
    phase: Literal["produce", "evaluate", "review", "done"] = "produce"
    evaluations: list[EvaluationRecord] = Field(default_factory=list)
    accepted: bool = False
    early_termination: bool = False


class RoundRecord(StoredModel):
    """An orchestrator round: its number and the task texts its plan asked for."""

    round: int
    tasks: list[str]


class OrchestratorWorkersState(PatternState):
    phase: Literal["orchestrate", "review_decomposition", "workers", "review_reduce",
                   "reduce", "writeup", "done"] = "orchestrate"
    current_round: int = 1
    orchestrator_attempts: int = 1
    rounds: list[RoundRecord] = Field(default_factory=list)
    dispatched: int = 0  # workers of the current round scheduled so far
    orchestrator_decision: Literal["continue", "complete"] = "continue"
    reduce_completed: bool = False
    writeup_completed: bool = False


class GraphState(PatternState):
    current_node: str | None = None  # scheduled / running (the terminal one at the end)
    iteration_counts: dict[str, int] = Field(default_factory=dict)  # visits started
    total_steps: int = 0  # agent node executions finished
