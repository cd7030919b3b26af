"""Sessions: submit, list, get, events (history or live), artifacts, delete."""

from __future__ import annotations

import mimetypes
from datetime import datetime
from typing import Annotated

from fastapi import Header, Query, Request, Response
from fastapi.responses import StreamingResponse

from strands_durable.api import sse
from strands_durable.api.auth import admitted_stream, audit, namespace_of
from strands_durable.api.deps import (
    LiveFollowersDep,
    RenderStageDep,
    SettingsDep,
    StoreDep,
    ensure_prepared,
)
from strands_durable.api.errors import ApiError
from strands_durable.api.listing import (
    BadCursor,
    ListQuery,
    decode_cursor,
    encode_cursor,
    epoch_ms,
    list_page,
)
from strands_durable.api.schemas import (
    ArtifactInfo,
    ArtifactList,
    ArtifactNamePath,
    EventOut,
    EventPage,
    IdempotencyKeyHeader,
    SessionIdPath,
    SessionPage,
    SubmitRequest,
    SubmitResponse,
    _valid,
    error_responses,
)
from strands_durable.api.submission import Submitted, plan_submitted, with_webhook
from strands_durable.api.wiring import api_router
from strands_durable.models import SessionStatus
from strands_durable.sessions.deletion import delete_session
from strands_durable.sessions.history import event_docs
from strands_durable.sessions.quotas import QuotaExceeded, create_within_quota
from strands_durable.sessions.start import in_namespace, with_priority
from strands_durable.sessions.status import SessionDetail, session_status, summary
from strands_durable.sessions.token_quota import TokensExceeded
from strands_durable.store.codec import STREAM_ID_PATTERN, check_stream_id

router = api_router("/v1/sessions", tags=["sessions"])


# An entry id a client resumes from (a query parameter or Last-Event-ID): 422 naming it
# when Redis would refuse it.
StreamIdCheck = _valid(check_stream_id)
# How long a follower's XREAD blocks before a keep-alive (and a check that the
# session still exists); an app may lower it (tests do).
DEFAULT_FOLLOW_BLOCK_MS = 5_000


def location(session_id: str) -> str:
    return f"/v1/sessions/{session_id}"


@router.post("", status_code=201, response_model=SubmitResponse,
             responses={200: {"model": SubmitResponse,
                              "description": "The Idempotency-Key named an earlier session"},
                        201: {"description": "Created; Location names the session"},
                        **error_responses(
                            409, 413, 503, e409="The Idempotency-Key was used with a "
                            "different request", e503="Redis is unreachable, or the API "
                            "is loading as many specs as it may (Retry-After)")})
async def submit(body: SubmitRequest, request: Request, response: Response, store: StoreDep,
                 stage: RenderStageDep, settings: SettingsDep,
                 idempotency_key: IdempotencyKeyHeader = None) -> SubmitResponse:
    """Submit a workflow. The session and its first steps are stored (one transaction)
    before the answer is sent; an invalid spec stores nothing. An Idempotency-Key stands
    for one request: repeated with the same spec and variables it answers the first
    session (200), with different ones (or another priority) 409."""
    # Loading and planning (first templates rendered) happen in the render stage, off
    # the event loop, and before anything touches Redis: a refused spec (or a full
    # stage) writes no key at all.
    planned = await stage.run(plan_submitted, Submitted(
        body.spec, body.variables, body.provider, body.script, idempotency_key))
    planned = in_namespace(with_priority(planned, body.priority), namespace_of(request))
    planned = with_webhook(planned, body.webhook, settings.webhook_allow_list)
    await ensure_prepared(request.app)
    try:
        sid, created = await create_within_quota(store, planned)
    except QuotaExceeded as exc:
        raise ApiError(429, exc.code, str(exc), exc.details(),
                       headers={"Retry-After": "30"}) from None
    except TokensExceeded as exc:  # the day's tokens: retry after the next UTC midnight
        raise ApiError(429, exc.code, str(exc), exc.details(),
                       headers={"Retry-After": str(exc.retry_after_s)}) from None
    record = await store.get_session(sid)
    if created:
        await audit(request, "submit", sid, planned.workflow_name)
        response.headers["Location"] = location(sid)
    else:
        response.status_code = 200
        response.headers["Content-Location"] = location(sid)
    return SubmitResponse(session_id=sid, status=record.status, created=created)


@router.get("", response_model=SessionPage)
async def list_sessions(
    request: Request,
    store: StoreDep,
    status: SessionStatus | None = None,
    workflow: Annotated[str | None, Query(min_length=1, max_length=256,
                                          description="Exact workflow name")] = None,
    updated_after: Annotated[datetime | None, Query(
        description="ISO 8601; sessions last updated at or after this")] = None,
    updated_before: Annotated[datetime | None, Query(
        description="ISO 8601; sessions last updated at or before this")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=512,
                                        description="next_cursor of the previous page")] = None,
) -> SessionPage:
    """Sessions, most recently updated first."""
    try:
        position = decode_cursor(cursor) if cursor else None
    except BadCursor as exc:
        raise ApiError(422, "invalid_cursor", str(exc), {"cursor": cursor}) from None
    page = await list_page(store, ListQuery(
        limit=limit, status=status, workflow=workflow, cursor=position,
        updated_after_ms=epoch_ms(updated_after), updated_before_ms=epoch_ms(updated_before),
        namespace=namespace_of(request)))
    return SessionPage(items=[summary(r) for r in page.records],
                       next_cursor=encode_cursor(page.next_cursor) if page.next_cursor else None)


