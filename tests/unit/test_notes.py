"""context_policy.notes: strands-cli's notes file and its "# Previous Workflow Steps",
made from committed results alone (so a re-run sees the same notes)."""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest

from strands_durable.errors import SpecError
from strands_durable.models import SessionStatus, StepJob, StepResult
from strands_durable.patterns import Decision
from strands_durable.planning.advance import Snapshot, plan_commit
from strands_durable.planning.notes import (
    NOTE_INPUT,
    extract_last,
    notes_file,
    prompt_with_notes,
    with_notes,
)
from strands_durable.spec.loader import load_spec_data, load_spec_file

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "skills" / "skills-notes.yaml"


def chain(notes: dict[str, Any], steps: int = 3, **extra: Any) -> Any:
    return load_spec_data({
        "version": 0, "name": "n", "runtime": {"provider": "scripted"},
        "agents": {"a": {"prompt": "A.", "tools": ["calculator"]}, "b": {"prompt": "B."}},
        "tools": {"python": ["calculator"]},
        "context_policy": {"notes": notes},
        "pattern": {"type": "chain", "config": {"steps": [
            {"agent": "a" if i % 2 == 0 else "b", "input": f"input {i}"}
            for i in range(steps)]}},
        **extra}).spec


def result(key: str, agent: str, response: str, note_input: str = "in",
           at: str = "2026-11-25T08:00:01.234Z") -> StepResult:
    return StepResult(key=key, agent=agent, response=response, committed_at=at,
                      meta={NOTE_INPUT: note_input})


def test_markdown_notes_are_strands_clis_entries() -> None:
    spec = chain({"file": "notes.md"})
    text = notes_file(spec, spec.context_policy.notes, [
        result("step:0", "a", "x" * 250, "in " * 100), result("step:1", "b", "done")])
    assert text == (
        "## [2026-11-25T08:00:01Z] — Agent: a (Step 1)\n"
        f"- **Input**: {('in ' * 100)[:200]}...\n"
        "- **Tools used**: calculator\n"
        f"- **Outcome**: {'x' * 200}...\n\n"
        "## [2026-11-25T08:00:01Z] — Agent: b (Step 2)\n"
        "- **Input**: in\n"
        "- **Tools used**: None\n"
        "- **Outcome**: done\n\n")


def test_json_notes_are_strands_clis_lines() -> None:
    spec = chain({"file": "notes.json", "format": "json"})
    text = notes_file(spec, spec.context_policy.notes, [result("step:0", "a", "ok")])
    assert json.loads(text) == {"timestamp": "2026-11-25T08:00:01Z", "agent": "a",
                                "step": 1, "input": "in", "tools_used": ["calculator"],
                                "outcome": "ok"}
    assert text.endswith("}\n\n")


def test_the_last_n_entries_are_cut_as_strands_cli_cuts_them() -> None:
    content = "## one\n- a\n\n## two\n- b\n\n## three\n- c\n\n"
    assert extract_last(content, 2) == "## two\n- b\n\n## three\n- c"
    assert extract_last(content, 0) == ""
    assert extract_last(content, 9) == "## one\n- a\n\n## two\n- b\n\n## three\n- c"
    # JSON lines hold no '##': strands-cli's cut hands the whole file over as one entry.
    assert extract_last('{"a": 1}\n\n{"b": 2}\n\n', 1) == '## {"a": 1}\n\n{"b": 2}'


