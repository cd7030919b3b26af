"""The offline `scripted` provider, alone and through `call_agent` (a real Strands Agent)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from strands_durable.errors import ProviderError
from strands_durable.spec.script import ScriptConfig, ScriptRule
from strands_durable.worker.agent_call import RetryPolicy, call_agent
from strands_durable.worker.providers.scripted import ScriptedModel, count_words, prompt_and_turn


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"text": text}]}


async def _stream(model: ScriptedModel, messages: list[dict[str, Any]]) -> list[Any]:
    return [event async for event in model.stream(messages)]  # type: ignore[arg-type]


async def _reply(model: ScriptedModel, prompt: str) -> str:
    return (await call_agent(model, system_prompt=None, history=[], prompt=prompt)).text


RULES = ScriptConfig(
    rules=(
        ScriptRule(agent="writer", contains="poem", reply="writer-poem"),
        ScriptRule(agent="writer", reply="writer-any"),
        ScriptRule(contains="poem", reply="anyone-poem"),
        ScriptRule(reply="catch-all"),
    )
)


@pytest.mark.parametrize(
    ("agent_id", "prompt", "expected"),
    [
        ("writer", "write a poem", "writer-poem"),  # agent + contains
        ("writer", "write prose", "writer-any"),  # agent only
        ("critic", "judge this poem", "anyone-poem"),  # contains only
        ("critic", "judge this", "catch-all"),  # no conditions
    ],
)
async def test_first_matching_rule_wins(agent_id: str, prompt: str, expected: str) -> None:
    assert await _reply(ScriptedModel(agent_id, RULES), prompt) == expected


async def test_rule_order_decides_between_overlapping_rules() -> None:
    first = ScriptRule(contains="x", reply="first")
    second = ScriptRule(contains="x", reply="second")
    assert await _reply(ScriptedModel("a", ScriptConfig(rules=(first, second))), "x") == "first"
    assert await _reply(ScriptedModel("a", ScriptConfig(rules=(second, first))), "x") == "second"


async def test_default_reply_echoes_first_200_chars() -> None:
    prompt = "word " * 100  # 500 chars
    assert await _reply(ScriptedModel("echo"), "hello") == "echo: hello"
    assert await _reply(ScriptedModel("echo"), prompt) == f"echo: {prompt[:200]}"


async def test_stream_events_have_the_standard_shape() -> None:
    events = await _stream(ScriptedModel("a"), [_user("one two three")])
    assert [next(iter(e)) for e in events] == [
        "messageStart",
        "contentBlockStart",
        "contentBlockDelta",
        "contentBlockStop",
        "messageStop",
        "metadata",
    ]
    assert events[2] == {"contentBlockDelta": {"delta": {"text": "a: one two three"}}}
    assert events[4] == {"messageStop": {"stopReason": "end_turn"}}
    usage = events[5]["metadata"]["usage"]
    assert usage == {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7}
    assert isinstance(events[5]["metadata"]["metrics"]["latencyMs"], int)


async def test_prompt_is_the_last_user_message_only() -> None:
    messages = [
        _user("an older question with many words in it"),
        {"role": "assistant", "content": [{"text": "old answer"}]},
        _user("new question"),
    ]
    assert prompt_and_turn(messages)[0] == "new question"  # type: ignore[arg-type]
    events = await _stream(ScriptedModel("a"), messages)
    assert events[2]["contentBlockDelta"]["delta"]["text"] == "a: new question"
    assert events[5]["metadata"]["usage"]["inputTokens"] == 2


async def test_token_counts_are_deterministic_word_counts() -> None:
    script = ScriptConfig(rules=(ScriptRule(reply="  five words   of reply text "),))
    model = ScriptedModel("a", script)
    first = await call_agent(model, system_prompt="sys", history=[], prompt="  a b\tc\nd ")
    second = await call_agent(model, system_prompt="sys", history=[], prompt="  a b\tc\nd ")
    assert (first.input_tokens, first.output_tokens) == (4, 5)
    assert (second.input_tokens, second.output_tokens) == (4, 5)
    assert count_words("") == 0
    assert first.messages == second.messages  # no random ids in the committed history


async def test_delay_is_honoured() -> None:
    model = ScriptedModel("slow", ScriptConfig(delay_s=0.2))
    started = time.perf_counter()
    await _reply(model, "hi")
    assert time.perf_counter() - started >= 0.2


async def test_conversation_grows_when_history_is_passed_back() -> None:
    model = ScriptedModel("a")
    first = await call_agent(model, system_prompt="be brief", history=[], prompt="one")
    second = await call_agent(model, system_prompt="be brief", history=first.messages, prompt="two")
    assert [m["role"] for m in first.messages] == ["user", "assistant"]
    assert [m["role"] for m in second.messages] == ["user", "assistant"] * 2
    assert second.messages[:2] == first.messages
    assert second.messages[3]["content"] == [{"text": "a: two"}]
    # usage is for this call only, not the whole conversation
    assert (second.input_tokens, second.output_tokens) == (1, 2)
    json.dumps(second.messages)  # JSON-serialisable as committed
    assert all(set(m) == {"role", "content"} for m in second.messages)


async def test_history_passed_in_is_not_mutated() -> None:
    history = [_user("q"), {"role": "assistant", "content": [{"text": "a"}]}]
    snapshot = json.loads(json.dumps(history))
    await call_agent(ScriptedModel("a"), system_prompt=None, history=history, prompt="next")
    assert history == snapshot


def test_config_round_trip_and_unknown_keys() -> None:
    model = ScriptedModel("a")
    assert model.get_config() == {"agent_id": "a", "script": ScriptConfig()}
    model.update_config(agent_id="b", script=RULES)
    assert model.get_config() == {"agent_id": "b", "script": RULES}
    with pytest.raises(ProviderError, match="unknown config keys"):
        model.update_config(temperature=0.5)


async def test_structured_output_is_a_clear_provider_error() -> None:
    from pydantic import BaseModel

    class Out(BaseModel):
        x: int

    with pytest.raises(ProviderError, match="structured output is not supported"):
        async for _ in ScriptedModel("a").structured_output(Out, []):
            pass


# --- call_agent's in-place retries, with a scripted model that fails on demand -----------


class FlakyModel(ScriptedModel):
    """Raises the queued errors first, then answers like a scripted model."""

    def __init__(self, errors: list[Exception]) -> None:
        super().__init__("flaky")
        self.errors = errors
        self.seen: list[int] = []  # conversation length at each attempt

    async def stream(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        self.seen.append(len(messages))
        if self.errors:
            raise self.errors.pop(0)
        async for event in super().stream(messages, *args, **kwargs):
            yield event


FAST = RetryPolicy(attempts=3, wait_min_s=0.001, wait_max_s=0.01)


async def test_transient_errors_are_retried_from_the_same_history() -> None:
    from strands.types.exceptions import ModelThrottledException

    model = FlakyModel([ModelThrottledException("slow down"), ConnectionResetError()])
    history = [_user("q"), {"role": "assistant", "content": [{"text": "a"}]}]
    reply = await call_agent(model, system_prompt=None, history=history, prompt="p", retry=FAST)
    assert reply.text == "flaky: p"
    assert model.seen == [3, 3, 3]
    assert len(reply.messages) == 4


async def test_last_transient_error_propagates_unchanged() -> None:
    error = ConnectionResetError("gone")
    model = FlakyModel([ConnectionResetError(), ConnectionResetError(), error])
    with pytest.raises(ConnectionResetError) as info:
        await call_agent(model, system_prompt=None, history=[], prompt="p", retry=FAST)
    assert info.value is error
    assert len(model.seen) == 3


async def test_permanent_errors_are_not_retried() -> None:
    model = FlakyModel([ValueError("bad request")])
    with pytest.raises(ValueError, match="bad request"):
        await call_agent(model, system_prompt=None, history=[], prompt="p", retry=FAST)
    assert len(model.seen) == 1


async def test_the_first_attempt_counts_as_attempt_one_of_the_policy(
        caplog: pytest.LogCaptureFixture) -> None:
    # The first attempt runs outside tenacity's loop; the retries that follow are
    # numbered and bounded as if it had run inside.
    model = FlakyModel([ConnectionResetError(), ConnectionResetError()])
    with caplog.at_level("WARNING", logger="strands_durable.worker.agent_call"):
        reply = await call_agent(model, system_prompt=None, history=[], prompt="p",
                                 retry=FAST)
    assert reply.text == "flaky: p"
    assert [r.getMessage().split(",")[0] for r in caplog.records] == [
        "transient model error on attempt 1", "transient model error on attempt 2"]


async def test_a_policy_of_one_attempt_does_not_retry() -> None:
    model = FlakyModel([ConnectionResetError("once")])
    with pytest.raises(ConnectionResetError, match="once"):
        await call_agent(model, system_prompt=None, history=[], prompt="p",
                         retry=RetryPolicy(attempts=1, wait_min_s=0.001, wait_max_s=0.01))
    assert len(model.seen) == 1


def test_retry_policy_is_validated() -> None:
    assert RetryPolicy() == RetryPolicy(attempts=3, wait_min_s=0.5, wait_max_s=8.0)
    with pytest.raises(ValueError, match="attempts"):
        RetryPolicy(attempts=0)
    with pytest.raises(ValueError, match="wait_min_s"):
        RetryPolicy(wait_min_s=2, wait_max_s=1)
