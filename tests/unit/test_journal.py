"""The turn journal on a real Strands agent (in memory: the fenced Redis write is tested in
tests/integration/test_tool_turns.py): each model turn and tool result is journaled as
it happens; a re-run replays the journaled part without calling the model or the tool;
a lost lease stops everything."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncGenerator, Sequence
from typing import Any

import pytest
from strands import tool
from strands.models.model import Model
from strands.types.tools import AgentTool

from strands_durable.models import Event, EventType, StepJob
from strands_durable.spec.script import ScriptConfig
from strands_durable.worker.agent_call import AgentReply, call_agent
from strands_durable.worker.journal import (
    JournaledModel,
    JournalLost,
    StepJournal,
    decode_tool_result,
    encode_tool_result,
    merge_deltas,
)
from strands_durable.worker.providers.scripted import ScriptedModel
from strands_durable.worker.tools.context import current_tool_call
from strands_durable.worker.tools.durable_tool import JournaledTool

JOB = StepJob(session_id="s-1", key="step:0", agent="clerk", input="count to three")
SCRIPT = ScriptConfig.model_validate({"rules": [
    {"agent": "clerk", "turn": 1, "tool_calls": [{"name": "bump", "input": {"n": 1}}]},
    {"agent": "clerk", "turn": 2, "tool_calls": [{"name": "bump", "input": {"n": 2}},
                                                 {"name": "bump", "input": {"n": 3}}]},
    {"agent": "clerk", "turn": 3, "reply": "counted"},
]})


class CountingModel(ScriptedModel):
    calls = 0

    async def stream(self, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        CountingModel.calls += 1
        async for event in super().stream(*args, **kwargs):
            yield event


class Recorder:
    """The journal's store: fields and events, and a lease that can be taken away."""

    def __init__(self, lose_at: str | None = None) -> None:
        self.fields: dict[str, str] = {}
        self.events: list[Event] = []
        self.lose_at = lose_at
        self.lost = False

    async def write(self, name: str, value: str, events: Sequence[Event]) -> bool:
        if self.lost or name == self.lose_at:
            self.lost = True
            return False
        if name:
            self.fields[name] = value
        self.events += events
        return True


ran: list[tuple[int, str | None]] = []


@tool
def bump(n: int) -> int:
    """Add one."""
    call = current_tool_call()
    ran.append((n, call.idempotency_key if call else None))
    return n + 1


answer_slow = threading.Event()  # set by the test once the timeout has been seen


@tool
def slow(n: int) -> int:
    """Never answers in time: it waits until the test lets it go."""
    answer_slow.wait(timeout=60)
    return n


async def run_step(recorder: Recorder, entries: dict[str, str] | None = None,
                   tools: list[AgentTool] | None = None,
                   timeout_s: float = 10.0) -> tuple[AgentReply, StepJournal]:
    journal = StepJournal(step=JOB.key, entries=dict(entries or {}), write=recorder.write)
    model: Model = JournaledModel(CountingModel("clerk", SCRIPT), journal)
    wrapped = [JournaledTool(t, journal, JOB, "w-1", timeout_s, after_result=lambda: None)
               for t in (tools or [bump])]
    reply = await call_agent(model, system_prompt="count", history=[], prompt=JOB.input,
                             tools=wrapped, before_attempt=journal.restart)  # type: ignore[arg-type]
    return reply, journal


@pytest.fixture(autouse=True)
def reset() -> None:
    ran.clear()
    CountingModel.calls = 0


async def test_every_turn_and_tool_result_is_journaled_with_stable_keys() -> None:
    recorder = Recorder()
    reply, _ = await run_step(recorder)
    assert reply.text == "counted"
    assert sorted(recorder.fields) == ["m1", "m2", "m3", "t1", "t2", "t3"]
    assert sorted(ran) == [(1, "s-1:step:0:1"), (2, "s-1:step:0:2"), (3, "s-1:step:0:3")]
    assert CountingModel.calls == 3
    started = [e for e in recorder.events if e.type == EventType.TOOL_CALL_STARTED]
    done = [e for e in recorder.events if e.type == EventType.TOOL_CALL_COMPLETED]
    assert [e.call for e in started] == [1, 2, 3] or sorted(e.call for e in started) == [1, 2, 3]
    assert {e.tool for e in done} == {"bump"} and {e.outcome for e in done} == {"ok"}
    assert all(e.duration_ms is not None and e.duration_ms >= 0 for e in done)


