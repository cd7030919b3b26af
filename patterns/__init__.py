"""The patterns, by type: each module owns its config model, its checks and its planner;
patterns/state.py holds the model of each one's stored state.

Adding a pattern: a module beside these with its `PatternDefinition` as `PATTERN` (its
`state_model` a model of patterns/state.py), and one line below.
"""

from __future__ import annotations

from typing import Any

from strands_durable.patterns import (
    chain,
    evaluator_optimizer,
    graph,
    orchestrator_workers,
    parallel,
    routing,
    workflow,
)
from strands_durable.patterns.base import Decision, PlanContext, Planner
from strands_durable.patterns.definition import PatternDefinition

PATTERNS: dict[str, PatternDefinition[Any]] = {
    definition.pattern_type: definition
    for definition in (
        chain.PATTERN,
        workflow.PATTERN,
        routing.PATTERN,
        parallel.PATTERN,
        evaluator_optimizer.PATTERN,
        orchestrator_workers.PATTERN,
        graph.PATTERN,
    )
}
PATTERN_TYPES: tuple[str, ...] = tuple(PATTERNS)


def pattern_for(pattern_type: str) -> PatternDefinition[Any]:
    try:
        return PATTERNS[pattern_type]
    except KeyError:
        supported = ", ".join(sorted(PATTERNS))
        raise NotImplementedError(
            f"pattern {pattern_type!r} is not supported yet (supported: {supported})"
        ) from None


def planner_for(pattern_type: str) -> Planner:
    return pattern_for(pattern_type).planner


__all__ = [
    "PATTERNS",
    "PATTERN_TYPES",
    "Decision",
    "PatternDefinition",
    "PlanContext",
    "Planner",
    "pattern_for",
    "planner_for",
]
