"""How the console draws each pattern's state: a title, one line per part done or
waiting, and a few facts, from the pattern's state view (`Planner.view`). Pure data:
no I/O, and no escaping here, since the console's templates (Jinja2) escape every field.

Each pattern's `PatternDefinition.shape` calls its drawer below; a state view missing
what a drawer expects (one written by an older version) raises AttributeError, TypeError
or ValueError, and the console then shows the raw state (`raw_shape`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SNIPPET = 160  # characters of a reply shown in a shape line (the full text is in results)


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


def snip(value: Any) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= SNIPPET else text[:SNIPPET] + "…"


def raw_shape(title: str, view: Mapping[str, Any]) -> Shape:
    """A state's keys and values as they are: an unknown pattern, an old state."""
    return Shape(title, [ShapeLine(str(k), snip(v)) for k, v in view.items()])


def chain(view: Mapping[str, Any]) -> Shape:
    lines = [ShapeLine(str(h.get("agent", "")), snip(h.get("response")), "done")
             for h in view.get("step_history") or []]
    return Shape("Chain: steps in order", lines,
                 [("current step", str(view.get("current_step", "")))])


def workflow(view: Mapping[str, Any]) -> Shape:
    outputs = view.get("task_outputs") or {}
    lines = [ShapeLine(t, "after " + ", ".join(outputs[t].get("dependencies") or []) + ": "
                       + snip(outputs[t].get("response")) if outputs[t].get("dependencies")
                       else snip(outputs[t].get("response")), "done")
             for t in view.get("completed_tasks") or []]
    lines += [ShapeLine(t, "ready", "pending") for t in view.get("pending_tasks") or []]
    lines += [ShapeLine(t, "waits for its dependencies", "blocked")
              for t in view.get("blocked_tasks") or []]
    return Shape("Workflow: task graph", lines)


def parallel(view: Mapping[str, Any]) -> Shape:
    outputs = view.get("branch_outputs") or {}
    lines = [ShapeLine(b, f"{len(o.get('steps') or [])} step(s), {o.get('tokens', 0)} tokens: "
                       + snip(o.get("response")), "done") for b, o in outputs.items()]
    lines += [ShapeLine(str(b), "failed", "failed") for b in view.get("failed_branches") or []]
    if view.get("reduce_completed"):
        lines.append(ShapeLine("reduce", snip(view.get("reduce_output")), "done"))
    return Shape("Parallel: branches, then reduce", lines)


def graph(view: Mapping[str, Any]) -> Shape:
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


def routing(view: Mapping[str, Any]) -> Shape:
    lines = [ShapeLine("router", snip(view.get("router_response")),
                       "done" if view.get("router_response") is not None else "pending")]
    lines += [ShapeLine(str(h.get("agent", "")), snip(h.get("response")), "done")
              for h in view.get("step_history") or []]
    return Shape("Routing: the router's choice", lines,
                 [("chosen route", str(view.get("router_choice") or "not yet")),
                  ("router attempts", str(view.get("router_attempts", 0)))])


def evaluator_optimizer(view: Mapping[str, Any]) -> Shape:
    lines = [ShapeLine(f"iteration {it.get('iteration')}", f"score {it.get('score')}: "
                       + snip(it.get("feedback")), "done")
             for it in view.get("iterations") or []]
    return Shape("Evaluator-optimizer: drafts and scores", lines,
                 [("final score", str(view.get("final_score"))),
                  ("accepted", "yes" if view.get("accepted") else "no")])


def orchestrator_workers(view: Mapping[str, Any]) -> Shape:
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
