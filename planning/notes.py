"""`context_policy.notes`, as strands-cli keeps them, made a function of committed results.

strands-cli appends one note per agent invocation to its notes file (exec/hooks.py
`NotesAppenderHook`: time, agent, step number, input, the agent's tools, outcome, in
markdown or JSON; tools/notes_manager.py) and injects the file's last `include_last`
entries into the next agents' system prompts under "# Previous Workflow Steps".

Here a step's note is made from its committed result (its commit time, agent, place in
commit order, its input kept in the result's meta, its reply), so the notes a step sees
are exactly those of the results committed before it was scheduled: the planner puts
them into the job's prompt (worker/system_prompt.py keeps them right after the agent's
prompt, where strands-cli puts them), and a re-run of the job after a crash sees the
same text. The notes file is written with the artifacts when the session completes
(an `outputs.artifacts` entry of the same path wins, as strands-cli writes that last).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import replace

from strands_durable.models import SessionStatus, StepJob, StepKind, StepResult
from strands_durable.patterns import Decision, pattern_for
from strands_durable.patterns.base import HITL_AGENT
from strands_durable.planning.artifacts import artifact_name
from strands_durable.settings import current_limits
from strands_durable.spec.model import Spec
from strands_durable.spec.sections import Notes

__all__ = ["NOTE_INPUT", "extract_last", "notes_file", "prompt_with_notes", "with_notes"]

NOTE_INPUT = "note_input"  # a result's meta: the step's input, as the note quotes it
SUMMARY_CHARS = 500  # strands-cli's hook keeps this much of the input and the outcome
SHOWN_CHARS = 200  # and its markdown note this much


def with_notes(spec: Spec, results: Mapping[str, StepResult], job: StepJob,
               result: StepResult, decision: Decision, artifacts: dict[str, str]
               ) -> tuple[Decision, dict[str, str], StepResult]:
    """The commit's decision with the notes in its agent jobs' prompts, its artifacts
    with the notes file (on completion), and the result with its input kept for its
    own note. Unchanged when the spec keeps no notes."""
    notes = spec.context_policy.notes if spec.context_policy else None
    if notes is None:
        return decision, artifacts, result
    if result.agent != HITL_AGENT and job.kind == StepKind.AGENT:
        result = replace(result, meta={**result.meta, NOTE_INPUT: job.input[:SUMMARY_CHARS]})
    text = notes_file(spec, notes, [*results.values(), result])
    injected = extract_last(text, notes.include_last)
    schedule = tuple(
        replace(j, system_prompt=prompt_with_notes(j.system_prompt, injected))
        if j.kind == StepKind.AGENT and j.agent in spec.agents else j
        for j in decision.schedule)
    if decision.status == SessionStatus.COMPLETED:
        name = artifact_name(notes.file.strip())
        artifacts = {name: _bounded(text), **artifacts}
    return replace(decision, schedule=schedule), artifacts, result


def prompt_with_notes(prompt: str, injected: str) -> str:
    """The agent's prompt and strands-cli's notes section, as build_system_prompt joins
    its sections ("\\n\\n")."""
    return f"{prompt}\n\n\n# Previous Workflow Steps\n{injected}" if injected else prompt


def notes_file(spec: Spec, notes: Notes, results: Iterable[StepResult]) -> str:
    """The notes file strands-cli would have written for these results (each entry
    followed by a blank line)."""
    entries = []
    step = 0
    for result in results:
        if result.agent == HITL_AGENT or result.agent not in spec.agents:
            continue
        step += 1
        entries.append(_entry(spec, notes, result, step) + "\n\n")
    return "".join(entries)


def _entry(spec: Spec, notes: Notes, result: StepResult, step: int) -> str:
    timestamp = result.committed_at[:19] + "Z" if result.committed_at else ""
    summary = str(result.meta.get(NOTE_INPUT, "No input"))
    outcome = result.response[:SUMMARY_CHARS] or "No output"
    tools = _tools(spec, result.agent)
    if notes.format == "json":
        return json.dumps({"timestamp": timestamp, "agent": result.agent, "step": step,
                           "input": summary, "tools_used": tools or [],
                           "outcome": outcome})
    return (f"## [{timestamp}] — Agent: {result.agent} (Step {step})\n"
            f"- **Input**: {_shown(summary)}\n"
            f"- **Tools used**: {', '.join(tools) if tools else 'None'}\n"
            f"- **Outcome**: {_shown(outcome)}")


def _tools(spec: Spec, agent: str) -> list[str] | None:
    # strands-cli's hook names the agent's configured list where the pattern says so.
    if not pattern_for(spec.pattern.type).notes_name_tools:
        return None
    return spec.agents[agent].tools or None


def _shown(text: str) -> str:
    return text[:SHOWN_CHARS] + "..." if len(text) > SHOWN_CHARS else text


def extract_last(content: str, n: int) -> str:
    """strands-cli's `_extract_last_n_entries`: the file split at every '##', the last
    `n` non-empty parts, each given back its '## '."""
    if n <= 0:
        return ""
    entries = [entry.strip() for entry in content.split("##") if entry.strip()]
    return "\n\n".join(f"## {entry}" for entry in entries[-n:])


def _bounded(text: str) -> str:
    """The notes file within the artifact limit: its oldest entries go first."""
    limit = current_limits().max_artifact_bytes
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    tail = data[-limit:].decode("utf-8", errors="ignore")
    start = tail.find("\n\n")
    return tail[start + 2:] if start >= 0 else tail
