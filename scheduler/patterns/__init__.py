"""The pattern planners, by pattern type."""

from __future__ import annotations

from strands_durable.scheduler.patterns.base import Decision, PlanContext, Planner
from strands_durable.scheduler.patterns.chain import ChainPlanner
from strands_durable.scheduler.patterns.evaluator_optimizer import EvaluatorOptimizerPlanner
from strands_durable.scheduler.patterns.graph import GraphPlanner
from strands_durable.scheduler.patterns.orchestrator_workers import OrchestratorWorkersPlanner
from strands_durable.scheduler.patterns.parallel import ParallelPlanner
from strands_durable.scheduler.patterns.routing import RoutingPlanner
from strands_durable.scheduler.patterns.workflow import WorkflowPlanner

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
