"""Pure view models of the console: a session's timeline and its pattern's shape, from
the typed status document, its events and its committed results. No I/O here, so each
is tested from data; the templates only lay them out (Jinja2 escapes every field)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from strands_durable.api.watch import step_rows
from strands_durable.models import StepResult

SNIPPET = 160  # characters of a reply shown in a shape line (the full text is in results)


@dataclass(frozen=True)
class TimelineRow:
    step: str
    agent: str
    attempt: int
    state: str
    duration: str
    tokens: str
    tool_calls: int
    detail: str


def timeline(events: Sequence[tuple[str, dict[str, str]]], results: Sequence[StepResult]
             ) -> list[TimelineRow]:
    """Each step once, committed ones in commit order, with its latest outcome."""
    return [TimelineRow(step=r.step, agent=r.agent, attempt=r.attempt, state=r.state,
                        duration="" if r.duration_s is None else f"{r.duration_s:.2f}s",
                        tokens="" if r.tokens is None else str(r.tokens),
                        tool_calls=r.tool_calls, detail=r.detail[:300])
            for r in step_rows(events, results)]


@dataclass(frozen=True)
class ShapeLine:
    label: str
    text: str = ""
    state: str = ""  # done, waiting, failed, blocked, chosen... (a CSS class and a word)


@dataclass(frozen=True)
class Shape:
    title: str
    lines: list[ShapeLine] = field(default_factory=list)
    facts: list[tuple[str, str]] = field(default_factory=list)


def _snip(value: Any) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= SNIPPET else text[:SNIPPET] + "…"


def _chain(view: Mapping[str, Any]) -> Shape:
    lines = [ShapeLine(str(h.get("agent", "")), _snip(h.get("response")), "done")
             for h in view.get("step_history") or []]
    return Shape("Chain: steps in order", lines,
                 [("current step", str(view.get("current_step", "")))])


def _workflow(view: Mapping[str, Any]) -> Shape:
    outputs = view.get("task_outputs") or {}
    lines = [ShapeLine(t, "after " + ", ".join(outputs[t].get("dependencies") or []) + ": "
                       + _snip(outputs[t].get("response")) if outputs[t].get("dependencies")
                       else _snip(outputs[t].get("response")), "done")
             for t in view.get("completed_tasks") or []]
    lines += [ShapeLine(t, "ready", "pending") for t in view.get("pending_tasks") or []]
    lines += [ShapeLine(t, "waits for its dependencies", "blocked")
              for t in view.get("blocked_tasks") or []]
    return Shape("Workflow: task graph", lines)


def _parallel(view: Mapping[str, Any]) -> Shape:
    outputs = view.get("branch_outputs") or {}
    lines = [ShapeLine(b, f"{len(o.get('steps') or [])} step(s), {o.get('tokens', 0)} tokens: "
                       + _snip(o.get("response")), "done") for b, o in outputs.items()]
    lines += [ShapeLine(str(b), "failed", "failed") for b in view.get("failed_branches") or []]
    if view.get("reduce_completed"):
        lines.append(ShapeLine("reduce", _snip(view.get("reduce_output")), "done"))
    return Shape("Parallel: branches, then reduce", lines)


def _graph(view: Mapping[str, Any]) -> Shape:
    path = [str(n) for n in view.get("node_history") or []]
    counts = view.get("iteration_counts") or {}
    lines = [ShapeLine(node, f"visit {n}", "done")
             for node, n in _visits(path)]
    facts = [("path", " → ".join(path)), ("current node", str(view.get("current_node", "")))]
    facts += [(f"loops of {node}", str(n)) for node, n in counts.items() if int(n) > 1]
    return Shape("Graph: path taken", lines, facts)


def _visits(path: Sequence[str]) -> list[tuple[str, int]]:
    seen: dict[str, int] = {}
    out = []
    for node in path:
        seen[node] = seen.get(node, 0) + 1
        out.append((node, seen[node]))
    return out


def _routing(view: Mapping[str, Any]) -> Shape:
    lines = [ShapeLine("router", _snip(view.get("router_response")),
                       "done" if view.get("router_response") is not None else "pending")]
    lines += [ShapeLine(str(h.get("agent", "")), _snip(h.get("response")), "done")
              for h in view.get("step_history") or []]
    return Shape("Routing: the router's choice", lines,
                 [("chosen route", str(view.get("router_choice") or "not yet")),
                  ("router attempts", str(view.get("router_attempts", 0)))])


def _evaluator(view: Mapping[str, Any]) -> Shape:
    lines = [ShapeLine(f"iteration {it.get('iteration')}", f"score {it.get('score')}: "
                       + _snip(it.get("feedback")), "done")
             for it in view.get("iterations") or []]
    return Shape("Evaluator-optimizer: drafts and scores", lines,
                 [("final score", str(view.get("final_score"))),
                  ("accepted", "yes" if view.get("accepted") else "no")])


def _orchestrator(view: Mapping[str, Any]) -> Shape:
    lines = []
    for r in view.get("rounds") or []:
        tasks = r.get("tasks") or []
        done = sum(1 for w in r.get("worker_outputs") or [] if w is not None)
        lines.append(ShapeLine(f"round {r.get('round')}", f"{done}/{len(tasks)} worker "
                               "task(s) done", "done" if done == len(tasks) else "pending"))
    return Shape("Orchestrator-workers: rounds", lines,
                 [("decision", str(view.get("orchestrator_decision", ""))),
                  ("reduce", "done" if view.get("reduce_completed") else "not yet"),
                  ("writeup", "done" if view.get("writeup_completed") else "not yet")])


SHAPES = {"chain": _chain, "workflow": _workflow, "parallel": _parallel, "graph": _graph,
          "routing": _routing, "evaluator_optimizer": _evaluator,
          "orchestrator_workers": _orchestrator}


def shape(pattern_type: str, view: Mapping[str, Any]) -> Shape:
    """The pattern's shape; an unknown pattern shows its state's keys, nothing worse."""
    draw = SHAPES.get(pattern_type)
    if draw is None:
        return Shape(f"{pattern_type}", [ShapeLine(str(k), _snip(v)) for k, v in view.items()])
    try:
        return draw(view)
    except (AttributeError, TypeError, ValueError):
        # A state written by an older version: show it rather than fail the page.
        return Shape(f"{pattern_type} (raw state)",
                     [ShapeLine(str(k), _snip(v)) for k, v in view.items()])
