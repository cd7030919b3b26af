"""What a provider's error says in its body, not its status line: Gemini's RetryInfo wait,
an error event inside a 200 stream (Anthropic's overloaded_error, OpenAI's server_error,
Gemini's UNAVAILABLE chunk), a reply stream without usage or with a line that is not
JSON; and Bedrock's client, which must not retry on its own. The SDKs' own error and
stream classes, made here as their streams make them."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from strands_durable.worker.providers import ModelConfig, build_model, is_transient
from strands_durable.worker.providers.sdk import ProviderStreamMalformed, malformed
from strands_durable.worker.providers.transient import (
    MAX_RETRY_AFTER_S,
    permanent_cause,
    throttle_of,
)

# The tests that import the provider SDKs on one xdist process (see test_providers.py).
pytestmark = pytest.mark.xdist_group("provider-sdks")


def _needs(module: str) -> Any:
    return pytest.mark.skipif(importlib.util.find_spec(module) is None,
                              reason=f"{module} is not installed")


# --- Gemini: RetryInfo's retryDelay is the throttle's wait ------------------------------
def _gemini_429(*details: Any, code: int = 429) -> BaseException:
    from google.genai import errors

    body = {"error": {"code": code, "status": "RESOURCE_EXHAUSTED", "message": "quota",
                      "details": list(details)}}
    return errors.ClientError(code, body)


def _retry_info(delay: Any) -> dict[str, Any]:
    return {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}


@_needs("google.genai")
@pytest.mark.parametrize(("delay", "seconds"), [
    ("37s", 37.0), ("1.5s", 1.5), ("0.000000001s", 1e-9), (" 2s ", 2.0), ("0s", 0.0),
    ("999999999999s", MAX_RETRY_AFTER_S),  # bounded as a Retry-After is
])
def test_gemini_retry_delay_is_the_throttles_wait(delay: str, seconds: float) -> None:
    throttle = throttle_of(_gemini_429(_retry_info(delay)))
    assert throttle is not None
    assert throttle.retry_after_s == pytest.approx(seconds)


@_needs("google.genai")
@pytest.mark.parametrize("delay", [
    "37", "-3s", "1e9s", "37 s", "1.5.5s", "PT37S", "s", "", "9" * 40 + "s", 37, None,
    {"seconds": 37}, ["37s"]])
def test_a_retry_delay_that_is_no_duration_is_no_wait(delay: Any) -> None:
    throttle = throttle_of(_gemini_429(_retry_info(delay)))
    assert throttle is not None and throttle.retry_after_s is None


@_needs("google.genai")
def test_the_retry_delay_is_found_among_other_details_and_through_strands() -> None:
    from strands.types.exceptions import ModelThrottledException

    quota = {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []}
    cause = _gemini_429("not a dict", quota, _retry_info("12s"))
    wrapped = ModelThrottledException("quota")  # as Strands' GeminiModel raises it
    wrapped.__cause__ = cause
    throttle = throttle_of(wrapped)
    assert throttle is not None and throttle.retry_after_s == pytest.approx(12.0)


@_needs("google.genai")
def test_only_the_first_details_are_read() -> None:
    padding = [{"@type": "type.googleapis.com/google.rpc.Help"}] * 10_000
    throttle = throttle_of(_gemini_429(*padding, _retry_info("37s")))
    assert throttle is not None and throttle.retry_after_s is None


@_needs("google.genai")
def test_a_retry_delay_on_no_throttle_is_no_throttle() -> None:
    from google.genai import errors

    body = {"error": {"code": 400, "status": "INVALID_ARGUMENT",
                      "details": [_retry_info("37s")]}}
    assert throttle_of(errors.ClientError(400, body)) is None


# --- an error event inside a 200 stream: its body's type decides ------------------------
def _httpx_of(sdk: Any) -> Any:
    import sys

    exceptions = sys.modules[f"{sdk.__name__}._exceptions"]
    return getattr(exceptions, "httpx2", None) or exceptions.httpx


def _anthropic_event_error(kind: str, status: int = 200) -> BaseException:
    """What anthropic's stream raises for `event: error` (its response is the stream's)."""
    import anthropic

    http = _httpx_of(anthropic)
    response = http.Response(status, request=http.Request("POST", "http://127.0.0.1/v1"))
    body = {"type": "error", "error": {"type": kind, "message": "m"}}
    return anthropic.APIStatusError(f"{body}", response=response, body=body)


def _openai_event_error(kind: str | None) -> BaseException:
    """What openai's stream raises for `data: {"error": {...}}`: an APIError, no status."""
    import openai

    request = _httpx_of(openai).Request("POST", "http://127.0.0.1/v1")
    body = None if kind is None else {"message": "m", "type": kind, "code": None}
    return openai.APIError("m", request, body=body)


