"""workflow: a DAG of tasks; each runs once all its deps are done, up to max_parallel.

A task's input renders with the variables, `tasks` (the records of its completed
ancestors, in strands-cli's execution order), `last_response` (the last of those) and
`hitl_response` (the last HITL ancestor's answer). strands-cli runs whole layers and
shows a task every task of the earlier layers; here a task starts as soon as what it
reads is done, so what it sees never depends on timing:
  * its declared deps and their ancestors;
  * plus every earlier-layer task its templates (input, or a HITL task's prompt and
    context_display, and its agent's prompt) name as `tasks.<id>` / `tasks['<id>']`:
    an implicit dep, so a strands-cli spec that reads a task it does not list in
    `deps` renders as in strands-cli;
  * plus, when a template uses `tasks` any other way (`{% for t in tasks %}`,
    `tasks | list`), every task of the earlier layers, exactly strands-cli's view.
Implicit deps only point to earlier layers, so the layers (and the final response)
stay strands-cli's. A task of the same or a later layer stays invisible, as there.

pattern_state (stored, state.WorkflowState): {"completed_tasks": [id, ...],
    "in_flight": [id, ...]}
    completed in execution order; in_flight = scheduled and not yet committed.
pattern_state (view):   {"completed_tasks", "pending_tasks" (deps met, not done),
    "blocked_tasks" (a dep not done), "task_outputs": {id: {response, tokens, agent,
    dependencies}}}

Step keys are `task:<id>`; agent tasks run on lane `task:<id>`, so two tasks of one
agent never share a conversation. HITL tasks do not take one of the max_parallel
slots (no worker runs them) but at most one is scheduled at a time, as strands-cli
allows one HITL task per layer.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Annotated, Any

from jinja2 import TemplateSyntaxError, nodes
from pydantic import Field, Tag

from strands_durable.errors import SpecError
from strands_durable.models import SessionStatus, StepJob, StepResult
from strands_durable.patterns import shapes
from strands_durable.patterns.base import Decision, PlanContext, agent_job, hitl_job
from strands_durable.patterns.definition import (
    PatternDefinition,
    StepSite,
    check_unique,
    indexed,
    name_set,
)
from strands_durable.patterns.shapes import Shape
from strands_durable.patterns.state import WorkflowState
from strands_durable.spec.problems import hint
from strands_durable.spec.steps import HitlStep, PatternConfig, SpecModel, hitl_or
from strands_durable.spec.templates import ENV

if TYPE_CHECKING:  # spec.model picks pattern configs through the pattern registry
    from strands_durable.spec.model import AgentSpec


class WorkflowTask(SpecModel):
    """One workflow task: an agent, its input, and the tasks it depends on (`deps`)."""

    id: str
    agent: str
    deps: list[str] = Field(default_factory=list)
    description: str | None = None
    input: str | None = None


class HitlTask(HitlStep):
    id: str
    deps: list[str] = Field(default_factory=list)


Task = Annotated[
    Annotated[WorkflowTask, Tag("agent")] | Annotated[HitlTask, Tag("hitl")],
    hitl_or("agent"),
]


class WorkflowConfig(PatternConfig):
    """The workflow pattern: tasks with dependencies, run as a DAG (independent ones side by
    side)."""

    tasks: list[Task]

PREFIX = "task:"


def task_key(task_id: str) -> str:
    return f"{PREFIX}{task_id}"


def _config(ctx: PlanContext) -> WorkflowConfig:
    config = ctx.spec.pattern.config
    assert isinstance(config, WorkflowConfig)
    return config


def layers(tasks: Sequence[Task]) -> list[list[str]]:
    """strands-cli's execution layers (Kahn's algorithm, same queue order)."""
    in_degree = {task.id: len(task.deps) for task in tasks}
    children: dict[str, list[str]] = {task.id: [] for task in tasks}
    for task in tasks:
        for dep in task.deps:
            children[dep].append(task.id)
    out: list[list[str]] = []
    queue = deque(task_id for task_id, degree in in_degree.items() if degree == 0)
    while queue:
        layer = [queue.popleft() for _ in range(len(queue))]
        for task_id in layer:
            for child in children[task_id]:
                in_degree[child] -= 1
                if in_degree[child] == 0:
                    queue.append(child)
        out.append(layer)
    return out


def execution_order(tasks: Sequence[Task]) -> list[str]:
    return [task_id for layer in layers(tasks) for task_id in layer]


_DICT_METHODS = frozenset({"items", "keys", "values", "get"})


@lru_cache(maxsize=1024)
def task_refs(template: str) -> frozenset[str] | None:
    """Task ids `template` reads as tasks.<id> or tasks['<id>']; None when it uses
    `tasks` any other way (a loop, a filter), so it may read every task it is shown."""
    try:
        tree = ENV.parse(template)
    except TemplateSyntaxError:
        return frozenset()  # the loader reports it; rendering would fail the same way
    uses = sum(1 for name in tree.find_all(nodes.Name)
               if name.name == "tasks" and name.ctx == "load")
    refs: set[str] = set()
    for access in tree.find_all((nodes.Getattr, nodes.Getitem)):
        assert isinstance(access, (nodes.Getattr, nodes.Getitem))
        target = access.node
        if not (isinstance(target, nodes.Name) and target.name == "tasks"):
            continue
        if isinstance(access, nodes.Getattr):
            if access.attr in _DICT_METHODS:
                return None  # tasks.items() and the like
            refs.add(access.attr)
        elif isinstance(access.arg, nodes.Const) and isinstance(access.arg.value, str):
            refs.add(access.arg.value)
        else:
            return None  # tasks[some_expression]
        uses -= 1
    return frozenset(refs) if uses == 0 else None


def _templates(task: Task, agents: Mapping[str, AgentSpec]) -> list[str]:
    """Every template rendered in the task's context."""
    if isinstance(task, HitlTask):
        return [task.prompt, task.context_display or ""]
    agent = agents.get(task.agent)
    return [task.input or "", agent.prompt if agent else ""]


