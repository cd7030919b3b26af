"""Providers fail in ways the other fakes do not: each real provider path (the provider's
SDK and Strands class, built by `build_model` from a spec's settings alone) against a
local, hostile fake of its wire API.

What it checks, by provider: throttles (429 with Retry-After in seconds and as an HTTP
date, `x-ratelimit-*`, Anthropic's 529, Gemini's RESOURCE_EXHAUSTED with a `retryDelay`
in its body, Bedrock's ThrottlingException) back the fleet off as a capacity wait, not a
failed attempt; a server that sends its headers and then nothing is bounded by the
model timeout; 5xx answers are transient and 4xx ones permanent, their message naming
the provider and status and never the API key; a huge or non-JSON body is a bounded,
clear error; a reply without usage still commits; garbage lines, a `data:` line that
is not JSON, and an error event in the middle of a stream.

The fake (`Hostile`, below) answers each request with the next action of its `plan`
(else a whole reply on the provider's wire); a held request waits on an event that the
test's end sets, never on wall time. Whole sessions run on a real redis-server with the
in-process worker (the `consumer` fixture, or one made here with a short model
timeout)."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import importlib.util
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from helpers import serve_http, wait_for
from wire_fakes import aws_event

from strands_durable.models import SessionStatus
from strands_durable.provider_policy import CapacityPolicy
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_data
from strands_durable.store.capacity import ProviderKey
from strands_durable.store.store import Store
from strands_durable.worker.agent_call import RetryPolicy, call_agent
from strands_durable.worker.capacity import CapacityGate
from strands_durable.worker.capacity_model import CapacityModel
from strands_durable.worker.consumer import StepConsumer
from strands_durable.worker.providers import ModelConfig, build_model, is_transient
from strands_durable.worker.providers.transient import permanent_cause, throttle_of

pytestmark = pytest.mark.integration

FAST_RETRY = RetryPolicy(attempts=3, wait_min_s=0.01, wait_max_s=0.05)
PIECES = ["hostile", " but whole"]
REPLY = "".join(PIECES)
PROMPT_TOKENS, COMPLETION_TOKENS = 13, 5
# Keys distinctive enough to find anywhere they leak to.
KEYS = {"OPENAI_API_KEY": "sk-hostile-openai-7f3a9c1e5b2d4f6a8c0e",
        "ANTHROPIC_API_KEY": "sk-ant-hostile-2b4d6f8a0c1e3a5c7e9b",
        "GOOGLE_API_KEY": "AIzaHostileGemini9d8c7b6a5f4e3d2c1b0a",
        "AWS_ACCESS_KEY_ID": "AKIAHOSTILE000000000",
        "AWS_SECRET_ACCESS_KEY": "hostile/secret/5e6f7a8b9c0d1e2f3a4b5c6d"}
KEY_OF = {"openai": KEYS["OPENAI_API_KEY"], "anthropic": KEYS["ANTHROPIC_API_KEY"],
          "gemini": KEYS["GOOGLE_API_KEY"]}
# provider -> (the SDK module it needs, model id, the host's path under the fake's URL)
PROVIDERS: dict[str, tuple[str, str, str]] = {
    "openai": ("openai", "gpt-hostile", "/v1"),
    "anthropic": ("anthropic", "claude-hostile", ""),
    "gemini": ("google.genai", "gemini-hostile", ""),
    "bedrock": ("boto3", "hostile.model-v1", ""),
}
MAIN = ["openai", "anthropic", "gemini"]


# -- the hostile fake -------------------------------------------------------------------
Act = Callable[["_Handler", str, dict[str, Any], dict[str, str]], None]


@dataclass
class Hostile:
    port: int = 0
    plan: list[Act] = field(default_factory=list)
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    released: threading.Event = field(default_factory=threading.Event)
    held: int = 0  # requests now holding (headers sent, body not)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def host(self, provider: str) -> str:
        return self.url + PROVIDERS[provider][2]

    def take(self, path: str, body: dict[str, Any]) -> Act | None:
        with self.lock:
            self.requests.append((path, body))
            return self.plan.pop(0) if self.plan else None


def _kind(path: str) -> str:
    if path.endswith("/chat/completions"):
        return "openai"
    if path == "/v1/messages":
        return "anthropic"
    if ":streamGenerateContent" in path:
        return "gemini"
    if path.endswith("/converse-stream"):
        return "bedrock"
    return "unknown"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: Hostile

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        path = self.path.split("?", 1)[0]
        act = self.state.take(path, body)
        headers = {k.lower(): v for k, v in self.headers.items()}
        # A client that gave up (its timeout) leaves nobody to answer.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            (act or whole())(self, _kind(path), body, headers)

    def start_stream(self, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.flush()

    def chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def plain(self, status: int, data: bytes, content_type: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


CONTENT_TYPES = {"openai": "text/event-stream", "anthropic": "text/event-stream",
                 "gemini": "text/event-stream", "bedrock": "application/vnd.amazon.eventstream"}


def stream(parts: Callable[[str, dict[str, Any]], list[bytes]], *, hold: bool = False,
           headers: dict[str, str] | None = None) -> Act:
    """200 and the `parts` for the provider, as a chunked body that ends cleanly; `hold`:
    the headers go out, then nothing until the test ends (a server slow to first bytes)."""
    def act(h: _Handler, kind: str, body: dict[str, Any], _: dict[str, str]) -> None:
        h.start_stream(CONTENT_TYPES.get(kind, "text/event-stream"), headers)
        if hold:
            with h.state.lock:
                h.state.held += 1
            h.state.released.wait(timeout=60)
        for data in parts(kind, body):
            h.chunk(data)
        h.end_stream()

    return act


def whole(usage: bool = True, **options: Any) -> Act:
    return stream(lambda kind, body: reply(kind, body, usage=usage, **options))


def error(status: int, payload: Any = None, *, headers: dict[str, str] | None = None,
          content_type: str = "application/json", echo_key: bool = False) -> Act:
    """`status` with the provider's error body (or `payload`: bytes as they are); with
    `echo_key`, the body repeats the credential the request carried (as some gateways
    and OpenAI-compatible servers do in their 401s)."""
    def act(h: _Handler, kind: str, _body: dict[str, Any], req: dict[str, str]) -> None:
        if isinstance(payload, bytes):
            data = payload
        else:
            message = payload or f"hostile {status}"
            if echo_key:
                sent = (req.get("authorization", "").removeprefix("Bearer ")
                        or req.get("x-api-key") or req.get("x-goog-api-key") or "")
                message = f"Incorrect API key provided: {sent}"
            data = json.dumps(error_body(kind, status, message)).encode()
        h.plain(status, data, content_type, headers)

    return act


GOOGLE_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
                 502: "UNKNOWN", 503: "UNAVAILABLE"}
ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                   404: "not_found_error", 429: "rate_limit_error", 500: "api_error",
                   529: "overloaded_error"}


def error_body(kind: str, status: int, message: str) -> dict[str, Any]:
    if kind == "anthropic":
        return {"type": "error", "error": {"type": ANTHROPIC_TYPES.get(status, "api_error"),
                                           "message": message}}
    if kind == "gemini":
        return {"error": {"code": status, "message": message,
                          "status": GOOGLE_STATUS.get(status, "UNKNOWN")}}
    if kind == "bedrock":
        return {"message": message}
    return {"error": {"message": message, "type": "hostile", "code": None}}


# -- whole replies on each wire ---------------------------------------------------------
def reply(kind: str, body: dict[str, Any], *, usage: bool = True,
          garbage: bool = False, bad_json: bool = False, error_mid: bool = False
          ) -> list[bytes]:
    make = {"openai": _openai, "anthropic": _anthropic, "gemini": _gemini,
            "bedrock": _bedrock}[kind]
    return make(body, usage=usage, garbage=garbage, bad_json=bad_json, error_mid=error_mid)


def _openai(body: dict[str, Any], *, usage: bool, garbage: bool, bad_json: bool,
            error_mid: bool) -> list[bytes]:
    base = {"id": "chatcmpl-h", "object": "chat.completion.chunk", "created": 0,
            "model": str(body.get("model", "m"))}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return f"data: {json.dumps({**base, 'choices': [choice]})}\n\n"

    out = [chunk({"role": "assistant", "content": ""})]
    if garbage:  # comments, unknown fields, a keep-alive: SSE says to ignore them
        out += [": keep-alive\n\n", "retry: 100\n\n", "foo: bar\n\n", "\n\n"]
    out.append(chunk({"content": PIECES[0]}))
    if bad_json:
        out.append("data: {this is not json\n\n")
    if error_mid:
        out.append("data: " + json.dumps({"error": {
            "message": "The server had an error while processing your request. Sorry "
                       "about that!", "type": "server_error", "code": None}}) + "\n\n")
        return [part.encode() for part in out]
    out += [chunk({"content": PIECES[1]}), chunk({}, "stop")]
    if usage:
        counts = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS,
                  "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS}
        out.append(f"data: {json.dumps({**base, 'choices': [], 'usage': counts})}\n\n")
    out.append("data: [DONE]\n\n")
    return [part.encode() for part in out]


def _anthropic(body: dict[str, Any], *, usage: bool, garbage: bool, bad_json: bool,
               error_mid: bool) -> list[bytes]:
    def event(name: str, data: dict[str, Any]) -> str:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"

    message: dict[str, Any] = {
        "id": "msg_h", "type": "message", "role": "assistant",
        "model": str(body.get("model", "m")), "content": [], "stop_reason": None,
        "stop_sequence": None}
    if usage:
        message["usage"] = {"input_tokens": PROMPT_TOKENS, "output_tokens": 1}
    out = [event("message_start", {"message": message})]
    if garbage:
        out += [": comment\n\n", "event: ping\ndata: {\"type\": \"ping\"}\n\n", "foo: bar\n\n"]
    out += [event("content_block_start", {"index": 0,
                                          "content_block": {"type": "text", "text": ""}}),
            event("content_block_delta", {"index": 0, "delta": {"type": "text_delta",
                                                                "text": PIECES[0]}})]
    if bad_json:
        out.append("event: content_block_delta\ndata: {this is not json\n\n")
    if error_mid:
        out.append("event: error\ndata: " + json.dumps({"type": "error", "error": {
            "type": "overloaded_error", "message": "Overloaded"}}) + "\n\n")
        return [part.encode() for part in out]
    out += [event("content_block_delta", {"index": 0, "delta": {"type": "text_delta",
                                                                "text": PIECES[1]}}),
            event("content_block_stop", {"index": 0})]
    delta: dict[str, Any] = {"delta": {"stop_reason": "end_turn", "stop_sequence": None}}
    if usage:
        delta["usage"] = {"output_tokens": COMPLETION_TOKENS}
    out += [event("message_delta", delta), event("message_stop", {})]
    return [part.encode() for part in out]


def _gemini(body: dict[str, Any], *, usage: bool, garbage: bool, bad_json: bool,
            error_mid: bool) -> list[bytes]:
    def chunk(text: str, finish: str | None = None) -> str:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]},
                                     "index": 0}
        data: dict[str, Any] = {"candidates": [candidate], "modelVersion": "hostile"}
        if finish:
            candidate["finishReason"] = finish
        if usage:
            counts: dict[str, int] = {"promptTokenCount": PROMPT_TOKENS}
            if finish:
                counts |= {"candidatesTokenCount": COMPLETION_TOKENS,
                           "totalTokenCount": PROMPT_TOKENS + COMPLETION_TOKENS}
            data["usageMetadata"] = counts
        return f"data: {json.dumps(data)}\r\n\r\n"

    out = [chunk(PIECES[0])]
    if garbage:
        out += [": comment\r\n\r\n", "foo: bar\r\n\r\n"]
    if bad_json:
        out.append("data: {this is not json\r\n\r\n")
    if error_mid:
        out.append("data: " + json.dumps({"error": {
            "code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}})
            + "\r\n\r\n")
        return [part.encode() for part in out]
    out.append(chunk(PIECES[1], "STOP"))
    return [part.encode() for part in out]


def _bedrock(body: dict[str, Any], *, usage: bool, garbage: bool, bad_json: bool,
             error_mid: bool) -> list[bytes]:
    out = [aws_event("messageStart", {"role": "assistant"})]
    out += [aws_event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": p}})
            for p in PIECES]
    out += [aws_event("contentBlockStop", {"contentBlockIndex": 0}),
            aws_event("messageStop", {"stopReason": "end_turn"})]
    if usage:
        out.append(aws_event("metadata", {
            "usage": {"inputTokens": PROMPT_TOKENS, "outputTokens": COMPLETION_TOKENS,
                      "totalTokens": PROMPT_TOKENS + COMPLETION_TOKENS},
            "metrics": {"latencyMs": 1}}))
    return out


# -- fixtures and helpers -------------------------------------------------------------
@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, allow_provider_host: Callable[[str, str], None]
         ) -> Iterator[Hostile]:
    for name in ("GOOGLE_GEMINI_BASE_URL", "GOOGLE_GENAI_USE_VERTEXAI", "AWS_PROFILE",
                 "GEMINI_API_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    state = Hostile()
    handler = type("Handler", (_Handler,), {"state": state})
    with serve_http(handler, release=state.released) as port:
        state.port = port
        for provider in PROVIDERS:
            allow_provider_host(provider, state.host(provider))
        yield state


def _config(provider: str, fake: Hostile) -> ModelConfig:
    sdk, model_id, _ = PROVIDERS[provider]
    if importlib.util.find_spec(sdk.partition(".")[0]) is None:
        pytest.skip(f"the {sdk} SDK is not installed")
    region = "us-east-1" if provider == "bedrock" else None
    return ModelConfig(provider=provider, agent_id="writer", model_id=model_id,
                       host=fake.host(provider), region=region)


def _key(provider: str, fake: Hostile) -> ProviderKey:
    return ProviderKey(provider, PROVIDERS[provider][1], fake.host(provider))


def _spec(provider: str, fake: Hostile, retries: int = 0) -> dict[str, Any]:
    _, model_id, _ = PROVIDERS[provider]
    runtime: dict[str, Any] = {
        "provider": provider, "model_id": model_id, "host": fake.host(provider),
        "failure_policy": {"retries": retries, "backoff": "constant", "wait_min": 0,
                           "wait_max": 0}}
    if provider == "bedrock":
        runtime["region"] = "us-east-1"
    return {"version": 0, "name": f"hostile-{provider}", "runtime": runtime,
            "agents": {"writer": {"prompt": "You write."}},
            "pattern": {"type": "chain", "config": {"steps": [
                {"agent": "writer", "input": "hello"}]}}}


async def _run(store: Store, provider: str, fake: Hostile, retries: int = 0
               ) -> tuple[str, Any, list[str]]:
    sid, _ = await start_session(store, load_spec_data(_spec(provider, fake, retries)))

    async def ended() -> bool:
        return (await store.get_session(sid)).status != SessionStatus.RUNNING

    await wait_for(ended, timeout_s=90, what="the session to end")
    record = await store.get_session(sid)
    kinds = [f["type"] for _, f in await store.events(sid)]
    return sid, record, kinds


async def _events_text(store: Store, sid: str) -> str:
    return json.dumps([f for _, f in await store.events(sid)])


MESSAGES = [{"role": "user", "content": [{"text": "hi"}]}]


async def _drain(model: Any) -> list[Any]:
    return [event async for event in model.stream(MESSAGES, None, "sys")]


async def _first_error(model: Any) -> BaseException:
    """The error the provider's model (as build_model made it) raises for one turn."""
    with pytest.raises(Exception) as info:
        await _drain(model)
    return info.value


