"""Real providers work by configuration alone: Ollama and OpenAI SDKs against fake servers.

A tiny threaded HTTP server on 127.0.0.1 imitates Ollama's `/api/chat` (chunked NDJSON)
and OpenAI's `/v1/chat/completions` (SSE, with the final usage chunk). Everything from
the provider SDK up (strands model, Agent, call_agent, retries) is the real code.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from helpers import send_chunked, serve_http, wait_for

from strands_durable.models import SessionStatus
from strands_durable.sessions.start import start_session
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.store import Store
from strands_durable.worker.agent_call import RetryPolicy, call_agent
from strands_durable.worker.consumer import StepConsumer
from strands_durable.worker.providers import ModelConfig, build_model

REPLY_PARTS = ["Hello", " from", " the fake", " server"]
REPLY = "".join(REPLY_PARTS)
PROMPT_TOKENS, COMPLETION_TOKENS = 11, 7
FAST_RETRY = RetryPolicy(attempts=3, wait_min_s=0.01, wait_max_s=0.05)


@dataclass
class FakeLLM:
    """What the fake server answers with and what it was asked."""

    port: int = 0
    failures: list[int] = field(default_factory=list)  # statuses to answer first, in order
    hangs: int = 0  # requests (first ones) answered only when the test ends: a hung server
    released: threading.Event = field(default_factory=threading.Event)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def _handler(state: FakeLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # chunked streaming, like the real servers

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with state.lock:
                state.requests.append(body)
                state.headers.append({k.lower(): v for k, v in self.headers.items()})
                failure = state.failures.pop(0) if state.failures else None
                hang = state.hangs > 0
                state.hangs -= hang
            if hang:
                state.released.wait(timeout=30)
                self._send_error(504)
            elif failure is not None:
                self._send_error(failure)
            elif self.path == "/api/chat":
                self._stream("application/x-ndjson", _ollama_lines(body["model"]))
            elif self.path == "/v1/chat/completions":
                self._stream("text/event-stream", _openai_events(body["model"]))
            else:
                self._send_error(404)

        def _send_error(self, status: int) -> None:
            payload = json.dumps({"error": {"message": f"fake {status}", "type": "fake"}}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _stream(self, content_type: str, chunks: Iterator[str]) -> None:
            send_chunked(self, content_type, chunks)

    return Handler


def _ollama_lines(model: str) -> Iterator[str]:
    """Ollama's /api/chat stream: one JSON object per line, the last with the counts."""
    base = {"model": model, "created_at": "2024-01-01T00:00:00Z"}
    for part in REPLY_PARTS:
        message = {"role": "assistant", "content": part}
        yield json.dumps({**base, "message": message, "done": False}) + "\n"
    final = {
        **base,
        "message": {"role": "assistant", "content": ""},
        "done": True,
        "done_reason": "stop",
        "total_duration": 12_000_000,
        "prompt_eval_count": PROMPT_TOKENS,
        "eval_count": COMPLETION_TOKENS,
    }
    yield json.dumps(final) + "\n"


