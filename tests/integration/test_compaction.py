"""An agent's conversation, restored and compacted, on a real redis-server with an
in-process worker and the real OpenAI provider class against an in-test server that
records every request: what each model call was sent is what the agent got back.

- By default a step gets its agent's whole committed conversation; the operator's
  ceiling (DURABLE_CONVERSATION_WINDOW) keeps only the newest messages.
- `context_policy.compaction`: once the conversation passes `when_tokens_over`, the
  summary is committed with the step that made it and the next step restores summary +
  preserved messages; the summarizer's tokens count toward the step's.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for
from tool_llm import COMPLETION_TOKENS, PROMPT_TOKENS, ToolLLM, serve, stop

from strands_durable.models import SessionStatus
from strands_durable.sessions.checkpoints import fork_from_checkpoint
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_data
from strands_durable.store.conversation import as_compaction
from strands_durable.store.store import Store
from strands_durable.worker.compaction import SUMMARIZE_PROMPT, SUMMARIZER_PROMPT
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

# About 450 estimated tokens a reply: the third step of a chain passes 1000 tokens.
LONG = " ".join(f"fact{i:03d}" for i in range(225))
SUMMARY = "SUMMARY of the earlier turns"
TOOL = "tests.tool_fixtures.counting_tools.bump"


@dataclass
class ChattyLLM(ToolLLM):
    """Asks for `calls` tools within each step (counted since the step's prompt: a
    compacted history holds fewer), then replies `reply`; replies `SUMMARY` to a
    request to summarise."""

    reply: str = LONG

    def answer(self, body: dict[str, Any]) -> tuple[int, str]:
        messages = body["messages"]
        if text_of(messages[-1]) == SUMMARIZE_PROMPT:
            return 0, SUMMARY
        prompt = max(i for i, m in enumerate(messages) if m["role"] == "user")
        results = sum(1 for m in messages[prompt:] if m["role"] == "tool")
        return (results + 1, "") if results < self.calls else (0, self.reply)


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content or "")


def history(request: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of what a request carried, the system prompt left out."""
    return [(m["role"], text_of(m)) for m in request["messages"] if m["role"] != "system"]


def system_of(request: dict[str, Any]) -> str:
    return "".join(text_of(m) for m in request["messages"] if m["role"] == "system")


def is_summary_request(request: dict[str, Any]) -> bool:
    return text_of(request["messages"][-1]) == SUMMARIZE_PROMPT


@pytest.fixture
def openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test")


@pytest.fixture
def llm(openai_key: None, allow_provider_host: Callable[[str, str], None]
        ) -> Iterator[ChattyLLM]:
    state = ChattyLLM(calls=0)
    server, thread = serve(state)
    allow_provider_host("openai", state.url("/v1"))
    yield state
    stop(server, thread, state)


def chain(llm: ChattyLLM, steps: int, compaction: dict[str, Any] | None = None,
          tools: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {
        "version": 0, "name": "long-chain",
        "runtime": {"provider": "openai", "model_id": "gpt-4o", "host": llm.url("/v1"),
                    "failure_policy": {"retries": 0}},
        "agents": {"a": {"prompt": "You are a.", **({"tools": [TOOL]} if tools else {})}},
        "pattern": {"type": "chain", "config": {"steps": [
            {"agent": "a", "input": f"step {i + 1}"} for i in range(steps)]}},
    }
    if compaction is not None:
        data["context_policy"] = {"compaction": compaction}
    if tools:
        data["tools"] = {"python": [TOOL]}
    return data


async def run_to_end(store: Store, data: dict[str, Any]) -> str:
    sid, _ = await start_session(store, load_spec_data(data))

    async def ended() -> bool:
        return (await store.get_session(sid)).status != SessionStatus.RUNNING

    await wait_for(ended, timeout_s=60, what="the session to end")
    record = await store.get_session(sid)
    assert record.status == SessionStatus.COMPLETED, record.error
    return sid


async def lane_items(store: Store, sid: str, lane: str = "a") -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in
            await store.redis.lrange(store.keys.conversation(sid, lane), 0, -1)]


def prompts(n: int, start: int = 1) -> list[tuple[str, str]]:
    """The turns of steps start..start+n-1 as the model was sent them."""
    return [t for i in range(start, start + n)
            for t in (("user", f"step {i}"), ("assistant", LONG))]


