"""The pattern planners, by pattern type."""

from __future__ import annotations

from scheduler.patterns.base import Decision, PlanContext, Planner
from scheduler.patterns.chain import ChainPlanner
from scheduler.patterns.evaluator_optimizer import EvaluatorOptimizerPlanner
from scheduler.patterns.graph import GraphPlanner
from scheduler.patterns.orchestrator_workers import OrchestratorWorkersPlanner
from scheduler.patterns.parallel import ParallelPlanner
from scheduler.patterns.routing import RoutingPlanner
from scheduler.patterns.workflow import WorkflowPlanner

PLANNERS: dict[str, Planner] = {
    "chain": ChainPlanner(),
    "workflow": WorkflowPlanner(),
    "routing": RoutingPlanner(),
    "parallel": ParallelPlanner(),
    "evaluator_optimizer": EvaluatorOptimizerPlanner(),
    "orchestrator_workers": OrchestratorWorkersPlanner(),
    "graph": GraphPlanner(),
}


def planner_for(pattern_type: str) -> Planner:
    try:
        return PLANNERS[pattern_type]
    except KeyError:
        supported = ", ".join(sorted(PLANNERS))
        raise NotImplementedError(
            f"pattern {pattern_type!r} is not supported yet (supported: {supported})"
        ) from None


__all__ = ["PLANNERS", "Decision", "PlanContext", "Planner", "planner_for"]