def _openai_events(model: str) -> Iterator[str]:
    """OpenAI's chat-completions SSE stream with `stream_options.include_usage`."""
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": model}

    def choice(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [choice({"role": "assistant", "content": ""}, None)]
    chunks += [choice({"content": part}, None) for part in REPLY_PARTS]
    chunks.append(choice({}, "stop"))
    usage = {
        "prompt_tokens": PROMPT_TOKENS,
        "completion_tokens": COMPLETION_TOKENS,
        "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
    }
    chunks.append({**base, "choices": [], "usage": usage})
    for chunk in chunks:
        yield f"data: {json.dumps(chunk)}\n\n"
    yield "data: [DONE]\n\n"


@pytest.fixture
def fake_llm(allow_provider_host: Callable[[str, str], None]) -> Iterator[FakeLLM]:
    state = FakeLLM()
    with serve_http(_handler(state), release=state.released) as port:
        state.port = port
        allow_provider_host("openai", state.url("/v1"))
        allow_provider_host("ollama", state.url())
        yield state


def _provider_cfg(provider: str, fake: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> ModelConfig:
    if importlib.util.find_spec(provider) is None:
        pytest.skip(f"the {provider} SDK is not installed")
    if provider == "ollama":
        return ModelConfig(
            provider="ollama", agent_id="writer", host=fake.url(), model_id="llama3",
            temperature=0.3,
        )  # fmt: skip
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    return ModelConfig(
        provider="openai", agent_id="writer", host=fake.url("/v1"), model_id="gpt-4o",
        temperature=0.3,
    )  # fmt: skip


PROVIDERS = ["ollama", "openai"]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_reply_and_usage_come_from_the_server(
    provider: str, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = build_model(_provider_cfg(provider, fake_llm, monkeypatch))
    reply = await call_agent(model, system_prompt="Be brief.", history=[], prompt="Say hello")

    assert reply.text == REPLY
    assert (reply.input_tokens, reply.output_tokens) == (PROMPT_TOKENS, COMPLETION_TOKENS)
    assert reply.messages == [
        {"role": "user", "content": [{"text": "Say hello"}]},
        {"role": "assistant", "content": [{"text": REPLY}]},
    ]
    (request,) = fake_llm.requests
    assert request["stream"] is True
    sent = [(m["role"], _text(m["content"])) for m in request["messages"]]
    assert sent == [("system", "Be brief."), ("user", "Say hello")]
    if provider == "ollama":
        assert (request["model"], request["options"]["temperature"]) == ("llama3", 0.3)
    else:
        assert (request["model"], request["temperature"]) == ("gpt-4o", 0.3)
        assert request["stream_options"] == {"include_usage": True}
        assert fake_llm.headers[0]["authorization"] == "Bearer test"


async def test_openai_turns_reuse_one_client(
        fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    """Strands makes a new OpenAI client (~90 ms of CPU) per request; a model here keeps
    one per event loop. A changed key gets a new client, which sends it."""
    import openai

    made: list[object] = []
    real_init = openai.AsyncOpenAI.__init__

    def counted_init(self: openai.AsyncOpenAI, *args: Any, **kwargs: Any) -> None:
        made.append(self)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(openai.AsyncOpenAI, "__init__", counted_init)
    model = build_model(_provider_cfg("openai", fake_llm, monkeypatch))
    for prompt in ("one", "two", "three"):
        reply = await call_agent(model, system_prompt=None, history=[], prompt=prompt)
        assert reply.text == REPLY
    assert (len(fake_llm.requests), len(made)) == (3, 1)

    monkeypatch.setenv("OPENAI_API_KEY", "rotated")
    await call_agent(model, system_prompt=None, history=[], prompt="four")
    assert fake_llm.headers[-1]["authorization"] == "Bearer rotated"
    assert len(made) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_history_is_sent_back_to_the_server(
    provider: str, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = build_model(_provider_cfg(provider, fake_llm, monkeypatch))
    first = await call_agent(model, system_prompt=None, history=[], prompt="one")
    second = await call_agent(model, system_prompt=None, history=first.messages, prompt="two")

    sent = [(m["role"], _text(m["content"])) for m in fake_llm.requests[1]["messages"]]
    assert sent == [("user", "one"), ("assistant", REPLY), ("user", "two")]
    assert len(second.messages) == 4


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("failures", [[429], [503], [503, 429]])
async def test_transient_statuses_are_retried_then_succeed(
    provider: str, failures: list[int], fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = build_model(_provider_cfg(provider, fake_llm, monkeypatch))
    fake_llm.failures = list(failures)
    reply = await call_agent(model, system_prompt=None, history=[], prompt="hi", retry=FAST_RETRY)

    assert reply.text == REPLY
    assert len(fake_llm.requests) == len(failures) + 1
    # every attempt started from the same (empty) history
    assert all(len(r["messages"]) == 1 for r in fake_llm.requests)
    assert len(reply.messages) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_retries_run_out_and_the_provider_error_propagates(
    provider: str, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = build_model(_provider_cfg(provider, fake_llm, monkeypatch))
    fake_llm.failures = [503, 503, 503, 503]
    with pytest.raises(Exception) as info:
        await call_agent(model, system_prompt=None, history=[], prompt="hi", retry=FAST_RETRY)
    assert "503" in str(info.value) or getattr(info.value, "status_code", None) == 503
    assert len(fake_llm.requests) == FAST_RETRY.attempts


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_permanent_errors_are_not_retried(
    provider: str, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = build_model(_provider_cfg(provider, fake_llm, monkeypatch))
    fake_llm.failures = [400]
    with pytest.raises(Exception) as info:
        await call_agent(model, system_prompt=None, history=[], prompt="hi", retry=FAST_RETRY)
    assert getattr(info.value, "status_code", None) == 400
    assert len(fake_llm.requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_hung_server_times_out_and_is_retried(
    provider: str, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = build_model(_provider_cfg(provider, fake_llm, monkeypatch))
    fake_llm.hangs = 1
    # The limit is what the hung first attempt waits out; the second attempt must answer
    # within it, so it is generous (a loaded machine can take a second to answer).
    reply = await call_agent(model, system_prompt=None, history=[], prompt="hi",
                             retry=FAST_RETRY, timeout_s=2.0)
    assert reply.text == REPLY
    assert len(fake_llm.requests) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_server_that_never_answers_fails_the_attempts_with_a_timeout(
    provider: str, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = build_model(_provider_cfg(provider, fake_llm, monkeypatch))
    fake_llm.hangs = FAST_RETRY.attempts
    attempts: list[int] = []
    # 1 s an attempt: at 0.2 s, on a machine with a load of 15, no attempt's request
    # reached the server before its time ran out.
    with pytest.raises(TimeoutError, match=r"no reply from the model within 1s"):
        await call_agent(model, system_prompt=None, history=[], prompt="hi",
                         retry=FAST_RETRY, timeout_s=1.0,
                         before_attempt=lambda: attempts.append(1))
    # Every attempt ran out of time. Counted where the attempts start: on a loaded
    # machine an attempt can time out before its request reaches the server.
    assert len(attempts) == FAST_RETRY.attempts
    assert 1 <= len(fake_llm.requests) <= FAST_RETRY.attempts


def _text(content: Any) -> str:
    """Message text whether the SDK sent a string (Ollama) or content parts (OpenAI)."""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


PERMANENT_SPEC = """
version: 0
name: rejected
runtime:
  provider: openai
  model_id: gpt-4o
  host: {host}
  failure_policy: {{retries: 3, backoff: constant, wait_min: 0, wait_max: 0}}
agents:
  writer: {{prompt: "You write."}}
pattern:
  type: chain
  config:
    steps:
      - {{agent: writer, input: "hello"}}
"""


@pytest.mark.parametrize(("status", "cause"), [
    (401, "HTTP 401: the credentials are missing or were rejected"),
    (404, "HTTP 404: the model (or endpoint) was not found"),
])
async def test_a_permanent_provider_error_fails_the_step_at_once_naming_the_cause(
        status: int, cause: str, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch,
        store: Store, consumer: StepConsumer) -> None:
    """Durable retries are for what may change: a rejected key or a missing model fails
    the step on its first attempt, saying why."""
    _provider_cfg("openai", fake_llm, monkeypatch)  # skips without the SDK; sets the key
    fake_llm.failures = [status] * 10
    spec = load_spec_text(PERMANENT_SPEC.format(host=fake_llm.url("/v1")), "rejected.yaml")
    sid, _ = await start_session(store, spec)

    async def failed() -> bool:
        return (await store.get_session(sid)).status == SessionStatus.FAILED

    await wait_for(failed, what="the session to fail")
    record = await store.get_session(sid)
    assert cause in (record.error or "")
    kinds = [f["type"] for _, f in await store.events(sid)]
    # One attempt: no durable retry (the SDK's own transport retries are its business;
    # test_permanent_errors_are_not_retried pins that ours add none).
    assert kinds.count("step_failed") == 1 and "step_retried" not in kinds, kinds
    assert fake_llm.requests


async def test_a_transient_provider_error_still_gets_the_durable_retries(
        fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch, store: Store,
        consumer: StepConsumer) -> None:
    _provider_cfg("openai", fake_llm, monkeypatch)
    fake_llm.failures = [503] * 100  # more than the in-place retries of every attempt
    spec = load_spec_text(PERMANENT_SPEC.format(host=fake_llm.url("/v1")).replace(
        "retries: 3", "retries: 1"), "flaky.yaml")
    sid, _ = await start_session(store, spec)

    async def failed() -> bool:
        return (await store.get_session(sid)).status == SessionStatus.FAILED

    await wait_for(failed, timeout_s=120, what="the session to fail")
    kinds = [f["type"] for _, f in await store.events(sid)]
    assert kinds.count("step_failed") == 2 and kinds.count("step_retried") == 1