# -- the whole conversation, and the operator's ceiling -----------------------------
async def test_a_step_gets_the_whole_committed_conversation_by_default(
        llm: ChattyLLM, store: Store, consumer: StepConsumer) -> None:
    llm.reply = "ok"
    await run_to_end(store, chain(llm, 12))
    last = llm.requests[-1]
    # 11 earlier steps: 22 messages, well past the old fixed window of 20.
    assert history(last) == [t for i in range(1, 12) for t in
                             (("user", f"step {i}"), ("assistant", "ok"))] + [("user", "step 12")]


@pytest.fixture
async def ceiling_consumer(settings: DurableSettings, store: Store
                           ) -> AsyncIterator[StepConsumer]:
    c = StepConsumer(settings.model_copy(update={"conversation_window": 5}), store)
    await c.start()
    yield c
    await c.stop(grace_s=0)


async def test_the_operators_ceiling_keeps_the_newest_messages_from_a_prompt(
        llm: ChattyLLM, store: Store, ceiling_consumer: StepConsumer) -> None:
    llm.reply = "ok"
    await run_to_end(store, chain(llm, 12))
    # The newest 5 would open on an assistant turn: it restores from the prompt after.
    assert history(llm.requests[-1]) == [("user", "step 10"), ("assistant", "ok"),
                                         ("user", "step 11"), ("assistant", "ok"),
                                         ("user", "step 12")]


# -- compaction ---------------------------------------------------------------------
async def test_compaction_is_committed_and_the_next_step_restores_it(
        llm: ChattyLLM, store: Store, consumer: StepConsumer) -> None:
    sid = await run_to_end(store, chain(llm, 4, {"when_tokens_over": 1000}))
    agent_calls = [r for r in llm.requests if not is_summary_request(r)]
    summaries = [r for r in llm.requests if is_summary_request(r)]
    assert len(agent_calls) == 4
    # Past 1000 tokens after step 3 (6 messages): the 35% oldest (2) are summarised
    # by the agent's own model with the SDK's summarization prompt; again after step 4.
    assert len(summaries) == 2
    assert history(summaries[0]) == [*prompts(1), ("user", SUMMARIZE_PROMPT)]
    assert "conversation summarizer" in system_of(summaries[0])
    # Step 4 got the summary and the 4 preserved messages, not the whole conversation.
    assert history(agent_calls[3]) == [("user", SUMMARY), *prompts(2, start=2),
                                       ("user", "step 4")]
    # Committed: one record after each compacting step's own messages.
    items = await lane_items(store, sid)
    records = [(i, c.keep) for i, c in enumerate(map(as_compaction, items)) if c is not None]
    assert records == [(6, 4), (9, 5)]
    # The summary of step 4's compaction covered the first summary and `step 2`.
    assert history(summaries[1])[:2] == [("user", SUMMARY), ("user", "step 2")]
    assert [(m["role"], text_of(m)) for m in await store.conversation(sid, "a")] == [
        ("user", SUMMARY), ("assistant", LONG), *prompts(2, start=3)]
    # The summarizer's tokens are the compacting steps' own.
    tokens = {r.key: (r.input_tokens, r.output_tokens) for r in await store.results(sid)}
    assert tokens == {"step:0": (PROMPT_TOKENS, COMPLETION_TOKENS),
                      "step:1": (PROMPT_TOKENS, COMPLETION_TOKENS),
                      "step:2": (2 * PROMPT_TOKENS, 2 * COMPLETION_TOKENS),
                      "step:3": (2 * PROMPT_TOKENS, 2 * COMPLETION_TOKENS)}
    usage = (await store.get_session(sid)).token_usage
    assert (usage.total_input_tokens, usage.total_output_tokens) == (
        6 * PROMPT_TOKENS, 6 * COMPLETION_TOKENS)


async def test_under_the_threshold_or_disabled_nothing_is_summarised(
        llm: ChattyLLM, store: Store, consumer: StepConsumer) -> None:
    sid = await run_to_end(store, chain(llm, 3, {"when_tokens_over": 100_000}))
    off = await run_to_end(store, chain(llm, 3, {"when_tokens_over": 1000,
                                                 "enabled": False}))
    assert not [r for r in llm.requests if is_summary_request(r)]
    for session in (sid, off):
        assert not [i for i in await lane_items(store, session) if as_compaction(i)]