def effective_deps(tasks: Sequence[Task], agents: Mapping[str, AgentSpec],
                   task_layers: Sequence[Sequence[str]] | None = None
                   ) -> dict[str, frozenset[str]]:
    """Each task's declared deps plus the earlier-layer tasks its templates read."""
    task_layers = layers(tasks) if task_layers is None else task_layers
    layer_of = {task_id: i for i, layer in enumerate(task_layers) for task_id in layer}
    deps: dict[str, frozenset[str]] = {}
    for task in tasks:
        earlier = {t for t, layer in layer_of.items() if layer < layer_of[task.id]}
        read: set[str] = set()
        for template in _templates(task, agents):
            refs = task_refs(template)
            read |= earlier if refs is None else refs & earlier
        deps[task.id] = frozenset(task.deps) | read
    return deps


def _ancestors(deps: Mapping[str, frozenset[str]], task_id: str) -> set[str]:
    seen: set[str] = set()
    stack = list(deps[task_id])
    while stack:
        dep = stack.pop()
        if dep not in seen:
            seen.add(dep)
            stack.extend(deps[dep])
    return seen


def _done(ctx: PlanContext, extra: StepResult | None = None) -> dict[str, StepResult]:
    """Committed task results by task id (plus `extra`, the one just finished)."""
    results = list(ctx.results.values()) + ([extra] if extra is not None else [])
    return {r.key[len(PREFIX):]: r for r in results if r.key.startswith(PREFIX)}


def _record(task: Task, result: StepResult) -> dict[str, Any]:
    """A task as templates see it (strands-cli's task_results entry)."""
    if isinstance(task, HitlTask):
        return {"type": "hitl", "prompt": task.prompt, "response": result.response,
                "status": "success", "tokens_estimated": 0, "tokens": 0, "agent": "hitl"}
    return {"response": result.response, "status": "success",
            "tokens_estimated": result.tokens, "tokens": result.tokens, "agent": task.agent}


def _records(by_id: Mapping[str, Task], order: Sequence[str], done: Mapping[str, StepResult],
             only: set[str] | None = None) -> dict[str, dict[str, Any]]:
    return {task_id: _record(by_id[task_id], done[task_id]) for task_id in order
            if task_id in done and (only is None or task_id in only)}


def _context(ctx: PlanContext, tasks: dict[str, dict[str, Any]]) -> dict[str, Any]:
    context: dict[str, Any] = {**ctx.variables, "tasks": tasks,
                               "last_response": ""}
    for record in tasks.values():  # execution order: the last one wins
        context["last_response"] = record["response"]
        if record.get("type") == "hitl":
            context["hitl_response"] = record["response"]
    return context


def _job(ctx: PlanContext, index: int, task: Task, by_id: Mapping[str, Task],
         order: Sequence[str], done: Mapping[str, StepResult],
         deps: Mapping[str, frozenset[str]]) -> StepJob:
    context = _context(ctx, _records(by_id, order, done, _ancestors(deps, task.id)))
    where = f"pattern.config.tasks[{index}]"
    meta = {"task": task.id}
    if isinstance(task, HitlTask):
        return hitl_job(ctx, key=task_key(task.id), step=task, context=context, where=where,
                        meta=meta)
    return agent_job(ctx, key=task_key(task.id), agent=task.agent, input_template=task.input,
                     context=context, where=f"{where}.input", lane=task_key(task.id),
                     meta=meta)


@dataclass(frozen=True)
class TaskGraph:
    """What the spec's tasks say, worked out once per decision."""

    by_id: dict[str, Task]
    index: dict[str, int]  # position in the spec (the task's `where`)
    order: list[str]  # execution order: layer by layer
    deps: dict[str, frozenset[str]]
    last: str  # strands-cli's final task: the last of the last layer


def task_graph(ctx: PlanContext) -> TaskGraph:
    tasks = _config(ctx).tasks
    task_layers = layers(tasks)
    return TaskGraph(by_id={task.id: task for task in tasks},
                     index={task.id: i for i, task in enumerate(tasks)},
                     order=[task_id for layer in task_layers for task_id in layer],
                     deps=effective_deps(tasks, ctx.spec.agents, task_layers),
                     last=task_layers[-1][-1])