def _gemini_chunk_error(code: int, status: str) -> BaseException:
    """What google-genai raises for an error chunk: the code is the chunk's, the response
    the stream's 200."""
    import httpx
    from google.genai import errors

    stream = httpx.Response(200, request=httpx.Request("POST", "http://127.0.0.1/x"))
    body = {"error": {"code": code, "message": "m", "status": status}}
    cls = errors.ServerError if code >= 500 else errors.ClientError
    return cls(code, body, stream)


def _stream_error_cases() -> list[Any]:
    """(make the error, transient, a throttle)"""
    cases: list[Any] = []
    if importlib.util.find_spec("anthropic") is not None:
        cases += [
            pytest.param(lambda: _anthropic_event_error("overloaded_error"), True, True,
                         id="anthropic-overloaded"),
            pytest.param(lambda: _anthropic_event_error("api_error"), True, False,
                         id="anthropic-api-error"),
            pytest.param(lambda: _anthropic_event_error("invalid_request_error"), False,
                         False, id="anthropic-invalid-request"),
            # A real status decides, whatever the body says.
            pytest.param(lambda: _anthropic_event_error("overloaded_error", 400), False,
                         False, id="anthropic-400-says-overloaded"),
        ]
    if importlib.util.find_spec("openai") is not None:
        cases += [
            pytest.param(lambda: _openai_event_error("server_error"), True, False,
                         id="openai-server-error"),
            pytest.param(lambda: _openai_event_error("invalid_request_error"), False, False,
                         id="openai-invalid-request"),
            pytest.param(lambda: _openai_event_error(None), False, False,
                         id="openai-no-body"),
        ]
    if importlib.util.find_spec("google.genai") is not None:
        cases += [
            pytest.param(lambda: _gemini_chunk_error(503, "UNAVAILABLE"), True, False,
                         id="gemini-503-unavailable"),
            pytest.param(lambda: _gemini_chunk_error(500, "INTERNAL"), True, False,
                         id="gemini-500-internal"),
            pytest.param(lambda: _gemini_chunk_error(429, "RESOURCE_EXHAUSTED"), True, True,
                         id="gemini-429"),
            pytest.param(lambda: _gemini_chunk_error(400, "INVALID_ARGUMENT"), False, False,
                         id="gemini-400"),
        ]
    return cases


@pytest.mark.parametrize(("make", "transient", "throttle"), _stream_error_cases())
def test_an_error_inside_a_200_stream_is_judged_by_what_it_carries(
        make: Any, transient: bool, throttle: bool) -> None:
    error = make()
    assert is_transient(error) is transient
    assert (throttle_of(error) is not None) is throttle
    if transient:
        assert permanent_cause(error) is None


@_needs("google.genai")
def test_a_gemini_chunks_400_is_permanent_not_the_streams_200() -> None:
    cause = permanent_cause(_gemini_chunk_error(400, "INVALID_ARGUMENT"))
    assert cause is not None and "HTTP 400" in cause


# --- a reply stream with a line that is not JSON names its provider ---------------------
def _decode_error() -> json.JSONDecodeError:
    try:
        json.loads('{secret reply text')
    except json.JSONDecodeError as exc:
        return exc
    raise AssertionError("unreachable")


def test_a_json_error_becomes_a_malformed_stream_naming_the_provider() -> None:
    named = malformed(_decode_error(), "openai", "gpt-x")
    assert isinstance(named, ProviderStreamMalformed)
    assert "openai" in str(named) and "malformed" in str(named)
    assert "secret" not in str(named)  # the line may be the reply's text
    assert malformed(ValueError("other"), "openai", None) is None


