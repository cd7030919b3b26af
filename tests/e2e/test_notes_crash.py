"""context_policy.notes across a crash, with real `arq worker` processes: the worker
running step 3 dies after its model call; the worker that re-runs the step sends the
model the very same system prompt, holding the notes of steps 1 and 2 (and not 3's)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for_sync
from helpers.fleet import Fleet
from tool_llm import ToolLLM, serve, stop

pytestmark = pytest.mark.e2e

SPEC = """
version: 0
name: noted
runtime: {provider: openai, model_id: gpt-4o, host: HOST}
context_policy:
  notes: {file: notes.md, include_last: 5}
agents:
  researcher: {prompt: "You research."}
  analyst: {prompt: "You analyse."}
  writer: {prompt: "You write."}
pattern:
  type: chain
  config:
    steps:
      - {agent: researcher, input: "facts about tides"}
      - {agent: analyst, input: "analyse {{ steps[0].response }}"}
      - {agent: writer, input: "write up {{ steps[1].response }}"}
"""


@pytest.fixture
def llm(allow_provider_host: Callable[[str, str], None]) -> Iterator[ToolLLM]:
    state = ToolLLM(calls=0)  # no tools: every request is answered with a reply
    server, thread = serve(state)
    allow_provider_host("openai", state.url("/v1"))  # before any worker or CLI starts
    yield state
    stop(server, thread)


def system_text(request: dict[str, Any]) -> str:
    return json.dumps([m["content"] for m in request["messages"] if m["role"] == "system"])


def test_a_rerun_after_a_crash_sees_the_same_notes(
        llm: ToolLLM, fleet_factory: Callable[..., Fleet], tmp_path: Path) -> None:
    spec = tmp_path / "noted.yaml"
    spec.write_text(SPEC.replace("HOST", llm.url("/v1")))
    # The first worker commits steps 1 and 2, then dies holding step 3 (before its commit).
    fleet = fleet_factory(claim_idle_ms=800, crash_at="before_commit:3")
    fleet.env["OPENAI_API_KEY"] = "test"
    crashing = fleet.start_worker()
    sid = fleet.cli("submit", str(spec)).stdout.strip()
    assert crashing.wait(timeout=120) != 0
    del fleet.env["DURABLE_CRASH_AT"]
    fleet.start_worker()
    wait_for_sync(lambda: fleet.cli_json("status", sid)["status"] == "completed",
                  timeout_s=120, what="the session to complete")

    prompts = [system_text(r) for r in llm.requests]
    assert len(prompts) == 4  # steps 1, 2, 3, and 3 again on the healthy worker
    assert "Previous Workflow Steps" not in prompts[0]
    assert "researcher (Step 1)" in prompts[1] and "(Step 2)" not in prompts[1]
    first, rerun = prompts[2], prompts[3]
    assert first == rerun
    assert "researcher (Step 1)" in first and "analyst (Step 2)" in first
    assert "(Step 3)" not in first
    assert "- **Input**: analyse bumped 0 times" in first
