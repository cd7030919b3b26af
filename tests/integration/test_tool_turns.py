"""Tool turns on a real redis-server: the journal write is fenced by the step's lease, the
gate hands a re-run its journal, the commit drops it, delete removes it; an in-process
worker runs agents with tools through the real provider classes (OpenAI and Ollama
wire APIs, faked locally), and tool events reach the session's history."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import claimed_job, wait_for
from tool_llm import COMPLETION_TOKENS, PROMPT_TOKENS, ToolLLM, serve, stop

from strands_durable.models import Event, EventType, SessionStatus, now_iso
from strands_durable.sessions.history import event_docs
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_data
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

TOOL = "tests.tool_fixtures.counting_tools.bump"


def scripted_spec(**extra: Any) -> dict[str, Any]:
    return {"version": 0, "name": "j", "runtime": {"provider": "scripted"},
            "agents": {"a": {"prompt": "A."}},
            "pattern": {"type": "chain", "config": {"steps": [{"agent": "a", "input": "x"}]}},
            **extra}


async def test_only_the_lease_holder_journals_and_the_gate_returns_it(store: Store) -> None:
    sid, _ = await start_session(store, load_spec_data(scripted_spec()))
    job, entry_id = await claimed_job(store, sid, "owner")
    event = Event(EventType.TOOL_CALL_COMPLETED, step=job.key, at=now_iso(), tool="bump",
                  call=1, outcome="ok", duration_ms=1.5)
    assert not await store.journal(job, entry_id, "zombie", "m1", "[]", [event])
    assert await store.redis.exists(store.keys.journal(sid, job.key)) == 0
    assert await store.journal(job, entry_id, "owner", "m1", "[1]")
    assert await store.journal(job, entry_id, "owner", "t1", '{"status":"success"}', [event])
    assert await store.journal(job, entry_id, "owner", "", "", [event])  # events only
    docs = event_docs(await store.events(sid))
    tool_docs = [d for d in docs if d["type"] == "tool_call_completed"]
    assert len(tool_docs) == 2
    assert tool_docs[0] | {"id": "", "at": ""} == {
        "id": "", "type": "tool_call_completed", "step": job.key, "attempt": 0, "worker": "",
        "at": "", "tool": "bump", "call": 1, "outcome": "ok", "duration_ms": 1.5}

    gate = await store.gate(job, entry_id, "owner", 0,
                            Event(EventType.STEP_STARTED, step=job.key, at=now_iso()))
    assert gate.verdict == "run"
    assert gate.journal == {"m1": "[1]", "t1": '{"status":"success"}'}
    assert await store.redis.smembers(store.keys.journals(sid)) == {job.key}


async def test_delete_removes_every_journal(store: Store) -> None:
    sid, _ = await start_session(store, load_spec_data(scripted_spec()))
    job, entry_id = await claimed_job(store, sid, "owner")
    assert await store.journal(job, entry_id, "owner", "m1", "[1]")
    await store.delete_session(sid)
    assert await store.redis.exists(store.keys.journal(sid, job.key),
                                    store.keys.journals(sid)) == 0


# -- whole sessions: the in-process worker ------------------------------------------
@pytest.fixture
def llm(allow_provider_host: Callable[[str, str], None]) -> Iterator[ToolLLM]:
    state = ToolLLM(calls=2)
    server, thread = serve(state)
    allow_provider_host("openai", state.url("/v1"))
    allow_provider_host("ollama", state.url())
    yield state
    stop(server, thread)


async def ended(store: Store, sid: str) -> bool:
    return (await store.get_session(sid)).status != SessionStatus.RUNNING


@pytest.mark.parametrize("provider", ["openai", "ollama"])
async def test_a_real_provider_class_drives_the_tool_loop(
        provider: str, llm: ToolLLM, tool_log: Path, store: Store,
        consumer: StepConsumer) -> None:
    host = llm.url("/v1") if provider == "openai" else llm.url()
    model_id = "gpt-4o" if provider == "openai" else "llama3"
    data = scripted_spec(tools={"python": [TOOL]})
    data["runtime"] = {"provider": provider, "host": host, "model_id": model_id}
    data["agents"]["a"]["tools"] = [TOOL]
    sid, _ = await start_session(store, load_spec_data(data))
    await wait_for(lambda: ended(store, sid), timeout_s=60, what="the session to end")
    record = await store.get_session(sid)
    assert record.status == SessionStatus.COMPLETED, record.error
    (result,) = await store.results(sid, 0)
    assert result.response == "bumped 2 times"
    assert (result.input_tokens, result.output_tokens) == (3 * PROMPT_TOKENS,
                                                           3 * COMPLETION_TOKENS)
    assert len(llm.requests) == 3
    # The model got its tool's spec, and each tool result went back to it.
    tools_sent = llm.requests[0]["tools"]
    names = [t["function"]["name"] for t in tools_sent]
    assert names == ["bump"]
    tool_messages = [m for m in llm.requests[2]["messages"] if m["role"] == "tool"]
    assert [str(m["content"]) for m in tool_messages][-1].find("3") >= 0
    calls = [json.loads(line) for line in tool_log.read_text().splitlines()]
    assert [c["n"] for c in calls] == [1, 2]
    assert [c["key"] for c in calls] == [f"{sid}:step:0:1", f"{sid}:step:0:2"]
    kinds = [d for d in event_docs(await store.events(sid)) if d["type"].startswith("tool_")]
    assert [(d["type"], d["call"]) for d in kinds] == [
        ("tool_call_started", 1), ("tool_call_completed", 1),
        ("tool_call_started", 2), ("tool_call_completed", 2)]
    assert await store.redis.exists(store.keys.journal(sid, "step:0")) == 0
    # The conversation holds the tool turns, for the agent's next step.
    roles = [m["role"] for m in await store.conversation(sid, "a", 100)]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant"]


async def test_the_offline_example_calls_the_native_tools(store: Store,
                                                          consumer: StepConsumer) -> None:
    from helpers import EXAMPLES

    from strands_durable.spec.loader import load_spec_file

    sid, _ = await start_session(store, load_spec_file(EXAMPLES / "chain-calculator-tools.yaml"))
    await wait_for(lambda: ended(store, sid), timeout_s=60, what="the session to end")
    assert (await store.get_session(sid)).status == SessionStatus.COMPLETED
    done = [d for d in event_docs(await store.events(sid)) if d["type"] == "tool_call_completed"]
    assert [(d["tool"], d["call"], d["outcome"]) for d in done] == [
        ("calculator", 1, "ok"), ("current_time", 2, "ok")]
    messages = await store.conversation(sid, "accountant", 100)
    results = [block["toolResult"] for m in messages for block in m["content"]
               if "toolResult" in block]
    assert "499.8" in json.dumps(results[0]) and results[0]["status"] == "success"


async def test_a_window_never_opens_on_tool_results_cut_from_their_tool_use(
        store: Store) -> None:
    sid, _ = await start_session(store, load_spec_data(scripted_spec()))
    turns = [{"role": "user", "content": [{"text": "go"}]},
             {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t", "name": "bump",
                                                            "input": {}}}]},
             {"role": "user", "content": [{"toolResult": {"toolUseId": "t", "status": "success",
                                                          "content": [{"text": "2"}]}}]},
             {"role": "assistant", "content": [{"text": "done"}]},
             {"role": "user", "content": [{"text": "again"}]},
             {"role": "assistant", "content": [{"text": "ok"}]}]
    await store.redis.rpush(store.keys.conversation(sid, "a"), *map(json.dumps, turns))
    assert await store.conversation(sid, "a", 6) == turns
    assert await store.conversation(sid, "a", 4) == turns[4:]  # not from the tool result
    assert await store.conversation(sid, "a", 5) == turns[4:]


async def test_a_model_that_calls_a_tool_forever_fails_its_step_at_the_limit(
        settings: DurableSettings, store: Store) -> None:
    """A script rule (as a model might) asks for the calculator at every turn: the step
    fails once DURABLE_MAX_MODEL_TURNS is past, naming it, and is not retried; before, it
    ran until Python's recursion limit, three attempts of it."""
    data = scripted_spec(tools={"python": ["calculator"]})
    data["agents"]["a"]["tools"] = ["calculator"]
    data["runtime"]["script"] = {"rules": [
        {"agent": "a", "tool_calls": [{"name": "calculator", "input": {"expression": "1+1"}}]}]}
    sid, _ = await start_session(store, load_spec_data(data))
    worker = StepConsumer(settings.model_copy(update={"max_model_turns": 5}), store)
    await worker.start()
    try:
        await wait_for(lambda: ended(store, sid), timeout_s=60, what="the session to end")
    finally:
        await worker.stop(grace_s=0)
    record = await store.get_session(sid)
    assert record.status == SessionStatus.FAILED
    assert "more than 5 turns" in (record.error or "")
    assert "DURABLE_MAX_MODEL_TURNS" in (record.error or "")
    docs = event_docs(await store.events(sid))
    assert [d["attempt"] for d in docs if d["type"] == "step_failed"] == [1]  # not retried
    assert sum(1 for d in docs if d["type"] == "tool_call_completed") == 5
