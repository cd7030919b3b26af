"""orchestrator_workers' step keys, its words with its orchestrator (strands-cli's
prompts, our multi-round prompt, how a reply is read as a task list) and the context
its synthesis steps render in. See orchestrator_workers.py for the behaviours matched."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from strands_durable.models import StepResult
from strands_durable.patterns.base import PlanContext
from strands_durable.patterns.json_reply import extract_json
from strands_durable.patterns.state import OrchestratorWorkersState, RoundRecord

__all__ = [
    "REDUCE_KEY",
    "REDUCE_REVIEW_KEY",
    "WRITEUP_KEY",
    "decomposition_review_key",
    "next_round_prompt",
    "orchestrate_key",
    "orchestrator_prompt",
    "parse_tasks",
    "retry_prompt",
    "round_workers",
    "synthesis_context",
    "worker_key",
]

DONE_WORDS = frozenset({"complete", "completed", "done"})
REDUCE_KEY = "reduce"
WRITEUP_KEY = "writeup"
REDUCE_REVIEW_KEY = "review:reduce"


def orchestrate_key(round_: int, attempt: int = 0) -> str:
    return f"orchestrate:{round_}" if attempt == 0 else f"orchestrate:{round_}:retry:{attempt}"


def worker_key(round_: int, index: int) -> str:
    return f"worker:{round_}:{index}"


def decomposition_review_key(round_: int) -> str:
    return f"review:decomposition:{round_}"


def _task_text(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        task = item.get("task", item)
        return task if isinstance(task, str) else str(task)
    return str(item)


def parse_tasks(reply: str) -> list[str]:
    """The task texts an orchestrator reply asks for ([] = done); ValueError if none."""
    word = reply.strip().strip("`'\".!").strip().lower()
    if word in DONE_WORDS:
        return []
    data = extract_json(reply, kind=(list, dict))
    if isinstance(data, dict):
        for name in ("tasks", "subtasks"):
            if isinstance(data.get(name), list):
                data = data[name]
                break
        else:
            data = [data]
    return [_task_text(item) for item in data]


def orchestrator_prompt(variables: Mapping[str, Any]) -> str:
    """strands-cli's round-1 decomposition prompt, verbatim."""
    return f"""You are an orchestrator agent. Break down the following task into subtasks for worker agents to execute.

Respond with ONLY a JSON array of tasks. Each task should have a "task" field with the description.

Example format:
[
  {{"task": "Subtask 1 description"}},
  {{"task": "Subtask 2 description"}},
  {{"task": "Subtask 3 description"}}
]

If there are no subtasks needed, return an empty array: []

User input variables:
{json.dumps(dict(variables), indent=2, default=str)}

Now break down the task into subtasks:"""  # noqa: E501


def retry_prompt(reply: str) -> str:
    """strands-cli's clarification after a reply that does not parse."""
    return f"""Your previous response was not valid JSON. Please respond with ONLY a JSON array of tasks.

Expected format:
[
  {{"task": "description of subtask 1"}},
  {{"task": "description of subtask 2"}}
]

Do not include any text before or after the JSON array. If there are no subtasks, return an empty array: []

Previous response that failed to parse:
{reply[:500]}
"""  # noqa: E501


def next_round_prompt(round_: int, max_rounds: int, workers: list[dict[str, Any]]) -> str:
    """Our multi-round extension: what the orchestrator sees before round > 1."""
    lines = [f"Round {round_ - 1} is finished. Results of its workers:", ""]
    for worker in workers:
        lines += [f"Worker {worker['index']} (task: {worker['task']}):", worker["response"], ""]
    lines += [
        f"This is round {round_} of at most {max_rounds}. If more work is needed, respond "
        'with ONLY a JSON array of new tasks, each with a "task" field, as before. If the '
        "work is complete, respond with an empty array: []",
    ]
    return "\n".join(lines)


def round_workers(results: Mapping[str, StepResult], round_: int, tasks: list[str]
                  ) -> list[dict[str, Any] | None]:
    """strands-cli's worker records for one round (None where not completed yet)."""
    records: list[dict[str, Any] | None] = []
    for i, task in enumerate(tasks):
        result = results.get(worker_key(round_, i))
        records.append(None if result is None else {
            "response": result.response, "status": "success", "tokens": result.tokens,
            "task": task, "round": round_, "index": i})
    return records


def _all_workers(results: Mapping[str, StepResult], rounds: list[RoundRecord]
                 ) -> list[dict[str, Any]]:
    workers = []
    for entry in rounds:
        workers += [w for w in round_workers(results, entry.round, entry.tasks)
                    if w is not None]
    return workers


def _latest_hitl(results: Mapping[str, StepResult]) -> str | None:
    latest = None
    for result in results.values():
        if result.key.startswith("review:"):
            latest = result.response
    return latest


def synthesis_context(ctx: PlanContext, state: OrchestratorWorkersState,
                      results: Mapping[str, StepResult]) -> dict[str, Any]:
    rounds = state.rounds
    workers = _all_workers(results, rounds)
    context: dict[str, Any] = {
        "workers": workers, "num_workers": len(workers), "worker_count": len(workers),
        "round_count": state.current_round,
        "tasks": [w["task"] for w in workers],
        "rounds": [{"round": r.round, "tasks": list(r.tasks),
                    "workers": round_workers(results, r.round, r.tasks)}
                   for r in rounds],
        **ctx.variables,
        "last_response": workers[-1]["response"] if workers else "",
    }
    hitl = _latest_hitl(results)
    if hitl is not None:
        context["hitl_response"] = hitl
    if REDUCE_KEY in results:
        context["reduce_response"] = context["last_response"] = results[REDUCE_KEY].response
    if WRITEUP_KEY in results:
        context["writeup_response"] = context["last_response"] = results[WRITEUP_KEY].response
    return context
