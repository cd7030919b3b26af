"""Whether a worker may plan a spec's commits on its event loop.

A worker planned every commit in a thread (worker/step_runner.py), because planning
renders the spec's templates, CPU work a spec controls and that only
DURABLE_RENDER_TIMEOUT_S (seconds) bounds, while the loop must keep renewing leases and
serving the worker's other steps. But the hop to the thread and back costs more than
most plans (about 0.1 ms of CPU a step, a third of a no-op step's).

So a worker first plans on its loop, inside `render_guard.on_the_loop(LOOP_BUDGET_S)`:
every render checks that budget as it checks its own deadline (on each call, operator,
loop iteration, filter and output; a spec regex gets the time left as its timeout), and
a render past it stops with LoopBudgetSpent. The worker then plans that commit again in
the thread, under the render's own limits, and plans that spec's later commits there
from the start. A slow or hostile template costs the loop at most about LOOP_BUDGET_S,
once per spec and worker.

Two kinds of spec always plan in the thread, since their plans do work no render budget
bounds: notes (rebuilt from every committed result, each step) and `{{ TRACE }}` (the
spans of every step).
"""

from __future__ import annotations

from strands_durable.planning.trace import traced
from strands_durable.spec.model import Spec

# How long a plan's renders may hold the worker's event loop before the plan moves to
# a thread: well under a lease's renewal (seconds), well over a typical plan (0.05 ms).
LOOP_BUDGET_S = 0.005


def may_plan_on_loop(spec: Spec) -> bool:
    """Whether a worker may try `spec`'s plans on its event loop first."""
    notes = spec.context_policy is not None and spec.context_policy.notes is not None
    return not (notes or traced(spec))
