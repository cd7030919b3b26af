"""A reply cut short is not a reply: a model's stream that ends cleanly before its stop
event (OpenAI: no finish_reason and no [DONE]; Anthropic: no message_stop; Gemini: no
finishReason; Ollama: no `done` line; Bedrock: no messageStop; llama.cpp: no
finish_reason) is a transient error, asked again, and the step fails naming the cause
when it keeps happening; an empty reply that ends with its stop event is kept.

Every provider's real SDK and Strands class run against one local fake of their wire
APIs (tests/wire_fakes.py); the whole sessions run on a real redis-server with a real
worker in this process."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for
from wire_fakes import COMPLETION_TOKENS, PARTIAL, PROMPT_TOKENS, REPLY, WireFake, wire_fake

from strands_durable.errors import ProviderStreamCutShort
from strands_durable.models import SessionStatus
from strands_durable.sessions.history import event_docs
from strands_durable.sessions.start import start_session
from strands_durable.spec.loader import load_spec_data
from strands_durable.store.store import Store
from strands_durable.worker.agent_call import RetryPolicy, call_agent
from strands_durable.worker.consumer import StepConsumer
from strands_durable.worker.providers import ModelConfig, build_model, is_transient

pytestmark = pytest.mark.integration

FAST_RETRY = RetryPolicy(attempts=3, wait_min_s=0.01, wait_max_s=0.05)
# provider -> (the SDK it needs, model id, the host's path under the fake's URL)
PROVIDERS: dict[str, tuple[str | None, str, str]] = {
    "openai": ("openai", "gpt-4o", "/v1"),
    "anthropic": ("anthropic", "claude-x", ""),
    "gemini": ("google.genai", "gemini-2.5-flash", ""),
    "ollama": ("ollama", "llama3", ""),
    "llamacpp": (None, "default", ""),
    "bedrock": ("boto3", "fake.model-v1", ""),
}
CUT_SHORT = ["cut", "unstopped", "silent"]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, allow_provider_host: Callable[[str, str], None]
         ) -> Iterator[WireFake]:
    for name in ("GOOGLE_GEMINI_BASE_URL", "GOOGLE_GENAI_USE_VERTEXAI", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {"OPENAI_API_KEY": "test", "ANTHROPIC_API_KEY": "test",
                        "GOOGLE_API_KEY": "test", "AWS_ACCESS_KEY_ID": "test",
                        "AWS_SECRET_ACCESS_KEY": "test", "AWS_EC2_METADATA_DISABLED": "true",
                        }.items():
        monkeypatch.setenv(name, value)
    with wire_fake() as server:
        for provider, (_, _, path) in PROVIDERS.items():
            allow_provider_host(provider, server.url + path)
        yield server


def _config(provider: str, fake: WireFake) -> ModelConfig:
    sdk, model_id, path = PROVIDERS[provider]
    if sdk is not None and importlib.util.find_spec(sdk.partition(".")[0]) is None:
        pytest.skip(f"the {sdk} SDK is not installed")
    region = "us-east-1" if provider == "bedrock" else None
    return ModelConfig(provider=provider, agent_id="writer", model_id=model_id,
                       host=fake.url + path, region=region)


def _cause(provider: str) -> str:
    return (f"the model's reply stream ended before its stop event "
            f"({provider}, model {PROVIDERS[provider][1]})")


# -- one model call: call_agent on the provider's model, as a step makes it ---------------
@pytest.mark.parametrize("mode", CUT_SHORT)
@pytest.mark.parametrize("provider", list(PROVIDERS))
async def test_a_reply_cut_short_is_asked_again(provider: str, mode: str,
                                                fake: WireFake) -> None:
    model = build_model(_config(provider, fake))
    fake.plan = [mode]
    reply = await call_agent(model, system_prompt=None, history=[], prompt="hi",
                             retry=FAST_RETRY)
    assert reply.text == REPLY
    assert len(fake.requests) == 2
    assert reply.messages[-1] == {"role": "assistant", "content": [{"text": REPLY}]}


@pytest.mark.parametrize("provider", list(PROVIDERS))
async def test_a_reply_always_cut_short_fails_naming_the_cause(provider: str,
                                                               fake: WireFake) -> None:
    model = build_model(_config(provider, fake))
    fake.plan = ["cut"] * FAST_RETRY.attempts
    with pytest.raises(ProviderStreamCutShort) as info:
        await call_agent(model, system_prompt=None, history=[], prompt="hi",
                         retry=FAST_RETRY)
    assert str(info.value) == _cause(provider)
    assert is_transient(info.value)
    assert len(fake.requests) == FAST_RETRY.attempts


@pytest.mark.parametrize("provider", list(PROVIDERS))
async def test_an_empty_reply_with_its_stop_is_kept(provider: str, fake: WireFake) -> None:
    model = build_model(_config(provider, fake))
    fake.plan = ["empty"]
    reply = await call_agent(model, system_prompt=None, history=[], prompt="hi",
                             retry=FAST_RETRY)
    assert reply.text == ""
    assert len(fake.requests) == 1
    assert reply.messages[-1]["role"] == "assistant"
    assert not any(block.get("text") for block in reply.messages[-1]["content"])


@pytest.mark.parametrize("provider", ["openai", "llamacpp"])
async def test_a_reply_with_its_finish_reason_but_no_done_line_is_whole(
        provider: str, fake: WireFake) -> None:
    """The stop event is the finish_reason; `[DONE]` after it ends the transport only."""
    model = build_model(_config(provider, fake))
    fake.plan = ["nodone"]
    reply = await call_agent(model, system_prompt=None, history=[], prompt="hi",
                             retry=FAST_RETRY)
    assert reply.text == REPLY
    assert len(fake.requests) == 1


async def test_a_llamacpp_reply_past_its_bound_is_no_reply(
        fake: WireFake, monkeypatch: pytest.MonkeyPatch) -> None:
    """Read whole (Strands' way with llama.cpp), a reply is bounded: a host that streams
    without end fails the call, naming the provider, instead of filling the worker."""
    from strands_durable.worker.providers import sdk
    from strands_durable.worker.providers.sdk import ProviderStreamMalformed

    monkeypatch.setattr(sdk, "MAX_REPLY_BYTES", 200)  # the fake's reply is longer
    model = build_model(_config("llamacpp", fake))
    with pytest.raises(ProviderStreamMalformed, match="llamacpp reply stream was malformed: "
                                                      "longer than"):
        await call_agent(model, system_prompt=None, history=[], prompt="hi", retry=FAST_RETRY)
    assert len(fake.requests) == 1  # not transient: asked once


@pytest.mark.parametrize("provider", list(PROVIDERS))
async def test_a_whole_reply_still_comes_through_with_its_usage(provider: str,
                                                                fake: WireFake) -> None:
    model = build_model(_config(provider, fake))
    reply = await call_agent(model, system_prompt=None, history=[], prompt="hi",
                             retry=FAST_RETRY)
    assert reply.text == REPLY
    assert (reply.input_tokens, reply.output_tokens) == (PROMPT_TOKENS, COMPLETION_TOKENS)
    assert len(fake.requests) == 1


# -- whole sessions: a real worker on a real redis-server ---------------------------------
def _spec(provider: str, fake: WireFake, retries: int, **agent: Any) -> dict[str, Any]:
    _, model_id, path = PROVIDERS[provider]
    return {"version": 0, "name": "cut-short",
            "runtime": {"provider": provider, "model_id": model_id, "host": fake.url + path,
                        "failure_policy": {"retries": retries, "backoff": "constant",
                                           "wait_min": 0, "wait_max": 0}},
            "agents": {"writer": {"prompt": "You write.", **agent}},
            "pattern": {"type": "chain", "config": {"steps": [
                {"agent": "writer", "input": "hello"}]}}}


async def _ended(store: Store, sid: str) -> SessionStatus:
    async def done() -> bool:
        return (await store.get_session(sid)).status != SessionStatus.RUNNING

    await wait_for(done, timeout_s=90, what="the session to end")
    return (await store.get_session(sid)).status


SESSION_PROVIDERS = ["openai", "anthropic"]


@pytest.mark.parametrize("provider", SESSION_PROVIDERS)
async def test_a_session_whose_replies_keep_being_cut_short_fails_naming_the_cause(
        provider: str, fake: WireFake, store: Store, consumer: StepConsumer) -> None:
    _config(provider, fake)  # skips without the SDK
    fake.plan = ["cut"] * 100  # every in-place attempt of every durable attempt
    sid, _ = await start_session(store, load_spec_data(_spec(provider, fake, retries=1)))
    assert await _ended(store, sid) == SessionStatus.FAILED
    record = await store.get_session(sid)
    assert _cause(provider) in (record.error or ""), record.error
    kinds = [f["type"] for _, f in await store.events(sid)]
    assert kinds.count("step_failed") == 2 and kinds.count("step_retried") == 1, kinds
    assert "session_failed" in kinds and "step_committed" not in kinds
    assert await store.results(sid, 0) == []
    # Each durable attempt asked in place (3 attempts) before it failed.
    assert len(fake.requests) == 2 * 3
    assert await store.conversation(sid, "writer", 100) == []


@pytest.mark.parametrize("provider", SESSION_PROVIDERS)
@pytest.mark.parametrize("mode", ["cut", "unstopped"])
async def test_a_reply_cut_short_once_is_asked_again_and_the_whole_one_committed(
        provider: str, mode: str, fake: WireFake, store: Store,
        consumer: StepConsumer) -> None:
    _config(provider, fake)
    fake.plan = [mode]
    sid, _ = await start_session(store, load_spec_data(_spec(provider, fake, retries=0)))
    assert await _ended(store, sid) == SessionStatus.COMPLETED
    (result,) = await store.results(sid, 0)
    assert result.response == REPLY
    assert (result.input_tokens, result.output_tokens) == (PROMPT_TOKENS, COMPLETION_TOKENS)
    assert len(fake.requests) == 2
    kinds = [f["type"] for _, f in await store.events(sid)]
    assert "step_failed" not in kinds  # retried in place
    conversation = await store.conversation(sid, "writer", 100)
    assert conversation[-1] == {"role": "assistant", "content": [{"text": REPLY}]}


@pytest.mark.parametrize("provider", SESSION_PROVIDERS)
async def test_an_empty_reply_with_its_stop_event_is_committed_as_sent(
        provider: str, fake: WireFake, store: Store, consumer: StepConsumer) -> None:
    _config(provider, fake)
    fake.plan = ["empty"]
    sid, _ = await start_session(store, load_spec_data(_spec(provider, fake, retries=0)))
    assert await _ended(store, sid) == SessionStatus.COMPLETED
    (result,) = await store.results(sid, 0)
    assert result.response == ""
    assert len(fake.requests) == 1


TOOL = "tests.tool_fixtures.counting_tools.bump"


async def test_the_journal_never_keeps_a_turn_cut_short(
        fake: WireFake, tool_log: Path, store: Store, consumer: StepConsumer) -> None:
    """An agent with tools runs turn by turn through the step's journal: its first turn
    (a tool call) is journaled whole, its second keeps being cut short. The journal
    keeps the first turn and its tool result, never the second; the tool ran once."""
    data = _spec("openai", fake, retries=0, tools=[TOOL])
    data["tools"] = {"python": [TOOL]}
    fake.plan = ["tool"] + ["unstopped"] * 3
    sid, _ = await start_session(store, load_spec_data(data))
    assert await _ended(store, sid) == SessionStatus.FAILED
    assert _cause("openai") in ((await store.get_session(sid)).error or "")
    journal = await store.redis.hgetall(store.keys.journal(sid, "step:0"))
    assert sorted(journal) == ["m1", "t1"]
    assert "toolUse" in journal["m1"] and PARTIAL not in journal["m1"]
    # The first turn was asked once, and replayed from the journal by each retry.
    asked_with_results = [b for _, b in fake.requests
                          if any(m["role"] == "tool" for m in b["messages"])]
    assert len(fake.requests) == 4 and len(asked_with_results) == 3
    calls = [json.loads(line) for line in tool_log.read_text().splitlines()]
    assert [c["n"] for c in calls] == [1]
    started = [d for d in event_docs(await store.events(sid))
               if d["type"] == "tool_call_started"]
    assert len(started) == 1


async def test_after_a_turn_cut_short_the_journal_replays_the_turns_before_it(
        fake: WireFake, tool_log: Path, store: Store, consumer: StepConsumer) -> None:
    data = _spec("openai", fake, retries=0, tools=[TOOL])
    data["tools"] = {"python": [TOOL]}
    fake.plan = ["tool", "cut", "whole"]
    sid, _ = await start_session(store, load_spec_data(data))
    assert await _ended(store, sid) == SessionStatus.COMPLETED
    (result,) = await store.results(sid, 0)
    assert result.response == REPLY
    assert len(fake.requests) == 3
    assert len([line for line in tool_log.read_text().splitlines() if line]) == 1
    conversation = await store.conversation(sid, "writer", 100)
    assert conversation[-1] == {"role": "assistant", "content": [{"text": REPLY}]}


# -- `durable run`: the exit code and what it prints --------------------------------------
@pytest.mark.slow  # a whole `durable run` (its embedded store and worker) per run
@pytest.mark.parametrize("provider", SESSION_PROVIDERS)
async def test_durable_run_of_replies_cut_short_fails_saying_why(
        provider: str, fake: WireFake, tmp_path: Path) -> None:
    """What was tried against a third-party mock: the run no longer ends with exit 0 on
    an empty response; it fails, and says the stream ended before its stop event."""
    from typer.testing import CliRunner

    from strands_durable.api.cli import app

    _config(provider, fake)
    spec = tmp_path / "cut-short.yaml"
    spec.write_text(json.dumps(_spec(provider, fake, retries=0)))
    fake.plan = ["unstopped"] * 3
    result = await asyncio.to_thread(CliRunner().invoke, app,
                                     ["run", str(spec), "--ephemeral"])
    assert result.exit_code == 1, result.output
    assert _cause(provider) in " ".join(result.output.split()), result.output
    assert len(fake.requests) == 3

    fake.plan, fake.requests[:] = ["empty"], []
    result = await asyncio.to_thread(CliRunner().invoke, app,
                                     ["run", str(spec), "--ephemeral"])
    assert result.exit_code == 0, result.output
    assert len(fake.requests) == 1
