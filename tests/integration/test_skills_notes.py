"""Skills and notes on a real redis-server with a real (in-process) worker: a scripted
agent calls `Skill` and gets the skill's text from the spec, a second call of the same
skill is told it is loaded, and the notes file is written with the artifacts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for

from strands_durable.models import SessionStatus
from strands_durable.sessions.history import event_docs
from strands_durable.sessions.start import start_session
from strands_durable.spec.loader import load_spec_file
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

SPEC = Path(__file__).resolve().parents[1] / "fixtures" / "skills" / "skills-notes.yaml"


async def ended(store: Store, sid: str) -> bool:
    return (await store.get_session(sid)).status != SessionStatus.RUNNING


def tool_results(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(block["toolResult"]["status"], block["toolResult"]["content"][0]["text"])
            for message in messages for block in message["content"] if "toolResult" in block]


async def test_a_scripted_agent_loads_skills_through_the_skill_tool(
        store: Store, consumer: StepConsumer) -> None:
    sid, _ = await start_session(store, load_spec_file(SPEC))
    await wait_for(lambda: ended(store, sid), timeout_s=60, what="the session to end")
    record = await store.get_session(sid)
    assert record.status == SessionStatus.COMPLETED, record.error

    results = tool_results(await store.conversation(sid, "writer"))
    assert [status for status, _ in results] == ["success"] * 3
    skill, module, again = (text for _, text in results)
    assert skill.startswith("# Loaded Skill: style-guide\n\n**Description**: House style")
    assert "Never use the word \"synergy\"." in skill
    assert module.startswith("# Loaded Skill Module: style-guide/headlines\n\n---\n\n")
    assert "at most eight words" in module
    assert again == "Skill 'style-guide' is already loaded. No need to reload it."
    calls = [d for d in event_docs(await store.events(sid))
             if d["type"] == "tool_call_completed"]
    assert [(d["tool"], d["outcome"]) for d in calls] == [("Skill", "ok")] * 3

    artifacts = await store.artifacts(sid)
    assert sorted(artifacts) == ["artifacts/run_notes.md", "headline.md"]
    notes = artifacts["artifacts/run_notes.md"]
    assert [line.split("— Agent: ")[1] for line in notes.splitlines()
            if line.startswith("## [")] == ["researcher (Step 1)", "writer (Step 2)",
                                            "editor (Step 3)"]
    assert "- **Outcome**: Durable agents survive crashes" in notes
