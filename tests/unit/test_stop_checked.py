"""`StopChecked` (worker/model_wrapper.py) and the wire watchers (worker/providers/sdk.py):
a model turn is a reply only if its stream ends with its stop event; one cut short is a
transient `ProviderStreamCutShort`. The providers' wire APIs are
tests/integration/test_cut_short_replies.py."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import pytest
from strands.models.model import Model
from strands.types.exceptions import ModelThrottledException
from strands.types.streaming import StreamEvent

from strands_durable.errors import ProviderStreamCutShort, Unavailable, kind_of
from strands_durable.spec.script import ScriptConfig, ScriptRule
from strands_durable.worker.agent_call import RetryPolicy, call_agent
from strands_durable.worker.model_wrapper import StopChecked
from strands_durable.worker.providers import ModelConfig, build_model
from strands_durable.worker.providers.sdk import StopWatched, Watched
from strands_durable.worker.providers.transient import (
    is_transient,
    permanent_cause,
    throttle_of,
)

WHOLE: list[StreamEvent] = [
    {"messageStart": {"role": "assistant"}},
    {"contentBlockStart": {"start": {}}},
    {"contentBlockDelta": {"delta": {"text": "hello"}}},
    {"contentBlockStop": {}},
    {"messageStop": {"stopReason": "end_turn"}},
    {"metadata": {"usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
                  "metrics": {"latencyMs": 1}}},
]
CUT = WHOLE[:3]  # the body ended after a text delta: no block stop, no message stop


class Wire(Model):
    """A provider's model whose turns are the given event lists, in order."""

    def __init__(self, *turns: list[StreamEvent], error: Exception | None = None) -> None:
        self.turns = list(turns)
        self.error = error
        self.asked = 0

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> dict[str, Any]:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def stream(self, *args: Any, **kwargs: Any) -> AsyncGenerator[StreamEvent, None]:
        self.asked += 1
        for event in self.turns.pop(0) if self.turns else WHOLE:
            yield event
        if self.error is not None:
            raise self.error


async def events(model: Model) -> list[StreamEvent]:
    return [event async for event in model.stream([], None, None)]


async def test_a_turn_with_its_stop_event_passes_as_it_came() -> None:
    assert await events(StopChecked(Wire(WHOLE), "openai", "gpt-4o")) == WHOLE
    empty = [WHOLE[0], {"messageStop": {"stopReason": "end_turn"}}]
    assert await events(StopChecked(Wire(empty), "openai", "gpt-4o")) == empty


@pytest.mark.parametrize("turn", [CUT, WHOLE[:4], [], [WHOLE[0], WHOLE[-1]]],
                         ids=["mid-block", "after-block", "nothing", "usage-only"])
async def test_a_turn_without_its_stop_event_is_cut_short(turn: list[StreamEvent]) -> None:
    with pytest.raises(ProviderStreamCutShort) as info:
        await events(StopChecked(Wire(turn), "anthropic", "claude-x"))
    assert str(info.value) == ("the model's reply stream ended before its stop event "
                               "(anthropic, model claude-x)")
    assert info.value.details() == {"provider": "anthropic", "model_id": "claude-x"}


async def test_the_events_before_the_cut_were_handed_on_as_they_came() -> None:
    seen: list[StreamEvent] = []
    with pytest.raises(ProviderStreamCutShort):
        async for event in StopChecked(Wire(CUT), "bedrock", "m").stream([], None, None):
            seen.append(event)
    assert seen == CUT


async def test_a_reader_that_stops_early_gets_no_error() -> None:
    stream = StopChecked(Wire(WHOLE), "openai", "m").stream([], None, None)
    assert await anext(stream) == WHOLE[0]
    await stream.aclose()  # the agent stopped reading: nothing was cut short


async def test_a_cut_short_filed_under_a_providers_own_error_comes_out_as_itself() -> None:
    ours = ProviderStreamCutShort("llamacpp", "accurate-7b")
    theirs = ModelThrottledException(str(ours))  # llama.cpp's: "rate" in the message
    theirs.__cause__ = ours
    with pytest.raises(ProviderStreamCutShort) as info:
        await events(StopChecked(Wire(WHOLE[:2], error=theirs), "llamacpp", "accurate-7b"))
    assert info.value is ours