async def test_a_summarization_model_summarises_as_strands_cli_s_summarization_agent(
        llm: ChattyLLM, store: Store, consumer: StepConsumer) -> None:
    await run_to_end(store, chain(llm, 3, {"when_tokens_over": 1000,
                                           "summarization_model": "gpt-4o-mini",
                                           "preserve_recent_messages": 2}))
    (summary,) = [r for r in llm.requests if is_summary_request(r)]
    assert summary["model"] == "gpt-4o-mini"
    assert summary["temperature"] == pytest.approx(0.3)
    assert system_of(summary) == SUMMARIZER_PROMPT
    assert {r["model"] for r in llm.requests if not is_summary_request(r)} == {"gpt-4o"}


async def test_compaction_after_a_tool_loop_keeps_tool_pairs_whole(
        llm: ChattyLLM, tool_log: Path, store: Store, consumer: StepConsumer) -> None:
    llm.calls, llm.reply = 2, " ".join([LONG] * 3)
    sid = await run_to_end(store, chain(llm, 2, {"when_tokens_over": 1000}, tools=True))
    calls = [json.loads(line) for line in tool_log.read_text().splitlines()]
    assert [c["n"] for c in calls] == [1, 2, 1, 2]  # two a step; none by a summary
    # Step 1: 3 model turns, then its summary, then step 2's first model turn.
    assert [is_summary_request(r) for r in llm.requests[:5]] == [False] * 3 + [True, False]
    # Step 1 made 6 messages (prompt, tool use, result, tool use, result, reply); 2 would
    # be summarised, but never a tool result without its tool use: the split moves to 3.
    first, step2 = llm.requests[3], llm.requests[4]
    assert [m["role"] for m in first["messages"] if m["role"] != "system"] == [
        "user", "assistant", "tool", "user"]
    roles = [m["role"] for m in step2["messages"] if m["role"] != "system"]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]
    assert history(step2)[0] == ("user", SUMMARY)
    # The step's journal served its run and went with the commit.
    assert await store.redis.exists(store.keys.journal(sid, "step:0")) == 0
    (record,) = [c for c in map(as_compaction, await lane_items(store, sid))
                 if c is not None][:1]
    assert record.keep == 3


async def test_a_fork_from_a_checkpoint_restores_the_conversation_as_it_stood(
        llm: ChattyLLM, settings: DurableSettings, store: Store) -> None:
    worker = StepConsumer(settings, store)
    await worker.start()
    try:
        sid = await run_to_end(store, chain(llm, 4, {"when_tokens_over": 1000}))
    finally:
        await worker.stop(grace_s=0)  # the forks are read before anything runs them
    # Checkpoint 3 is step 3's commit, the first that compacted; 2 is the one before.
    after = await fork_from_checkpoint(store, sid, 3)
    before = await fork_from_checkpoint(store, sid, 2)
    assert [(m["role"], text_of(m)) for m in await store.conversation(after, "a")] == [
        ("user", SUMMARY), *prompts(2, start=2)]
    assert [(m["role"], text_of(m)) for m in await store.conversation(before, "a")] == \
        prompts(2)


async def test_the_summarizers_tokens_count_toward_the_token_budget(
        llm: ChattyLLM, store: Store, consumer: StepConsumer) -> None:
    data = chain(llm, 4, {"when_tokens_over": 1000})
    per_call = PROMPT_TOKENS + COMPLETION_TOKENS
    # Three agent calls stay under it; with step 3's summary they pass it.
    data["runtime"]["budgets"] = {"max_tokens": 3 * per_call + 1}
    sid, _ = await start_session(store, load_spec_data(data))

    async def paused() -> bool:
        return (await store.get_session(sid)).status == SessionStatus.PAUSED

    await wait_for(paused, timeout_s=60, what="the budget to pause the session")
    record = await store.get_session(sid)
    assert "max_tokens" in (record.paused_reason or "")
    assert [r.key for r in await store.results(sid)] == ["step:0", "step:1", "step:2"]
    usage = record.token_usage
    assert usage.total_input_tokens + usage.total_output_tokens == 4 * per_call
