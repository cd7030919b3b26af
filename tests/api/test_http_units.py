"""The HTTP API's pure parts, from tables: error mapping, cursors, limits, SSE frames;
and the envelope of an unexpected error (no Redis needed for any of these)."""

from __future__ import annotations

import base64

import httpx
import pytest
from helpers.api import make_app

from strands_durable.api.errors import ApiError, domain_error, validation_message
from strands_durable.api.listing import (
    MAX_SCORE,
    BadCursor,
    Cursor,
    ListQuery,
    decode_cursor,
    encode_cursor,
)
from strands_durable.api.sse import frame
from strands_durable.api.submission import load_submitted, spec_size
from strands_durable.errors import (
    ConfigError,
    Conflict,
    DurableError,
    InvalidInput,
    InvalidTransition,
    LockNotAcquired,
    SessionNotFound,
    SpecError,
    TemplateError,
)
from strands_durable.planning.artifacts import ArtifactPathError
from strands_durable.sessions.checkpoints import CheckpointNotFound, ForkError
from strands_durable.sessions.control import NothingToResume
from strands_durable.sessions.requeue import NothingToRequeue
from strands_durable.settings import DurableSettings


@pytest.mark.parametrize(("exc", "status", "code"), [
    (SessionNotFound("s1"), 404, "session_not_found"),
    (InvalidTransition("s1", "completed", "pause"), 409, "invalid_transition"),
    (SpecError("spec", "pattern.type", "bad"), 422, "invalid_spec"),
    (TemplateError("steps[0].input", "undefined"), 422, "template_error"),
    (NothingToResume("s1: nothing"), 409, "nothing_to_resume"),
    (NothingToRequeue("s1", "nothing", "step:1"), 409, "nothing_to_requeue"),
    (CheckpointNotFound("s1", 9, 3), 404, "checkpoint_not_found"),
    (ForkError("completed"), 409, "fork_refused"),
    (LockNotAcquired("lock:x"), 409, "session_busy"),
    (ConfigError("shards"), 503, "misconfigured"),
    (InvalidInput("budget override x: not a whole number"), 422, "invalid_input"),
    (Conflict("too many concurrent changes"), 409, "conflict"),
    (ArtifactPathError("out/../../etc"), 422, "invalid_artifact_path"),
    # An error of no kind is the raiser's bug: a 500, never a guess.
    (DurableError("no kind"), 500, "internal_error"),
])
def test_domain_errors_map_to_a_status_and_code(exc: DurableError, status: int,
                                                code: str) -> None:
    api = domain_error(exc)
    assert (api.status, api.code) == (status, code)
    # The domain's own message, but for a lock: its key means nothing to a client.
    assert api.message == str(exc) or code in {"session_busy", "internal_error"}


def test_spec_error_details_name_the_field() -> None:
    api = domain_error(SpecError("spec", "pattern.config.steps[2].input", "undefined 'x'"))
    assert api.details == {"source": "spec", "path": "pattern.config.steps[2].input",
                           "problem": "undefined 'x'"}


def test_validation_message_names_each_location() -> None:
    errors = [{"loc": ["body", "spec"], "msg": "Field required"},
              {"loc": ["query", "limit"], "msg": "too big"}]
    assert validation_message(errors) == "body.spec: Field required; query.limit: too big"
    many = [{"loc": ["body", str(i)], "msg": "bad"} for i in range(7)]
    assert validation_message(many).endswith("(and 2 more)")


@pytest.mark.parametrize("cursor", [Cursor(0, "a"), Cursor(1795242822308, "42c0-x"),
                                    Cursor(MAX_SCORE, "\U0010ffff")])
def test_cursors_round_trip(cursor: Cursor) -> None:
    assert decode_cursor(encode_cursor(cursor)) == cursor


def _b64(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


@pytest.mark.parametrize("text", ["", "!!!", "bm9jb2xvbg", encode_cursor(Cursor(1, "a"))[:-3],
                                  "LTE6YQ",  # "-1:a"
                                  _b64("1_000:x"), _b64(" 5:x"), _b64("+5:x"), _b64("٣:x")])
def test_bad_cursors_are_refused(text: str) -> None:
    with pytest.raises(BadCursor):
        decode_cursor(text)


def test_a_page_starts_at_the_lower_of_cursor_and_updated_before() -> None:
    assert ListQuery().start() == Cursor(MAX_SCORE, "\U0010ffff")
    assert ListQuery(updated_before_ms=50).start() == Cursor(50, "\U0010ffff")
    assert ListQuery(updated_before_ms=50, cursor=Cursor(40, "b")).start() == Cursor(40, "b")
    assert ListQuery(updated_before_ms=30, cursor=Cursor(40, "b")).start() == \
        Cursor(30, "\U0010ffff")


def test_spec_size_is_of_the_text_or_its_json() -> None:
    assert spec_size("héllo") == 6
    assert spec_size({"a": [1, 2]}) == len('{"a":[1,2]}')
    with pytest.raises(ApiError) as caught:
        load_submitted("#" * (256 * 1024 + 1))
    assert caught.value.status == 413 and caught.value.details["size_bytes"] == 256 * 1024 + 1


def test_sse_frames() -> None:
    assert frame({"a": 1}, event="step_completed", event_id="1-0") == \
        b'id: 1-0\nevent: step_completed\ndata: {"a":1}\n\n'
    # Data is one line whatever it holds, so a frame cannot be split by its content.
    assert frame({"t": "two\nlines"}).count(b"\n") == 2


async def test_an_unexpected_error_still_answers_the_envelope() -> None:
    app = make_app(DurableSettings(redis_url="redis://127.0.0.1:1/0"))

    async def boom() -> None:
        raise RuntimeError("a bug")

    app.add_api_route("/boom", boom)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as client:
        r = await client.get("/boom")
    assert r.status_code == 500
    assert r.json() == {"error": {"code": "internal_error",
                                  "message": "internal error; see the server log",
                                  "details": {}}}
