"""graph: a state machine of nodes and edges, as strands-cli's graph executor runs it.

Execution (strands-cli `exec/graph.py`): the first node in `nodes` is the entry. After a
node runs, the FIRST edge whose `from` is that node decides what runs next (later edges
from the same node are ignored, as in strands-cli): a static `to: [...]` goes to its first
target only; `choose: [{when, to}]` goes to the first choice whose `when` is true (`else`
always is). No edge from the node, or no `when` true, makes it terminal: the session
completes with its response. One node runs at a time.

Limits:
  * `pattern.config.max_iterations` (default 10) applies PER NODE: the visit that would
    exceed it fails the session naming the node and the limit (as strands-cli does);
  * the overall step budget is a budget like any other (planning/budgets.py):
    `runtime.budgets.max_steps`, else strands-cli's 100 for a graph. Reaching it PAUSES
    the session with the reason, the next node held; `durable resume SID --set
    budgets.max_steps=N` continues. (strands-cli fails instead; a durable session can
    go on.) It counts committed steps, HITL answers included; `total_steps` below stays
    strands-cli's count of agent node executions.

Templates (node inputs, agent prompts, HITL prompts, `when` conditions) see the input
variables, `last_response` (the last finished node's response, "" before any),
`hitl_response` (the latest HITL node's answer, None before any, as strands-cli) and
`nodes`: EVERY node, pre-filled as strands-cli does with {response: None, agent,
status: "not_executed", iteration: 0}, then {response, agent, status: "success",
iteration: k} once its k-th visit has finished. A node's own template sees its previous
visit (strands-cli builds the context before the node runs). strands-cli's conditions
see only `nodes` and `hitl_response`; ours see the whole context, a superset.

Step keys: the k-th visit (k from 1) of node `id` is `node:<id>:<k>`. HITL nodes are
scheduled with hitl_job and the human's answer comes back as that step's result.

pattern_state (stored, state.GraphState; O(nodes) whatever the number of steps):
    {"current_node": id,           # the node scheduled / running (the terminal one at the end)
     "iteration_counts": {id: k},  # visits started per node, the scheduled one included
     "total_steps": n}             # agent node executions finished (HITL answers excluded)
Everything else (the visit order, each node's latest output) is derived from the results:
the latest output of node `id` is the result `node:<id>:<iteration_counts[id]>`.

pattern_state (view): current_node, node_history (finished visits in order),
iteration_counts, total_steps, node_outputs {id: {response, iteration, status}} for every
node (a HITL node waiting for its answer: status "waiting_for_user").
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Annotated, Any

from pydantic import Field, Tag

from strands_durable.errors import SpecError, TemplateError
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
    TemplateField,
    name_set,
)
from strands_durable.patterns.shapes import Shape
from strands_durable.patterns.state import GraphState
from strands_durable.spec.problems import hint
from strands_durable.spec.steps import HitlStep, PatternConfig, SpecModel, hitl_or
from strands_durable.spec.templates import render_condition


class AgentNode(SpecModel):
    """A graph node that runs an agent (its `input` a template; the default input otherwise)."""

    agent: str
    input: str | None = None


GraphNode = Annotated[
    Annotated[AgentNode, Tag("agent")] | Annotated[HitlStep, Tag("hitl")],
    hitl_or("agent"),
]


class Choice(SpecModel):
    """A conditional edge target: go `to` this node when the `when` expression is true."""

    when: str
    to: str


class Edge(SpecModel):
    """Exactly one of `to` (static; only the first target runs) or `choose`."""

    from_: str = Field(alias="from")
    to: list[str] | None = None
    choose: list[Choice] | None = None


class GraphConfig(PatternConfig):
    """The graph pattern: nodes, edges (static or chosen by conditions), and the most iterations."""

    max_iterations: int = 10
    nodes: dict[str, GraphNode]  # insertion order matters: the first node is the entry
    edges: list[Edge]


# strands-cli's total node-execution limit when runtime.budgets.max_steps is not set.
DEFAULT_MAX_STEPS = 100
_PREFIX = "node:"


def node_key(node_id: str, visit: int) -> str:
    return f"{_PREFIX}{node_id}:{visit}"


def parse_key(key: str) -> tuple[str, int] | None:
    """(node id, visit) of a graph step key, or None."""
    return split_key(key, _PREFIX)


def _config(ctx: PlanContext) -> GraphConfig:
    config = ctx.spec.pattern.config
    assert isinstance(config, GraphConfig)
    return config


def _agent_of(node: GraphNode) -> str | None:
    return node.agent if isinstance(node, AgentNode) else None


def _blank(node: GraphNode) -> dict[str, Any]:
    return {"response": None, "agent": _agent_of(node), "status": "not_executed",
            "iteration": 0}


def _output(node: GraphNode, result: StepResult, visit: int) -> dict[str, Any]:
    if isinstance(node, HitlStep):
        return {"response": result.response, "type": "hitl", "prompt": node.prompt,
                "status": "success", "iteration": visit}
    return {"response": result.response, "agent": _agent_of(node), "status": "success",
            "iteration": visit}


def _latest(ctx: PlanContext, node_id: str, count: int, extra: StepResult | None
            ) -> tuple[StepResult, int] | None:
    """The latest finished visit of `node_id` (the one in flight, if any, has no result)."""
    for visit in (count, count - 1):
        if visit < 1:
            break
        key = node_key(node_id, visit)
        found = extra if extra is not None and extra.key == key else ctx.results.get(key)
        if found is not None:
            return found, visit
    return None


def node_results(ctx: PlanContext, counts: Mapping[str, int],
                 extra: StepResult | None = None) -> dict[str, dict[str, Any]]:
    """`nodes` as templates see it: every node, executed or not, in spec order."""
    outputs: dict[str, dict[str, Any]] = {}
    for node_id, node in _config(ctx).nodes.items():
        latest = _latest(ctx, node_id, int(counts.get(node_id, 0)), extra)
        outputs[node_id] = _blank(node) if latest is None else _output(node, *latest)
    return outputs


def history(ctx: PlanContext, extra: StepResult | None = None) -> list[str]:
    """Node ids of the finished visits, in order (results are in commit order and the
    graph runs one node at a time)."""
    results = list(ctx.results.values()) + ([extra] if extra is not None else [])
    visits = [parsed for r in results if (parsed := parse_key(r.key)) is not None]
    return [node_id for node_id, _ in visits]


def latest_hitl_response(ctx: PlanContext, extra: StepResult | None = None) -> str | None:
    """The most recent answer of any HITL node, None before one (strands-cli's intent;
    it picks the last HITL node in spec order, which differs only when two answered)."""
    config = _config(ctx)
    latest = None
    for result in with_result(ctx, extra).values():
        parsed = parse_key(result.key)
        if parsed is not None and isinstance(config.nodes.get(parsed[0]), HitlStep):
            latest = result.response
    return latest


def _context(ctx: PlanContext, nodes: dict[str, dict[str, Any]], last_response: str,
             extra: StepResult | None = None) -> dict[str, Any]:
    return {**ctx.variables, "nodes": nodes, "last_response": last_response,
            "hitl_response": latest_hitl_response(ctx, extra)}


class _EdgeError(Exception):
    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


def next_node(config: GraphConfig, node_id: str, context: Mapping[str, Any]) -> str | None:
    """The node after `node_id`, or None if it is terminal (strands-cli `_get_next_node`)."""
    for i, edge in enumerate(config.edges):
        if edge.from_ != node_id:
            continue
        if edge.to:
            return edge.to[0]
        for k, choice in enumerate(edge.choose or []):
            where = f"pattern.config.edges[{i}].choose[{k}].when"
            try:
                if render_condition(choice.when, context, where):
                    return choice.to
            except TemplateError as exc:
                raise _EdgeError(
                    f"graph edge from {node_id!r} (to {choice.to!r}): condition "
                    f"{choice.when!r} failed to evaluate: {exc}") from exc
        return None  # no condition matched: terminal, as in strands-cli
    return None


def _job(ctx: PlanContext, node_id: str, visit: int, context: Mapping[str, Any]) -> StepJob:
    config = _config(ctx)
    node = config.nodes[node_id]
    key = node_key(node_id, visit)
    where = f"pattern.config.nodes.{node_id}"
    meta = {"node": node_id, "iteration": visit}
    if isinstance(node, HitlStep):
        return hitl_job(ctx, key=key, step=node, context=context, where=where, meta=meta)
    assert isinstance(node, AgentNode)
    # strands-cli's input for a node without one (it lists every node: all are pre-filled).
    default = (f"Execute task for node '{node_id}'. "
               f"Prior nodes: {', '.join(config.nodes)}.")
    return agent_job(ctx, key=key, agent=node.agent,
                     input_template=node.input if node.input is not None else default,
                     context=context, where=f"{where}.input", meta=meta)


def _visit(ctx: PlanContext, node_id: str, counts: dict[str, int], total_steps: int,
           last_node: str | None, context: Mapping[str, Any]) -> Decision:
    """Schedule the next visit of `node_id`, or fail if its max_iterations forbids it.
    (The overall step budget is checked with the other budgets, after planning.)"""
    visit = counts.get(node_id, 0) + 1
    max_iterations = _config(ctx).max_iterations
    if visit > max_iterations:
        return Decision(
            state=GraphState(current_node=last_node or node_id, iteration_counts=counts,
                             total_steps=total_steps).dump(),
            status=SessionStatus.FAILED,
            reason=(f"graph node {node_id!r} exceeded its max_iterations limit "
                    f"({max_iterations}); possible infinite loop"))
    counts = {**counts, node_id: visit}
    return Decision(
        state=GraphState(current_node=node_id, iteration_counts=counts,
                         total_steps=total_steps).dump(),
        schedule=(_job(ctx, node_id, visit, context),))


class GraphPlanner:
    def start(self, ctx: PlanContext) -> Decision:
        config = _config(ctx)
        entry = next(iter(config.nodes))
        nodes = node_results(ctx, {})
        return _visit(ctx, entry, {}, 0, None, _context(ctx, nodes, ""))

    def advance(self, ctx: PlanContext, result: StepResult) -> Decision:
        config = _config(ctx)
        stored = GraphState.load(ctx.state)
        parsed = parse_key(result.key)
        if parsed is None or parsed[0] not in config.nodes:
            return Decision(state=stored.dump(), status=SessionStatus.FAILED,
                            reason=f"graph: unexpected step {result.key!r}")
        node_id, visit = parsed
        counts = dict(stored.iteration_counts)
        counts[node_id] = max(counts.get(node_id, 0), visit)
        total_steps = stored.total_steps
        if not isinstance(config.nodes[node_id], HitlStep):
            total_steps += 1  # strands-cli counts agent node executions only
        nodes = node_results(ctx, counts, result)
        context = _context(ctx, nodes, result.response, result)
        try:
            nxt = next_node(config, node_id, context)
        except _EdgeError as exc:
            return Decision(
                state=GraphState(current_node=node_id, iteration_counts=counts,
                                 total_steps=total_steps).dump(),
                status=SessionStatus.FAILED, reason=exc.message)
        if nxt is not None:
            return _visit(ctx, nxt, counts, total_steps, node_id, context)
        state = GraphState(current_node=node_id, iteration_counts=counts,
                           total_steps=total_steps).dump()
        tokens = sum(r.tokens for r in ctx.results.values() if parse_key(r.key))
        return Decision(
            state=state, status=SessionStatus.COMPLETED, final_response=result.response,
            artifact_context={
                **ctx.variables,
                "nodes": nodes,
                "terminal_node": node_id,
                "current_node": node_id,
                "total_steps": total_steps,
                "iteration_counts": counts,
                "execution_path": history(ctx, result),
                "cumulative_tokens": tokens + result.tokens,
                "last_response": result.response,
                "hitl_response": context["hitl_response"],
            })

    def view(self, ctx: PlanContext) -> dict[str, Any]:
        config = _config(ctx)
        state = GraphState.load(ctx.state)
        counts = state.iteration_counts
        current = state.current_node or next(iter(config.nodes))
        nodes = node_results(ctx, counts)
        pending = counts.get(current, 0)
        if (pending and node_key(current, pending) not in ctx.results
                and isinstance(config.nodes.get(current), HitlStep)):
            nodes[current] = {**nodes[current], "response": None, "status": "waiting_for_user",
                              "iteration": pending}
        return {
            "current_node": current,
            "node_history": history(ctx),
            "iteration_counts": counts,
            "total_steps": state.total_steps,
            "node_outputs": {node_id: {"response": out["response"],
                                       "iteration": out["iteration"],
                                       "status": out["status"]}
                             for node_id, out in nodes.items()},
        }


class GraphPattern(PatternDefinition[GraphConfig]):
    pattern_type = "graph"
    parts_field = "nodes"
    config_model = GraphConfig
    schema_def = "graphConfig"
    context_names = name_set("nodes terminal_node total_steps iteration_counts iteration"
                             " execution_path current_node")
    planner = GraphPlanner()
    state_model = GraphState
    default_max_steps = DEFAULT_MAX_STEPS

    def steps(self, config: GraphConfig) -> Iterator[StepSite]:
        for node_id, node in config.nodes.items():
            yield f"pattern.config.nodes.{node_id}", node

    def template_fields(self, config: GraphConfig) -> Iterator[TemplateField]:
        yield from super().template_fields(config)
        for i, edge in enumerate(config.edges):
            for k, choice in enumerate(edge.choose or []):
                yield TemplateField(f"pattern.config.edges[{i}].choose[{k}].when", choice.when,
                                    condition=True)

    def check(self, config: GraphConfig, source: str) -> None:
        """Each edge has one of `to` or `choose`, and names known nodes."""
        nodes = list(config.nodes)
        for i, edge in enumerate(config.edges):
            path = f"pattern.config.edges[{i}]"
            if (edge.to is None) == (edge.choose is None):
                raise SpecError(source, path, "an edge needs exactly one of 'to' or 'choose'")
            targets = [(f"{path}.from", edge.from_)]
            targets += [(f"{path}.to[{j}]", to) for j, to in enumerate(edge.to or [])]
            targets += [(f"{path}.choose[{k}].to", c.to)
                        for k, c in enumerate(edge.choose or [])]
            for field, node_id in targets:
                if node_id not in config.nodes:
                    raise SpecError(source, field, f"unknown node {node_id!r}"
                                    f"{hint(node_id, nodes)}; nodes: {', '.join(nodes)}")

    def shape(self, view: Mapping[str, Any]) -> Shape:
        return shapes.graph(view)


PATTERN = GraphPattern()
