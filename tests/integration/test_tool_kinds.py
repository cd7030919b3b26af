"""A strands-agents-tools tool (the Strands project's own tool library) loaded as a
python tool by its import path, allowed by DURABLE_TOOL_MODULES, called by an agent in a
session on a real redis-server; refused at submit without the operator's prefix."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from helpers import wait_for

from strands_durable.errors import SpecError
from strands_durable.models import SessionStatus
from strands_durable.sessions.history import event_docs
from strands_durable.sessions.start import start_session
from strands_durable.settings import current_tool_policy
from strands_durable.spec.loader import load_spec_data
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

TOOL = "strands_tools.current_time.current_time"
SPEC = {
    "version": 0, "name": "clock",
    "runtime": {"provider": "scripted", "script": {"rules": [
        {"agent": "clock", "turn": 1,
         "tool_calls": [{"name": "current_time", "input": {"timezone": "UTC"}}]},
        {"agent": "clock", "turn": 2, "reply": "it is now"}]}},
    "tools": {"python": [TOOL]},
    "agents": {"clock": {"prompt": "Tell the time.", "tools": [TOOL]}},
    "pattern": {"type": "chain", "config": {"steps": [{"agent": "clock", "input": "time?"}]}},
}


@pytest.fixture
def allowed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("DURABLE_TOOL_MODULES", "strands_tools")
    current_tool_policy.cache_clear()
    yield
    current_tool_policy.cache_clear()


def test_without_the_operators_prefix_it_is_refused_at_submit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DURABLE_TOOL_MODULES", raising=False)
    current_tool_policy.cache_clear()
    with pytest.raises(SpecError) as info:
        load_spec_data(SPEC, "clock.yaml")
    assert "tools.python[0]" in str(info.value) and TOOL in str(info.value)
    current_tool_policy.cache_clear()


# strands-agents-tools 0.8 deprecates most of its tools in favour of Strands' own; this
# one still runs as it always did.
@pytest.mark.filterwarnings("ignore:current_time is deprecated:DeprecationWarning")
async def test_a_strands_agents_tools_tool_runs_in_a_session(
        allowed: None, store: Store, consumer: StepConsumer) -> None:
    sid, _ = await start_session(store, load_spec_data(SPEC, "clock.yaml"))

    async def ended() -> bool:
        return (await store.get_session(sid)).status != SessionStatus.RUNNING

    await wait_for(ended, timeout_s=60, what="the session to end")
    record = await store.get_session(sid)
    assert record.status == SessionStatus.COMPLETED, record.error
    done = [d for d in event_docs(await store.events(sid)) if d["type"] == "tool_call_completed"]
    assert [(d["tool"], d["outcome"]) for d in done] == [("current_time", "ok")]
    messages = await store.conversation(sid, "clock", 100)
    (result,) = [b["toolResult"] for m in messages for b in m["content"] if "toolResult" in b]
    text = json.dumps(result)
    assert result["status"] == "success" and ("+00:00" in text or "Z" in text), text