async def test_other_errors_pass_unchanged() -> None:
    error = ConnectionResetError("reset")
    with pytest.raises(ConnectionResetError) as info:
        await events(StopChecked(Wire(CUT, error=error), "openai", "m"))
    assert info.value is error


def test_the_error_is_transient_and_no_throttle() -> None:
    error = ProviderStreamCutShort("gemini", "gemini-2.5-flash")
    assert is_transient(error)
    assert permanent_cause(error) is None  # the durable retries apply too
    assert throttle_of(error) is None
    assert kind_of(error) is Unavailable
    assert str(ProviderStreamCutShort("scripted")) == (
        "the model's reply stream ended before its stop event (scripted)")


async def test_call_agent_asks_again_and_commits_only_the_whole_reply() -> None:
    wire = Wire(CUT, CUT)
    reply = await call_agent(StopChecked(wire, "openai", "m"), system_prompt=None, history=[],
                             prompt="hi", retry=RetryPolicy(attempts=3, wait_min_s=0,
                                                            wait_max_s=0))
    assert (reply.text, wire.asked) == ("hello", 3)


# -- every model build_model makes is checked ---------------------------------------------
async def test_build_model_checks_every_provider_and_names_its_model() -> None:
    script = ScriptConfig(rules=(ScriptRule(reply="scripted reply"),))
    model = build_model(ModelConfig(provider="scripted", agent_id="a", script=script))
    assert isinstance(model, StopChecked)
    assert (model.provider, model.model_id) == ("scripted", None)
    reply = await call_agent(model, system_prompt=None, history=[], prompt="hi")
    assert reply.text == "scripted reply"
    llama = build_model(ModelConfig(provider="llamacpp", agent_id="a"))
    assert (llama.provider, llama.model_id) == ("llamacpp", "default")


# -- the wire watchers ----------------------------------------------------------------------
async def chunks(*items: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    for item in items:
        yield item


def stopped(chunk: dict[str, Any]) -> bool:
    return bool(chunk.get("stop"))


async def test_a_watched_stream_ending_before_its_stop_raises() -> None:
    watched = StopWatched(chunks({"text": "a"}, {"text": "b"}), stopped, "openai", "m")
    seen = []
    with pytest.raises(ProviderStreamCutShort, match=r"\(openai, model m\)"):
        async for chunk in watched:
            seen.append(chunk)
    assert seen == [{"text": "a"}, {"text": "b"}]


async def test_a_watched_stream_read_on_after_its_stop_goes_on_where_it_was() -> None:
    watched = StopWatched(chunks({"text": "a"}, {"stop": True}, {"usage": 3}), stopped,
                          "openai", "m")
    first = []
    async for chunk in watched:  # Strands' loop breaks at the stop...
        first.append(chunk)
        if stopped(chunk):
            break
    rest = [chunk async for chunk in watched]  # ...then reads the usage that follows
    assert (first, rest) == ([{"text": "a"}, {"stop": True}], [{"usage": 3}])


class Completions:
    def __init__(self) -> None:
        self.kind = "completions"

    async def create(self, **request: Any) -> str:
        return f"response to {request['model']}"


class Chat:
    completions = Completions()
    other = "left alone"


class Client:
    chat = Chat()
    base_url = "http://h"


async def test_watched_wraps_only_the_call_at_its_path() -> None:
    calls: list[tuple[Any, dict[str, Any]]] = []

    def wrap(result: Any, request: dict[str, Any]) -> Any:
        calls.append((result, request))
        return f"watched {result}"

    client: Any = Watched(Client(), ("chat", "completions", "create"), wrap)
    assert client.base_url == "http://h"
    assert client.chat.other == "left alone"
    assert client.chat.completions.kind == "completions"
    assert await client.chat.completions.create(model="m") == "watched response to m"
    assert calls == [("response to m", {"model": "m"})]