@pytest.fixture
async def short_timeout_consumer(settings: DurableSettings, store: Store
                                 ) -> AsyncIterator[StepConsumer]:
    """A real in-process worker whose model requests get 1 s each (DURABLE_MODEL_TIMEOUT_S)."""
    c = StepConsumer(settings.model_copy(update={"model_timeout_s": 1.0}), store)
    await c.start()
    yield c
    await c.stop(grace_s=0)


# == throttles: the fleet backs off for what the provider said ==========================
def _http_date(seconds_from_now: float) -> str:
    return email.utils.formatdate(time.time() + seconds_from_now, usegmt=True)


THROTTLES: dict[str, tuple[str, Callable[[], Act], float | None, int | None]] = {
    # id: (provider, the answer, the Retry-After expected (s), the limit named)
    "openai-429-retry-after-seconds": (
        "openai", lambda: error(429, headers={"Retry-After": "30"}), 30.0, None),
    "openai-429-retry-after-http-date": (
        "openai", lambda: error(429, headers={"Retry-After": _http_date(45)}), 45.0, None),
    "openai-429-x-ratelimit": (
        "openai", lambda: error(429, headers={
            "x-ratelimit-limit-requests": "600", "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "20s"}), 20.0, 600),
    "anthropic-429-retry-after": (
        "anthropic", lambda: error(429, headers={
            "retry-after": "25", "anthropic-ratelimit-requests-limit": "50"}), 25.0, 50),
    "anthropic-529-overloaded": ("anthropic", lambda: error(529), None, None),
    "gemini-429-resource-exhausted": ("gemini", lambda: error(429), None, None),
}


@pytest.mark.parametrize("case", sorted(THROTTLES))
async def test_the_real_sdks_throttle_is_read_as_a_throttle_with_its_wait(
        case: str, fake: Hostile) -> None:
    """What CapacityModel sees: the error the provider's real model raises for the
    throttled answer is a throttle, with the wait and the limit the answer named."""
    provider, answer, retry_after, limit = THROTTLES[case]
    model = build_model(_config(provider, fake))
    fake.plan = [answer()]
    exc = await _first_error(model)
    throttle = throttle_of(exc)
    assert throttle is not None, repr(exc)
    if retry_after is None:
        assert throttle.retry_after_s is None
    else:
        assert throttle.retry_after_s == pytest.approx(retry_after, abs=2.0)
    assert throttle.limit_rpm == limit
    assert is_transient(exc) and permanent_cause(exc) is None


GEMINI_RETRY_DELAY = {"error": {
    "code": 429, "status": "RESOURCE_EXHAUSTED",
    "message": "You exceeded your current quota, please check your plan and billing.",
    "details": [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
         "violations": [{"quotaMetric": "generativelanguage.googleapis.com/"
                                        "generate_content_free_tier_requests",
                         "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]}}


async def test_gemini_retry_delay_in_the_body_is_the_fleets_backoff(
        fake: Hostile, store: Store) -> None:
    model = build_model(_config("gemini", fake))
    fake.plan = [error(429, json.dumps(GEMINI_RETRY_DELAY).encode())]
    exc = await _first_error(model)
    throttle = throttle_of(exc)
    assert throttle is not None
    assert throttle.retry_after_s == pytest.approx(37.0)


@pytest.mark.parametrize(("provider", "answer", "backoff_s"), [
    ("openai", lambda: error(429, headers={"Retry-After": "30"}), 30.0),
    ("openai", lambda: error(429, headers={"Retry-After": _http_date(40)}), 40.0),
    ("anthropic", lambda: error(429, headers={"retry-after": "25"}), 25.0),
], ids=["openai-seconds", "openai-http-date", "anthropic-seconds"])
async def test_a_throttle_backs_the_whole_fleet_off_for_its_retry_after(
        provider: str, answer: Callable[[], Act], backoff_s: float, fake: Hostile,
        store: Store) -> None:
    """Through CapacityModel and a real gate on redis: the throttled request waits (it
    does not fail) and the key's shared backoff is what the provider asked for."""
    key = _key(provider, fake)
    model = CapacityModel(build_model(_config(provider, fake)),
                          CapacityGate(store, CapacityPolicy()), key)
    fake.plan = [answer()]
    task = asyncio.create_task(_drain(model))

    async def throttled() -> Any:
        await store.capacity_register(key)
        state = {s.key: s for s in await store.capacity_states()}.get(key)
        return state if state is not None and state.throttled else None

    try:
        state = await wait_for(throttled, timeout_s=30, what="the throttle to be recorded")
        assert (backoff_s - 3) * 1000 <= state.backoff_ms <= backoff_s * 1000
        assert not task.done()  # waiting, not failed
        assert len(fake.requests) == 1
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


@pytest.mark.parametrize(("provider", "answer"), [
    ("openai", lambda: error(429, headers={"Retry-After": "1"})),
    ("anthropic", lambda: error(529)),
    ("gemini", lambda: error(429)),
    ("bedrock", lambda: error(429, headers={"x-amzn-ErrorType": "ThrottlingException"})),
], ids=["openai-429", "anthropic-529", "gemini-429", "bedrock-throttling"])
async def test_a_throttled_step_waits_for_capacity_and_spends_no_attempt(
        provider: str, answer: Callable[[], Act], fake: Hostile, store: Store,
        consumer: StepConsumer) -> None:
    """A whole session on the in-process worker, retries 0: the throttled request is a
    capacity wait (an event says so), asked again, and the step commits on attempt 1."""
    _config(provider, fake)
    fake.plan = [answer()]
    sid, record, kinds = await _run(store, provider, fake, retries=0)
    assert record.status == SessionStatus.COMPLETED, record.error
    assert "capacity_wait" in kinds, kinds
    assert "step_failed" not in kinds and "step_retried" not in kinds
    (result,) = await store.results(sid, 0)
    assert result.response == REPLY
    assert len(fake.requests) == 2


@pytest.mark.parametrize("provider", [
    "openai", "anthropic", "gemini"])
async def test_throttles_beyond_the_in_place_attempts_never_fail_the_step(
        provider: str, fake: Hostile, store: Store, consumer: StepConsumer) -> None:
    """Four throttles in a row (more than call_agent's three attempts), retries 0: each
    is a capacity wait, so the step still commits on its first attempt."""
    _config(provider, fake)
    fake.plan = [error(429, headers={"retry-after-ms": "50"})] * 4
    _, record, kinds = await _run(store, provider, fake, retries=0)
    assert record.status == SessionStatus.COMPLETED, record.error
    assert "step_failed" not in kinds
    assert len(fake.requests) == 5


async def test_a_bedrock_throttle_reaches_the_fleet_on_the_first_refusal(
        fake: Hostile) -> None:
    model = build_model(_config("bedrock", fake))
    fake.plan = [error(429, headers={"x-amzn-ErrorType": "ThrottlingException"})] * 10
    exc = await _first_error(model)
    assert throttle_of(exc) is not None
    assert len(fake.requests) == 1  # one refusal, told to the fleet at once


# == slow first bytes: bounded by the model timeout ====================================
@pytest.mark.parametrize("provider", [*MAIN, "bedrock"])
async def test_headers_then_silence_is_bounded_by_the_timeout_and_retried(
        provider: str, fake: Hostile) -> None:
    """The server accepts, sends 200 and its headers, then waits (until the test ends):
    the attempt ends at its timeout, and the next attempt gets the reply."""
    model = build_model(_config(provider, fake))
    fake.plan = [stream(lambda kind, body: reply(kind, body), hold=True)]
    reply_ = await call_agent(model, system_prompt=None, history=[], prompt="hi",
                              retry=FAST_RETRY, timeout_s=3.0)
    assert reply_.text == REPLY
    assert len(fake.requests) == 2
    assert fake.held == 1


@pytest.mark.parametrize("provider", MAIN)
async def test_a_worker_facing_a_server_that_never_sends_a_body_fails_the_step_in_time(
        provider: str, fake: Hostile, store: Store,
        short_timeout_consumer: StepConsumer) -> None:
    """DURABLE_MODEL_TIMEOUT_S=1: every attempt holds after the headers; the worker is
    not stuck: the step fails, naming the timeout, well before any SDK default."""
    _config(provider, fake)
    fake.plan = [stream(lambda kind, body: reply(kind, body), hold=True)] * 10
    started = time.monotonic()
    _, record, kinds = await _run(store, provider, fake, retries=0)
    assert record.status == SessionStatus.FAILED
    assert "no reply from the model within 1s" in (record.error or ""), record.error
    assert time.monotonic() - started < 60
    assert kinds.count("step_failed") == 1


# == 5xx: transient ===================================================================
@pytest.mark.parametrize("status", [500, 502, 503])
@pytest.mark.parametrize("provider", MAIN)
async def test_server_errors_are_transient_and_retried_in_place(
        provider: str, status: int, fake: Hostile) -> None:
    model = build_model(_config(provider, fake))
    fake.plan = [error(status)]
    reply_ = await call_agent(model, system_prompt=None, history=[], prompt="hi",
                              retry=FAST_RETRY)
    assert reply_.text == REPLY
    assert len(fake.requests) == 2


@pytest.mark.parametrize("provider", MAIN)
async def test_a_gateways_html_502_is_transient(provider: str, fake: Hostile) -> None:
    """A proxy in front of the provider answers 502 with an HTML page, not JSON."""
    model = build_model(_config(provider, fake))
    page = b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
    fake.plan = [error(502, page, content_type="text/html")]
    reply_ = await call_agent(model, system_prompt=None, history=[], prompt="hi",
                              retry=FAST_RETRY)
    assert reply_.text == REPLY
    assert len(fake.requests) == 2


# == 4xx: permanent, naming provider and status, never the key ========================
@pytest.mark.parametrize("status", [400, 401, 404])
@pytest.mark.parametrize("provider", MAIN)
async def test_a_client_error_fails_the_step_at_once_naming_the_status(
        provider: str, status: int, fake: Hostile, store: Store,
        consumer: StepConsumer) -> None:
    _config(provider, fake)
    fake.plan = [error(status)] * 10
    _, record, kinds = await _run(store, provider, fake, retries=3)
    assert record.status == SessionStatus.FAILED
    assert f"permanent provider error, HTTP {status}" in (record.error or ""), record.error
    assert kinds.count("step_failed") == 1 and "step_retried" not in kinds
    assert len(fake.requests) == 1


@pytest.mark.parametrize("provider", MAIN)
async def test_a_client_errors_message_names_the_provider(
        provider: str, fake: Hostile, store: Store, consumer: StepConsumer) -> None:
    _config(provider, fake)
    fake.plan = [error(401)] * 10
    _, record, _ = await _run(store, provider, fake)
    assert record.status == SessionStatus.FAILED
    assert provider in (record.error or "").lower(), record.error


@pytest.mark.parametrize("provider", MAIN)
async def test_a_rejected_keys_echo_never_reaches_the_sessions_error(
        provider: str, fake: Hostile, store: Store, consumer: StepConsumer) -> None:
    _config(provider, fake)
    fake.plan = [error(401, echo_key=True)] * 10
    sid, record, _ = await _run(store, provider, fake)
    assert record.status == SessionStatus.FAILED
    assert "HTTP 401" in (record.error or "")
    key = KEY_OF[provider]
    assert key not in (record.error or "")
    assert key not in await _events_text(store, sid)


async def test_the_key_is_never_in_the_error_when_the_server_does_not_echo_it(
        fake: Hostile, store: Store, consumer: StepConsumer) -> None:
    """The SDKs themselves do not put the key they sent in their errors."""
    for provider in MAIN:
        _config(provider, fake)
        fake.plan = [error(401)] * 10
        sid, record, _ = await _run(store, provider, fake)
        assert record.status == SessionStatus.FAILED
        text = (record.error or "") + await _events_text(store, sid)
        assert not any(key in text for key in KEYS.values()), provider


# == huge or non-JSON bodies ==========================================================
HUGE = 2_000_000


@pytest.mark.parametrize("provider", MAIN)
async def test_a_huge_error_body_is_a_bounded_error(
        provider: str, fake: Hostile, store: Store, consumer: StepConsumer) -> None:
    _config(provider, fake)
    fake.plan = [error(400, "x" * HUGE)] * 10
    sid, record, _ = await _run(store, provider, fake)
    assert record.status == SessionStatus.FAILED
    assert "HTTP 400" in (record.error or "")
    size = len(record.error or "")
    assert size < 20_000, size
    size = len(await _events_text(store, sid))
    assert size < 100_000, size


@pytest.mark.parametrize("provider", MAIN)
async def test_a_non_json_error_body_is_a_clear_permanent_error(
        provider: str, fake: Hostile, store: Store, consumer: StepConsumer) -> None:
    _config(provider, fake)
    fake.plan = [error(400, b"<html>Bad Request</html>", content_type="text/html")] * 10
    _, record, kinds = await _run(store, provider, fake, retries=2)
    assert record.status == SessionStatus.FAILED
    assert "permanent provider error, HTTP 400" in (record.error or ""), record.error
    assert kinds.count("step_failed") == 1


@pytest.mark.parametrize("provider", MAIN)
async def test_a_200_that_is_json_not_a_stream_is_no_reply(provider: str,
                                                           fake: Hostile) -> None:
    """A proxy that ignores `stream` and answers one JSON document: never a reply."""
    model = build_model(_config(provider, fake))
    doc = json.dumps({"id": "x", "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": REPLY},
         "finish_reason": "stop"}]}).encode()
    fake.plan = [error(200, doc)] * FAST_RETRY.attempts
    with pytest.raises(Exception) as info:
        await call_agent(model, system_prompt=None, history=[], prompt="hi",
                         retry=FAST_RETRY)
    assert "stop event" in str(info.value) or provider in str(info.value).lower(), \
        repr(info.value)


# == missing usage ===================================================================
@pytest.mark.parametrize("provider", [*MAIN, "bedrock"])
async def test_a_reply_without_usage_is_still_a_reply(provider: str, fake: Hostile) -> None:
    model = build_model(_config(provider, fake))
    fake.plan = [whole(usage=False)]
    reply_ = await call_agent(model, system_prompt=None, history=[], prompt="hi",
                              retry=FAST_RETRY)
    assert reply_.text == REPLY
    assert reply_.input_tokens >= 0 and reply_.output_tokens >= 0
    assert len(fake.requests) == 1


@pytest.mark.parametrize("provider", MAIN)
async def test_a_step_whose_reply_has_no_usage_commits(
        provider: str, fake: Hostile, store: Store, consumer: StepConsumer) -> None:
    """Through the worker, with the capacity gate (which charges what was reported)."""
    _config(provider, fake)
    fake.plan = [whole(usage=False)]
    sid, record, kinds = await _run(store, provider, fake)
    assert record.status == SessionStatus.COMPLETED, record.error
    (result,) = await store.results(sid, 0)
    assert result.response == REPLY
    assert result.input_tokens >= 0 and result.output_tokens >= 0
    assert "step_failed" not in kinds
    key = _key(provider, fake)
    await store.capacity_register(key)
    state = {s.key: s for s in await store.capacity_states()}[key]
    assert state.in_flight == 0  # the lease went back


# == hostile streams =================================================================
@pytest.mark.parametrize("provider", [
    "openai",
    "anthropic",
    pytest.param("gemini", marks=pytest.mark.xfail(strict=True, reason=(
        "BUG: an SSE comment line (`: comment`, a proxy's keep-alive) makes google-genai "
        "fail: UnknownApiResponseError 'Failed to parse response as JSON', not transient")))])
async def test_sse_comments_and_unknown_fields_are_ignored(provider: str,
                                                           fake: Hostile) -> None:
    model = build_model(_config(provider, fake))
    fake.plan = [whole(garbage=True)]
    reply_ = await call_agent(model, system_prompt=None, history=[], prompt="hi",
                              retry=FAST_RETRY)
    assert reply_.text == REPLY
    assert len(fake.requests) == 1


@pytest.mark.parametrize("provider", MAIN)
async def test_a_data_line_that_is_not_json_is_never_a_reply(
        provider: str, fake: Hostile, store: Store, consumer: StepConsumer) -> None:
    """A whole session: the step fails (nothing committed, no half reply kept) and the
    worker goes on."""
    _config(provider, fake)
    fake.plan = [whole(bad_json=True)] * 20
    sid, record, _ = await _run(store, provider, fake)
    assert record.status == SessionStatus.FAILED, record.error
    assert await store.results(sid, 0) == []
    assert await store.conversation(sid, "writer", 100) == []
    assert PIECES[0] not in (record.error or "")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_data_line_that_is_not_json_fails_naming_the_provider(
        provider: str, fake: Hostile, store: Store, consumer: StepConsumer) -> None:
    _config(provider, fake)
    fake.plan = [whole(bad_json=True)] * 20
    _, record, _ = await _run(store, provider, fake)
    assert record.status == SessionStatus.FAILED
    assert provider in (record.error or "").lower(), record.error


@pytest.mark.parametrize("provider", MAIN)
async def test_an_error_event_mid_stream_is_never_a_reply(
        provider: str, fake: Hostile, store: Store, consumer: StepConsumer) -> None:
    _config(provider, fake)
    fake.plan = [whole(error_mid=True)] * 20
    sid, record, _ = await _run(store, provider, fake)
    assert record.status == SessionStatus.FAILED, record.error
    assert await store.results(sid, 0) == []
    assert await store.conversation(sid, "writer", 100) == []


@pytest.mark.parametrize("provider", MAIN)
async def test_an_overloaded_or_server_error_event_mid_stream_is_retried_in_place(
        provider: str, fake: Hostile) -> None:
    model = build_model(_config(provider, fake))
    fake.plan = [whole(error_mid=True)]
    reply_ = await call_agent(model, system_prompt=None, history=[], prompt="hi",
                              retry=FAST_RETRY)
    assert reply_.text == REPLY
    assert len(fake.requests) == 2
