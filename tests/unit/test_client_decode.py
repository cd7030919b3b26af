"""The client's pure half (client/wire.py, client/errors.py): requests built, answers
decoded, errors mapped to their kinds, server-sent events parsed, backoff chosen."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from strands_durable.api.schemas import SubmitResponse
from strands_durable.client import AsyncClient, Client, wire
from strands_durable.client.errors import (
    ApiConflict,
    ApiInvalidInput,
    ApiNotFound,
    ApiUnavailable,
    ClientError,
    ConnectionFailed,
    PayloadTooLarge,
    RateLimited,
    ServerError,
    Unauthorized,
)
from strands_durable.client.http_backend import BACKOFF_MAX_S, backoff_s
from strands_durable.errors import Conflict, InvalidInput, NotFound, Unavailable, kind_of
from strands_durable.spec.model import Spec

SID = "0b159fac-0487-470b-baf4-40d28dd52a70"
SPEC_DOC = {"version": 0, "name": "hello", "runtime": {"provider": "scripted"},
            "agents": {"a": {"prompt": "hi"}},
            "pattern": {"type": "chain", "config": {"steps": [{"agent": "a", "input": "x"}]}},
            "outputs": {"artifacts": [{"path": "o.md", "from": "{{ last_response }}"}]}}


def envelope(code: str, message: str = "m", details: object = None) -> bytes:
    return json.dumps({"error": {"code": code, "message": message,
                                 "details": details or {}}}).encode()


@pytest.mark.parametrize(("status", "code", "cls", "kind"), [
    (401, "unauthorized", Unauthorized, InvalidInput),
    (404, "session_not_found", ApiNotFound, NotFound),
    (409, "invalid_transition", ApiConflict, Conflict),
    (413, "payload_too_large", PayloadTooLarge, InvalidInput),
    (422, "invalid_spec", ApiInvalidInput, InvalidInput),
    (405, "method_not_allowed", ApiInvalidInput, InvalidInput),
    (429, "too_many", RateLimited, Unavailable),
    (503, "redis_unavailable", ApiUnavailable, Unavailable),
    (500, "internal_error", ServerError, Unavailable),
])
def test_an_error_envelope_is_raised_as_its_kind(status: int, code: str, cls: type,
                                                 kind: type) -> None:
    error = wire.error_of(status, envelope(code, "said", {"session_id": SID}), {}, "GET /x")
    assert type(error) is cls and kind_of(error) is kind
    assert (error.code, error.status, error.message) == (code, status, "said")
    assert error.details() == {"session_id": SID} and str(error) == "said"


def test_an_answer_without_the_envelope_names_the_call() -> None:
    error = wire.error_of(502, b"<html>Bad Gateway</html>", {}, "GET /v1/sessions")
    assert isinstance(error, ServerError) and error.code == "http_error"
    assert str(error) == "GET /v1/sessions: HTTP 502: <html>Bad Gateway</html>"
    assert wire.error_of(401, b"", {}, "GET /v1/queue").code == "unauthorized"


def test_retry_after_is_read_as_seconds_or_a_date() -> None:
    assert wire.error_of(503, envelope("overloaded"), {"retry-after": "2"}, "x"
                         ).retry_after_s == 2.0
    assert wire.retry_after_s("Sat, 28 Nov 2026 13:00:10 GMT",
                              now=datetime(2026, 11, 28, 13, 0, tzinfo=UTC).timestamp()) == 10
    assert wire.retry_after_s("soon") is None and wire.retry_after_s(None) is None
    assert wire.retry_after_s("-5") == 0.0


def test_backoff_honors_retry_after_and_grows_otherwise() -> None:
    said = ApiUnavailable("overloaded", "busy", 503, retry_after_s=1.5)
    assert backoff_s(1, said) == 1.5
    assert backoff_s(1, ApiUnavailable("x", "y", 503, retry_after_s=3600)) == \
        wire.MAX_RETRY_AFTER_S
    assert backoff_s(1, None) < backoff_s(2, None) < backoff_s(3, None)
    assert backoff_s(30, None) == BACKOFF_MAX_S


async def test_the_token_never_shows() -> None:
    async with AsyncClient("http://127.0.0.1:9", token="s3cret-token", retries=0) as client:
        assert "s3cret" not in repr(client)
        with pytest.raises(ConnectionFailed) as lost:
            await client.health()
    assert "s3cret" not in str(lost.value) + repr(lost.value)
    assert lost.value.status == 0 and isinstance(lost.value, Unavailable)


def test_a_client_error_keeps_its_kinds_code_on_the_class() -> None:
    error = Unauthorized("unauthorized", "missing or wrong bearer token", 401)
    assert isinstance(error, ClientError) and error.code == "unauthorized"
    assert type(error).code == "invalid_input"


def test_a_submit_without_a_key_is_never_retried() -> None:
    call = wire.submit_call("version: 0", variables={"a": 1}, priority=5, provider="scripted")
    assert (call.method, call.path, call.idempotent, call.headers) == \
        ("POST", "/v1/sessions", False, {})
    assert call.body == {"spec": "version: 0", "variables": {"a": 1}, "priority": 5,
                         "provider": "scripted"}
    keyed = wire.submit_call(SPEC_DOC, idempotency_key="k-1")
    assert keyed.idempotent and keyed.headers == {"Idempotency-Key": "k-1"}
    assert keyed.body == {"spec": SPEC_DOC, "variables": {}}


def test_a_spec_travels_as_text_or_a_document(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("version: 0\n")
    assert wire.spec_body(path) == "version: 0\n"
    dumped = wire.spec_body(Spec.model_validate(SPEC_DOC))
    assert dumped == SPEC_DOC  # aliases (`from`) and only what was written
    with pytest.raises(InvalidInput, match="cannot read it"):
        wire.spec_body(tmp_path / "missing.yaml")
    with pytest.raises(InvalidInput, match="not int"):
        wire.spec_body(7)  # type: ignore[arg-type]


def test_paths_quote_what_they_carry() -> None:
    assert wire.session_path(SID, "artifacts", "out/r m.md") == \
        f"/v1/sessions/{SID}/artifacts/out/r%20m.md"
    assert wire.session_path("../x") == "/v1/sessions/..%2Fx"


def test_list_filters_become_query_parameters() -> None:
    call = wire.list_call(status="failed", workflow="w", limit=10, cursor="c",
                          updated_after=datetime(2026, 1, 2, tzinfo=UTC))
    assert call.params == {"limit": "10", "status": "failed", "workflow": "w", "cursor": "c",
                           "updated_after": "2026-01-02T00:00:00+00:00"}


def test_resume_and_requeue_bodies_carry_only_what_changes() -> None:
    assert wire.resume_body() == {}
    assert wire.resume_body(variables={"a": 1}, budgets={"max_tokens": 9},
                            from_checkpoint=2) == \
        {"variables": {"a": 1}, "budgets": {"max_tokens": 9}, "from_checkpoint": 2}
    assert wire.requeue_body(step="step:1") == {"dead": False, "dry_run": False,
                                                "step": "step:1"}


def test_a_2xx_answer_is_decoded_or_refused() -> None:
    body = json.dumps({"session_id": SID, "status": "running", "created": True}).encode()
    assert wire.decode(SubmitResponse, 201, body, "POST /v1/sessions").session_id == SID
    with pytest.raises(ServerError, match="not a SubmitResponse"):
        wire.decode(SubmitResponse, 200, b'{"session_id": 1}', "POST /v1/sessions")


def test_server_sent_events_are_parsed_line_by_line() -> None:
    parser = wire.SseParser()
    lines = ["retry: 2000", "", ": keep-alive", "", "id: 1-0", "event: step_started",
             'data: {"a":1}', "", "event: end", 'data: {"status":"completed"}', ""]
    frames = [f for f in map(parser.feed, lines) if f is not None]
    assert [(f.event, f.id) for f in frames] == [("step_started", "1-0"), ("end", None)]
    assert wire.frame_json(frames[0]) == {"a": 1}
    error = wire.stream_error(wire.SseFrame("error", None, envelope("redis_unavailable")
                                            .decode()))
    assert isinstance(error, ApiUnavailable) and error.code == "redis_unavailable"
    with pytest.raises(ServerError):
        wire.frame_json(wire.SseFrame("x", None, "{not json"))


async def test_a_dropped_event_stream_resumes_after_the_last_event_seen() -> None:
    """The server's side is a stand-in here (tests/integration covers the real one): the
    first stream closes without its `end` frame, as a restarted API's would."""
    asked: list[str | None] = []

    def frame(n: int) -> str:
        return (f"id: {n}-0\nevent: step_completed\n"
                f'data: {{"id": "{n}-0", "type": "step_completed", "step": "step:{n}"}}\n\n')

    def serve(request: httpx.Request) -> httpx.Response:
        asked.append(request.headers.get("Last-Event-ID"))
        assert request.headers["Authorization"] == "Bearer t"
        body = "retry: 2000\n\n" + frame(1) if len(asked) == 1 else \
            frame(2) + 'event: end\ndata: {"status": "completed"}\n\n'
        return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})

    async with AsyncClient("http://api.test", token="t",
                           transport=httpx.MockTransport(serve)) as client:
        steps = [e.step async for e in client.events(SID)]
    assert steps == ["step:1", "step:2"] and asked == [None, "1-0"]


async def test_a_503_is_retried_for_a_get_and_not_for_a_submit() -> None:
    calls: list[str] = []

    def serve(request: httpx.Request) -> httpx.Response:
        calls.append(request.method)
        return httpx.Response(503, content=envelope("overloaded"), headers={"Retry-After": "0"})

    async with AsyncClient("http://api.test", retries=2,
                           transport=httpx.MockTransport(serve)) as client:
        with pytest.raises(ApiUnavailable):
            await client.get(SID)
        assert calls == ["GET"] * 3
        with pytest.raises(Unavailable):
            await client.submit("version: 0")
        assert calls[3:] == ["POST"]


def test_an_unreadable_ca_bundle_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"verify: cannot use .*missing\.pem as CA bundle"):
        Client("https://api.test", verify=tmp_path / "missing.pem")