def _plan(ctx: PlanContext, graph: TaskGraph, done: Mapping[str, StepResult],
          in_flight: Sequence[str]) -> tuple[list[str], list[StepJob]]:
    """The tasks to schedule now: ready (deps done), not yet scheduled, in execution
    order, within the free agent slots and at most one HITL task outstanding."""
    by_id, index, order, deps = graph.by_id, graph.index, graph.order, graph.deps
    running = [t for t in in_flight if t not in done]
    free = max(ctx.spec.runtime.max_parallel, 1) - sum(
        1 for t in running if not isinstance(by_id[t], HitlTask))
    hitl_busy = any(isinstance(by_id[t], HitlTask) for t in running)
    chosen: list[str] = []
    jobs: list[StepJob] = []
    for task_id in order:
        task = by_id[task_id]
        if task_id in done or task_id in running or not deps[task_id] <= done.keys():
            continue
        if isinstance(task, HitlTask):
            if hitl_busy:
                continue
            hitl_busy = True
        elif free <= 0:
            continue
        else:
            free -= 1
        chosen.append(task_id)
        jobs.append(_job(ctx, index[task_id], task, by_id, order, done, deps))
    return running + chosen, jobs


def _state(order: Sequence[str], done: Mapping[str, StepResult], in_flight: list[str]
           ) -> WorkflowState:
    return WorkflowState(completed_tasks=[t for t in order if t in done], in_flight=in_flight)


class WorkflowPlanner:
    def start(self, ctx: PlanContext) -> Decision:
        return self._decide(ctx, _done(ctx))

    def advance(self, ctx: PlanContext, result: StepResult) -> Decision:
        return self._decide(ctx, _done(ctx, result))

    def _decide(self, ctx: PlanContext, done: dict[str, StepResult]) -> Decision:
        graph = task_graph(ctx)
        in_flight, jobs = _plan(ctx, graph, done, WorkflowState.load(ctx.state).in_flight)
        state = _state(graph.order, done, in_flight).dump()
        if not all(task_id in done for task_id in graph.order):
            return Decision(state=state, schedule=tuple(jobs))
        # strands-cli: the final response is the last task of the last layer.
        final = done[graph.last].response
        return Decision(state=state, status=SessionStatus.COMPLETED, final_response=final,
                        artifact_context={"last_response": final, **ctx.variables,
                                          "tasks": _records(graph.by_id, graph.order, done)})

    def view(self, ctx: PlanContext) -> dict[str, Any]:
        graph = task_graph(ctx)
        order, by_id, deps = graph.order, graph.by_id, graph.deps
        done = _done(ctx)
        waiting = [t for t in order if t not in done]
        return {
            "completed_tasks": [t for t in order if t in done],
            "pending_tasks": [t for t in waiting if deps[t] <= done.keys()],
            "blocked_tasks": [t for t in waiting if not deps[t] <= done.keys()],
            "task_outputs": {
                t: {"response": done[t].response, "tokens": done[t].tokens,
                    "agent": done[t].agent, "dependencies": list(by_id[t].deps)}
                for t in order if t in done
            },
        }


def find_cycle(deps: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A cycle in the dependency graph as [a, b, ..., a], or None (depth-first search)."""
    done: set[str] = set()

    def visit(node: str, trail: list[str]) -> list[str] | None:
        if node in trail:
            return [*trail[trail.index(node) :], node]
        if node in done:
            return None
        for dep in deps.get(node, ()):
            found = visit(dep, [*trail, node])
            if found:
                return found
        done.add(node)
        return None

    for task_id in deps:
        found = visit(task_id, [])
        if found:
            return found
    return None


class WorkflowPattern(PatternDefinition[WorkflowConfig]):
    pattern_type = "workflow"
    parts_field = "tasks"
    config_model = WorkflowConfig
    schema_def = "workflowConfig"
    context_names = name_set("tasks")
    planner = WorkflowPlanner()
    state_model = WorkflowState

    def steps(self, config: WorkflowConfig) -> Iterator[StepSite]:
        return indexed("pattern.config.tasks", config.tasks)

    def check(self, config: WorkflowConfig, source: str) -> None:
        """Unique ids, known dependencies, no dependency cycle."""
        path = "pattern.config.tasks"
        ids = [task.id for task in config.tasks]
        check_unique(ids, path, "task", source)
        for i, task in enumerate(config.tasks):
            for j, dep in enumerate(task.deps):
                if dep not in ids:
                    raise SpecError(source, f"{path}[{i}].deps[{j}]",
                                    f"unknown task {dep!r}{hint(dep, ids)}")
        cycle = find_cycle({task.id: task.deps for task in config.tasks})
        if cycle:
            raise SpecError(source, path, f"dependency cycle: {' -> '.join(cycle)}")

    def shape(self, view: Mapping[str, Any]) -> Shape:
        return shapes.workflow(view)


PATTERN = WorkflowPattern()