def test_the_next_jobs_prompt_holds_the_notes_of_every_committed_step() -> None:
    spec = chain({"file": "notes.md", "include_last": 2})
    results = OrderedDict((r.key, r) for r in [result("step:0", "a", "first", "input 0")])
    job = StepJob(session_id="s", key="step:1", agent="b", input="input 1")
    snapshot = Snapshot(spec=spec, fields={"state": json.dumps({"index": 1})},
                        results=results, session_id="s")
    done = StepResult(key="step:1", agent="b", response="second", meta={},
                      committed_at="2026-11-25T08:00:02.000Z")
    request = plan_commit(snapshot, job, done, entry_id="1-0", consumer="w")
    (next_job,) = request.next_jobs
    assert next_job.key == "step:2"
    assert next_job.system_prompt == (
        "A.\n\n\n# Previous Workflow Steps\n"
        "## [2026-11-25T08:00:01Z] — Agent: a (Step 1)\n- **Input**: input 0\n"
        "- **Tools used**: calculator\n- **Outcome**: first\n\n"
        "## [2026-11-25T08:00:02Z] — Agent: b (Step 2)\n- **Input**: input 1\n"
        "- **Tools used**: None\n- **Outcome**: second")
    # The step's input is kept with its result, for the notes of later steps.
    assert request.result.meta[NOTE_INPUT] == "input 1"
    # Planned again (a commit conflict, a re-run): the very same prompt.
    again = plan_commit(snapshot, job, done, entry_id="1-0", consumer="w")
    assert again.next_jobs[0].system_prompt == next_job.system_prompt


def test_include_last_bounds_the_notes() -> None:
    spec = chain({"file": "notes.md", "include_last": 1}, steps=4)
    results = [result(f"step:{i}", "a", f"r{i}", at=f"2026-11-25T08:00:0{i}.000Z")
               for i in range(3)]
    job = StepJob(session_id="s", key="step:2", agent="a", input="input 2")
    snapshot = Snapshot(spec=spec, fields={"state": json.dumps({"index": 2})},
                        results=OrderedDict((r.key, r) for r in results[:2]),
                        session_id="s")
    request = plan_commit(snapshot, job, results[2], entry_id="1-0", consumer="w")
    prompt = request.next_jobs[0].system_prompt
    assert prompt.count("## [") == 1 and "(Step 3)" in prompt


def test_no_notes_no_change() -> None:
    spec = chain({"file": "notes.md"}).model_copy(update={"context_policy": None})
    job = StepJob(session_id="s", key="step:0", agent="a", input="x")
    done = result("step:0", "a", "r")
    decision = Decision(state={}, schedule=(job,))
    assert with_notes(spec, {}, job, done, decision, {}) == (decision, {}, done)


def test_hitl_steps_leave_no_note() -> None:
    spec = chain({"file": "notes.md"})
    text = notes_file(spec, spec.context_policy.notes, [
        StepResult(key="step:0", agent="hitl", response="yes"), result("step:1", "b", "ok")])
    assert text.count("## [") == 1 and "(Step 1)" in text


def test_the_notes_file_is_an_artifact_when_the_session_completes() -> None:
    spec = chain({"file": "./artifacts/run notes.md"}, steps=1)
    job = StepJob(session_id="s", key="step:0", agent="a", input="input 0")
    snapshot = Snapshot(spec=spec, fields={"state": json.dumps({"index": 0})},
                        results=OrderedDict(), session_id="s")
    request = plan_commit(snapshot, job, result("step:0", "a", "r"), entry_id="1-0",
                          consumer="w")
    assert request.status == SessionStatus.COMPLETED
    assert list(request.artifacts) == ["artifacts/run_notes.md"]
    assert request.artifacts["artifacts/run_notes.md"].startswith("## [")


def test_the_prompt_with_notes_is_strands_clis_section() -> None:
    assert prompt_with_notes("P", "") == "P"
    assert prompt_with_notes("P", "## n") == "P\n\n\n# Previous Workflow Steps\n## n"


@pytest.mark.parametrize("path", ["/tmp/notes.md", "../notes.md", "a/../../notes.md", " ",
                                  "a\nb.md", ".", "./", "./."])
def test_a_notes_file_outside_the_output_dir_is_refused(path: str) -> None:
    with pytest.raises(SpecError) as err:
        chain({"file": path})
    assert err.value.path == "context_policy.notes.file"


def test_the_fixture_spec_loads_with_its_notes() -> None:
    spec = load_spec_file(FIXTURE).spec
    assert spec.context_policy is not None and spec.context_policy.notes is not None
    assert spec.context_policy.notes.include_last == 2