@_needs("google.genai")
def test_google_genais_wrapped_json_error_is_named_without_its_raw_line() -> None:
    from google.genai import errors

    wrapper = errors.UnknownApiResponseError(
        "Failed to parse response as JSON. Raw response: {secret reply text")
    wrapper.__cause__ = _decode_error()
    named = malformed(wrapper, "gemini", None)
    assert named is not None and "gemini" in str(named) and "secret" not in str(named)


# --- OpenAI: SSE blocks without data are no events --------------------------------------
@_needs("openai")
def test_the_openai_clients_decoder_skips_blocks_without_data(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from strands_durable.worker.providers.openai import _data_events_only

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    decoder = _data_events_only()(max_retries=0)._make_sse_decoder()
    seen = [decoder.decode(line) for line in [
        "retry: 100", "", "id: 7", "", ": keep-alive", "", "event: ping", "",
        "data: {}", "", ""]]
    events = [sse for sse in seen if sse is not None]
    assert [sse.data for sse in events] == ["{}"]


# --- Anthropic: a reply without usage ---------------------------------------------------
class _Raw:
    """Stands for the SDK's AsyncStream of raw events."""

    def __init__(self, events: list[dict[str, Any]], fail: BaseException | None = None) -> None:
        self.events = events
        self.fail = fail
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[Any]:
        import anthropic
        from anthropic._models import construct_type

        for data in self.events:
            yield construct_type(type_=anthropic.types.RawMessageStreamEvent, value=data)
        if self.fail is not None:
            raise self.fail

    async def close(self) -> None:
        self.closed = True


def _events(start_usage: dict[str, Any] | None,
            delta_usage: dict[str, Any] | None) -> list[dict[str, Any]]:
    message: dict[str, Any] = {"id": "m", "type": "message", "role": "assistant",
                               "model": "c", "content": [], "stop_reason": None}
    if start_usage is not None:
        message["usage"] = start_usage
    delta: dict[str, Any] = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}
    if delta_usage is not None:
        delta["usage"] = delta_usage
    return [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "hi"}},
        {"type": "content_block_stop", "index": 0},
        delta, {"type": "message_stop"}]


async def _final_usage(raw: _Raw) -> dict[str, Any]:
    import anthropic
    from anthropic.lib.streaming import AsyncMessageStream

    from strands_durable.worker.providers.anthropic import _UsageFilled

    stream = AsyncMessageStream(_UsageFilled(raw, "c"), output_format=anthropic.NOT_GIVEN)
    async for _ in stream:
        pass
    message = await stream.get_final_message()
    assert message.content[0].text == "hi"
    usage: dict[str, Any] = message.usage.model_dump()
    return {k: v for k, v in usage.items() if v is not None}


@_needs("anthropic")
@pytest.mark.parametrize(("start", "delta", "expected"), [
    (None, None, {}),  # unknown: Strands then reports none, the gate keeps its estimate
    ({"input_tokens": 13, "output_tokens": 1}, None, {"input_tokens": 13, "output_tokens": 1}),
    (None, {"output_tokens": 5}, {"input_tokens": 0, "output_tokens": 5}),
    ({"input_tokens": 13, "output_tokens": 1}, {"output_tokens": 5},
     {"input_tokens": 13, "output_tokens": 5}),
    ({"input_tokens": 13}, {}, {"input_tokens": 13, "output_tokens": 0}),
])
async def test_an_anthropic_reply_without_usage_is_read_whole(
        start: dict[str, Any] | None, delta: dict[str, Any] | None,
        expected: dict[str, Any]) -> None:
    assert await _final_usage(_Raw(_events(start, delta))) == expected


@_needs("anthropic")
async def test_an_anthropic_line_that_is_not_json_names_the_provider() -> None:
    raw = _Raw(_events(None, None)[:1], fail=_decode_error())
    with pytest.raises(ProviderStreamMalformed, match="anthropic reply stream was malformed"):
        await _final_usage(raw)


# --- Bedrock: botocore sends each request once ------------------------------------------
@_needs("boto3")
def test_bedrocks_client_makes_one_request_per_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIATEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "5")  # the explicit Config wins
    model: Any = build_model(ModelConfig(provider="bedrock", agent_id="writer",
                                         model_id="m", region="us-east-1")).inner
    config = model.client.meta.config
    assert config.retries == {"total_max_attempts": 1, "mode": "standard"}
    assert config.read_timeout == 120  # what Strands sets when given no Config
    assert "strands-agents" in config.user_agent_extra