@router.get("/{session_id}", response_model=SessionDetail)
async def get_session(session_id: SessionIdPath, store: StoreDep) -> SessionDetail:
    """The status document of `durable status --json`."""
    return await session_status(store, session_id)


@router.get("/{session_id}/events", response_model=EventPage,
            responses={200: {"content": {"text/event-stream": {}},
                             "description": "JSON history, or with ?follow=1 server-sent "
                             "events until the session ends"}})
async def events(
    session_id: SessionIdPath,
    request: Request,
    store: StoreDep,
    follow: Annotated[bool, Query(description="Stream new events (SSE) until the session "
                                  "ends")] = False,
    after: Annotated[str | None, Query(pattern=STREAM_ID_PATTERN,
                                       description="Only events after this id"),
                     StreamIdCheck] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1_000,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID",
                                                pattern=STREAM_ID_PATTERN),
                             StreamIdCheck] = None,
) -> Response | EventPage:
    """The session's events, oldest first."""
    await store.get_session(session_id)  # 404 for an unknown id, before any stream starts
    if follow:
        block_ms = getattr(request.app.state, "follow_block_ms", DEFAULT_FOLLOW_BLOCK_MS)
        # A blocking read must end before the socket timeout takes it for a dead Redis.
        socket_ms = int(request.app.state.settings.redis_socket_timeout_s * 1000)
        block_ms = max(100, min(block_ms, socket_ms - 1000))
        return StreamingResponse(admitted_stream(request, sse.event_stream(
            store, session_id, last_event_id or after or "0-0", block_ms)),
            media_type=sse.MEDIA_TYPE, headers=sse.HEADERS)
    docs = event_docs(await store.events(session_id, after=after or "-", count=limit))
    return EventPage(items=[EventOut.model_validate(d) for d in docs],
                     last_id=docs[-1]["id"] if docs else after)


@router.get("/{session_id}/stream", response_class=StreamingResponse,
            responses={200: {"content": {"text/event-stream": {}},
                             "description": "Server-sent events: the live stream's entries "
                             "(attempt, text, tool, turn_end; data as LiveEntry) until the "
                             "session ends, then `end`"}})
async def stream(
    session_id: SessionIdPath,
    request: Request,
    store: StoreDep,
    followers: LiveFollowersDep,
    after: Annotated[str | None, Query(pattern=STREAM_ID_PATTERN,
                                       description="Only entries after this id"),
                     StreamIdCheck] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID",
                                                pattern=STREAM_ID_PATTERN),
                             StreamIdCheck] = None,
) -> StreamingResponse:
    """What the session's models write, as they write it: text deltas (batched), the tools
    they ask for, each turn's end, and each attempt of a step (with how many turns it
    replays from its journal). A view of a running step, not its record: the committed
    result is. Kept for DURABLE_LIVE_TTL_S after its last write, about DURABLE_LIVE_MAX
    entries per session."""
    await store.get_session(session_id)  # 404 for an unknown id, before any stream starts
    return StreamingResponse(admitted_stream(request, sse.live_stream(
        followers, session_id, last_event_id or after or "0-0")),
        media_type=sse.MEDIA_TYPE, headers=sse.HEADERS)


@router.get("/{session_id}/artifacts", response_model=ArtifactList)
async def artifacts(session_id: SessionIdPath, store: StoreDep) -> ArtifactList:
    """The artifacts a completed session rendered (`outputs.artifacts`)."""
    await store.get_session(session_id)
    found = await store.artifacts(session_id)
    return ArtifactList(items=[ArtifactInfo(name=n, size_bytes=len(body.encode()))
                               for n, body in sorted(found.items())])


@router.get("/{session_id}/artifacts/{name:path}", response_class=Response,
            responses={200: {"content": {"text/plain": {}},
                             "description": "The artifact's content"}})
async def artifact(session_id: SessionIdPath, name: ArtifactNamePath, store: StoreDep
                   ) -> Response:
    """One artifact's content, typed by its name (text/plain by default)."""
    await store.get_session(session_id)
    body = (await store.artifacts(session_id)).get(name)
    if body is None:
        raise ApiError(404, "artifact_not_found",
                       f"session {session_id} has no artifact {name!r}",
                       {"session_id": session_id, "name": name})
    media = mimetypes.guess_type(name)[0] or "text/plain"
    if media.startswith("text/"):
        media += "; charset=utf-8"
    return Response(body.encode(), media_type=media)


@router.delete("/{session_id}", status_code=204, response_class=Response)
async def delete(session_id: SessionIdPath, store: StoreDep, request: Request) -> Response:
    """Delete the session and everything it stored."""
    await delete_session(store, session_id)
    await audit(request, "delete", session_id)
    return Response(status_code=204)