@pytest.mark.parametrize("cut", [["m1"], ["m1", "t1"], ["m1", "t1", "m2", "t2"],
                                 ["m1", "t1", "m2", "t2", "t3", "m3"]])
async def test_a_rerun_replays_the_journal_and_goes_live_after_it(cut: list[str]) -> None:
    full = Recorder()
    reference, _ = await run_step(full)
    ran.clear()
    CountingModel.calls = 0

    partial = {name: full.fields[name] for name in cut}
    again = Recorder()
    reply, journal = await run_step(again, partial)
    assert reply.text == reference.text and reply.messages == reference.messages
    assert (reply.input_tokens, reply.output_tokens) == (reference.input_tokens,
                                                         reference.output_tokens)
    model_turns = sum(name.startswith("m") for name in cut)
    tool_results = sum(name.startswith("t") for name in cut)
    assert CountingModel.calls == 3 - model_turns
    assert len(ran) == 3 - tool_results
    assert journal.replayed_turns == model_turns and journal.replayed_tools == tool_results
    assert set(again.fields) == set(full.fields) - set(cut)  # only the live part written


async def test_a_lost_lease_stops_tools_and_the_next_model_call() -> None:
    recorder = Recorder(lose_at="t1")
    with pytest.raises(JournalLost):
        await run_step(recorder)
    assert [n for n, _ in ran] == [1]  # the call that lost the lease ran; nothing after it
    assert CountingModel.calls == 1


async def test_a_tool_that_raises_or_times_out_is_an_error_the_model_sees() -> None:
    @tool
    def bump(n: int) -> int:  # the same name, failing
        """Fails."""
        raise RuntimeError("no bumping today")

    recorder = Recorder()
    reply, _ = await run_step(recorder, tools=[bump])
    assert reply.text == "counted"
    results = [json.loads(v) for k, v in recorder.fields.items() if k.startswith("t")]
    assert {r["status"] for r in results} == {"error"}
    assert "no bumping today" in results[0]["content"][0]["text"]
    done = [e for e in recorder.events if e.type == EventType.TOOL_CALL_COMPLETED]
    assert {e.outcome for e in done} == {"error"}


async def test_a_tool_past_its_timeout_is_a_timeout_error() -> None:
    script_slow = ScriptConfig.model_validate({"rules": [
        {"turn": 1, "tool_calls": [{"name": "slow", "input": {"n": 1}}]},
        {"turn": 2, "reply": "gave up"}]})
    recorder = Recorder()
    journal = StepJournal(step=JOB.key, entries={}, write=recorder.write)
    model = JournaledModel(ScriptedModel("clerk", script_slow), journal)
    wrapped = JournaledTool(slow, journal, JOB, "w-1", 0.05, after_result=lambda: None)
    answer_slow.clear()
    try:
        reply = await call_agent(model, system_prompt=None, history=[], prompt="go",
                                 tools=[wrapped])
    finally:
        answer_slow.set()  # the abandoned tool thread may end now
    assert reply.text == "gave up"
    result = json.loads(recorder.fields["t1"])
    assert result["status"] == "error" and "timed out after 0.05s" in result["content"][0]["text"]
    done = [e for e in recorder.events if e.type == EventType.TOOL_CALL_COMPLETED]
    assert [e.outcome for e in done] == ["timeout"]


def test_text_and_tool_input_deltas_are_merged() -> None:
    events: list[Any] = [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockDelta": {"delta": {"text": "Hel"}}},
        {"contentBlockDelta": {"delta": {"text": "lo"}}},
        {"contentBlockStop": {}},
        {"contentBlockStart": {"start": {"toolUse": {"toolUseId": "a", "name": "x"}}}},
        {"contentBlockDelta": {"delta": {"toolUse": {"input": '{"n"'}}}},
        {"contentBlockDelta": {"delta": {"toolUse": {"input": ": 1}"}}}},
        {"contentBlockStop": {}},
        {"messageStop": {"stopReason": "tool_use"}},
    ]
    merged = merge_deltas(events)
    assert merged[1] == {"contentBlockDelta": {"delta": {"text": "Hello"}}}
    assert merged[4] == {"contentBlockDelta": {"delta": {"toolUse": {"input": '{"n": 1}'}}}}
    assert len(merged) == 7


def test_tool_results_with_bytes_survive_the_journal() -> None:
    result: Any = {"toolUseId": "a", "status": "success",
                   "content": [{"image": {"format": "png", "source": {"bytes": b"\x89PNG"}}}]}
    assert decode_tool_result(encode_tool_result(result)) == result
