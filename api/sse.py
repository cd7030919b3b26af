"""Server-sent events for GET /v1/sessions/{id}/events?follow=1 (one `event: <type>`
frame per session event) and GET /v1/sessions/{id}/stream (one `event: <kind>` frame per
live entry: model output as written): each frame's stream id is its SSE id, so a client
reconnecting with Last-Event-ID resumes after it; keep-alive comments while nothing
happens, and an `end` frame once the session has ended. A stream opened with a scoped
token ends (an `error` frame) within a second of the token's revocation or expiry."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from strands_durable.api.errors import REDIS_DOWN, error_body
from strands_durable.errors import SessionNotFound
from strands_durable.sessions.history import Idle, event_doc, follow_events
from strands_durable.sessions.live import LiveFollowers
from strands_durable.store.store import Store

log = logging.getLogger("durable.api")
MEDIA_TYPE = "text/event-stream"
# Proxies (nginx) buffer responses unless told not to; caches must not keep a live feed.
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def frame(data: Any, event: str | None = None, event_id: str | None = None) -> bytes:
    """One SSE frame; `data` as compact JSON on a single line, `event` and `event_id`
    without line breaks (an event type read from Redis must not end the frame and forge
    another, an `end` say)."""
    lines = []
    if event_id is not None:
        lines.append(f"id: {_one_line(event_id)}")
    if event is not None:
        lines.append(f"event: {_one_line(event)}")
    lines.append("data: " + json.dumps(data, separators=(",", ":")))
    return ("\n".join(lines) + "\n\n").encode()


def _one_line(value: str) -> str:
    return value.replace("\r", "").replace("\n", "")


KEEP_ALIVE = b": keep-alive\n\n"


async def event_stream(store: Store, session_id: str, after: str,
                       block_ms: int) -> AsyncIterator[bytes]:
    """Frames until the session ends (the caller checked that the session exists)."""
    yield b"retry: 2000\n\n"
    try:
        async for item in follow_events(store, session_id, after, block_ms=block_ms):
            if isinstance(item, Idle):
                yield KEEP_ALIVE
                continue
            entry_id, fields = item
            doc = event_doc(entry_id, fields)
            yield frame(doc, event=doc["type"] or "event", event_id=entry_id)
        status = await _final_status(store, session_id)
        yield frame({"session_id": session_id, "status": status}, event="end")
    except REDIS_DOWN as exc:
        # Headers are gone already: say so in the stream, then close it.
        log.warning("event stream of %s: Redis unreachable (%s)", session_id, exc)
        yield frame(error_body("redis_unavailable", f"cannot reach Redis ({exc})"),
                    event="error")


async def live_stream(followers: LiveFollowers, session_id: str, after: str
                      ) -> AsyncIterator[bytes]:
    """The session's live stream as frames (`event: <kind>`, its stream id as the SSE
    id) until the session has ended, then an `end` frame."""
    yield b"retry: 2000\n\n"
    try:
        async for item in followers.follow(session_id, after):
            if isinstance(item, Idle):
                yield KEEP_ALIVE
                continue
            yield frame(item.model_dump(), event=item.kind, event_id=item.id)
        status = await _final_status(followers.store, session_id)
        yield frame({"session_id": session_id, "status": status}, event="end")
    except REDIS_DOWN as exc:
        log.warning("live stream of %s: Redis unreachable (%s)", session_id, exc)
        yield frame(error_body("redis_unavailable", f"cannot reach Redis ({exc})"),
                    event="error")


async def _final_status(store: Store, session_id: str) -> str:
    try:
        return (await store.get_session(session_id)).status.value
    except SessionNotFound:
        return "deleted"


_DONE = object()


async def while_admitted(frames: AsyncIterator[bytes], admitted: Callable[[], Awaitable[bool]],
                         every_s: float) -> AsyncIterator[bytes]:
    """`frames`, asking `admitted()` at least every `every_s` (an idle stream too): when
    the token was revoked or expired meanwhile, an `error` frame and the end. The frames
    are read by a task of their own, so a blocking read never delays the check."""
    queue: asyncio.Queue[object] = asyncio.Queue(maxsize=64)

    async def pump() -> None:
        try:
            async for item in frames:
                await queue.put(item)
        except Exception as exc:  # re-raised where the response reads it
            await queue.put(exc)
        await queue.put(_DONE)

    task = asyncio.create_task(pump())
    try:
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), every_s)
            except TimeoutError:
                item = None
            if item is _DONE:
                return
            if isinstance(item, Exception):
                raise item
            if not await admitted():
                yield frame(error_body("unauthorized", "the token was revoked or expired"),
                            event="error")
                return
            if isinstance(item, bytes):
                yield item
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
