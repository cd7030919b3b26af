"""One session in the console: its status document, timeline, pattern shape, events
(live over SSE), what its models write as they write it (the live stream, over SSE),
artifacts and checkpoints, and the forms that act on it (pause, resume, cancel, requeue,
answer, fork), each calling the operation the API calls."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, RedirectResponse, Response, StreamingResponse

from strands_durable.access import Role
from strands_durable.api import sse
from strands_durable.api.console import auth
from strands_durable.api.console.auth import ConsoleUser, SignInRequired
from strands_durable.api.console.common import (
    ConsoleError,
    guarded,
    in_namespace,
    page,
    read_form,
    record_action,
    require,
    session_id_of,
)
from strands_durable.api.console.views import PageBudget, conversation_view, shape, timeline
from strands_durable.api.deps import get_live_followers, get_store
from strands_durable.api.routes_sessions import DEFAULT_FOLLOW_BLOCK_MS
from strands_durable.models import EventType
from strands_durable.sessions import control
from strands_durable.sessions.checkpoints import (
    fork_from_checkpoint,
    list_checkpoints,
)
from strands_durable.sessions.history import event_docs
from strands_durable.sessions.requeue import requeue
from strands_durable.sessions.status import session_status
from strands_durable.spec.loader import parse_var_args
from strands_durable.spec.model import parse_spec
from strands_durable.store.codec import STREAM_ID_FORM, is_stream_id
from strands_durable.store.keys import check_name

router = APIRouter(prefix="/ui/sessions", include_in_schema=False)
MAX_EVENTS = 2_000  # read for the timeline; the page lists the latest EVENTS_SHOWN
EVENTS_SHOWN = 100
BUDGETS = ("max_tokens", "max_steps", "max_duration_s")


async def _live_context(request: Request, sid: str) -> dict[str, Any]:
    store = get_store(request)
    # Events first: the feed starts after the last one read here, so whatever changes
    # after it (and so may be missing from the reads below) brings a new event.
    entries = await store.events(sid, count=MAX_EVENTS)
    doc = await session_status(store, sid)
    results = await store.results(sid)
    artifacts = await store.artifacts(sid)
    return {"doc": doc, "rows": timeline(entries, results),
            "shape": shape(doc.pattern_type, doc.pattern_state),
            "events": event_docs(entries[-EVENTS_SHOWN:]),
            "last_event": entries[-1][0] if entries else "0-0",
            "artifacts": sorted((n, len(b.encode())) for n, b in artifacts.items()),
            "checkpoints": await list_checkpoints(store, sid),
            "failed": await store.failed_steps(sid), "budgets": BUDGETS,
            "quoted": lambda name: quote(name, safe=""),
            "event_types": [*(t.value for t in EventType), "event"]}


@router.get("/{sid}")
async def session(request: Request, sid: str) -> Response:
    async def work(user: ConsoleUser) -> Response:
        return page(request, "session.html", **await _live_context(
            request, await in_namespace(request, user, sid)))
    return await guarded(request, work)


@router.get("/{sid}/live")
async def live(request: Request, sid: str) -> Response:
    """The parts of the page that change, re-read when an event arrives."""
    async def work(user: ConsoleUser) -> Response:
        return page(request, "_session_live.html", **await _live_context(
            request, await in_namespace(request, user, sid)))
    return await guarded(request, work)


@router.get("/{sid}/feed")
async def feed(request: Request, sid: str) -> Response:
    """The session's events as server-sent events (the API's stream, cookie-signed)."""
    refused = await _refused_feed(request, sid)
    if refused is not None:
        return refused
    checked, store = session_id_of(sid), get_store(request)
    after = request.headers.get("last-event-id") or request.query_params.get("after") or "0-0"
    if not is_stream_id(after):
        return PlainTextResponse(f"after: not {STREAM_ID_FORM}", status_code=422)
    block_ms = getattr(request.app.state, "follow_block_ms", DEFAULT_FOLLOW_BLOCK_MS)
    return StreamingResponse(sse.event_stream(store, checked, after, block_ms),
                             media_type=sse.MEDIA_TYPE, headers=sse.HEADERS)


CONVERSATION_WINDOW = 400  # newest messages shown per lane


@router.get("/{sid}/conversation")
async def conversation(request: Request, sid: str) -> Response:
    """Per agent (its conversation lane), the conversation its model saw and answered,
    from what is committed: the agent's prompt as the spec writes it, then each message
    since the lane's latest compaction (a compaction's summary included)."""
    async def work(user: ConsoleUser) -> Response:
        checked = await in_namespace(request, user, sid)
        store = get_store(request)
        doc = await session_status(store, checked)
        spec = parse_spec(await store.spec_json(checked))
        lanes, budget = [], PageBudget()
        for lane in await store.conversation_lanes(checked):
            agent = spec.agents.get(lane)
            messages = await store.conversation(checked, lane, CONVERSATION_WINDOW)
            lanes.append({"name": lane, "prompt": agent.prompt if agent else "",
                          "messages": conversation_view(messages, budget)})
        return page(request, "conversation.html", doc=doc, lanes=lanes,
                    window=CONVERSATION_WINDOW)
    return await guarded(request, work)


@router.get("/{sid}/stream")
async def stream(request: Request, sid: str) -> Response:
    """The session's live stream (what its models write) as server-sent events: the API's
    GET /v1/sessions/{id}/stream, cookie-signed."""
    refused = await _refused_feed(request, sid)
    if refused is not None:
        return refused
    checked = session_id_of(sid)
    after = request.headers.get("last-event-id") or "0-0"
    if not is_stream_id(after):
        return PlainTextResponse(f"Last-Event-ID: not {STREAM_ID_FORM}", status_code=422)
    return StreamingResponse(sse.live_stream(get_live_followers(request), checked, after),
                             media_type=sse.MEDIA_TYPE, headers=sse.HEADERS)


async def _refused_feed(request: Request, sid: str) -> Response | None:
    """Why a feed of the session is refused (not signed in, no such session), or None."""
    try:
        user = await auth.current_user(request)
    except SignInRequired:
        return PlainTextResponse("sign in first", status_code=401)
    checked = session_id_of_or_404(sid)
    if checked is None or await get_store(request).session_namespace(checked) \
            != user.namespace:
        return PlainTextResponse("no such session", status_code=404)
    return None


def session_id_of_or_404(sid: str) -> str | None:
    try:
        return session_id_of(sid)
    except ConsoleError:
        return None


@router.get("/{sid}/artifacts/{name:path}")
async def artifact(request: Request, sid: str, name: str) -> Response:
    """An artifact as a download: never rendered in the console's origin (it is text a
    model wrote), so always an attachment, plain text, sniffing off."""
    async def work(user: ConsoleUser) -> Response:
        check_name("artifact name", name)
        checked = await in_namespace(request, user, sid)
        body = (await get_store(request).artifacts(checked)).get(name)
        if body is None:
            raise ConsoleError(404, "artifact_not_found", f"session {sid} has no artifact "
                               f"{name[:200]!r}")
        filename = re.sub(r"[^A-Za-z0-9._-]", "_", name.rsplit("/", 1)[-1])[:100] or "artifact"
        return Response(body.encode(), media_type="text/plain; charset=utf-8", headers={
            "Content-Disposition": f'attachment; filename="{filename}"',
            "X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox"})
    return await guarded(request, work)


def _budgets(form: dict[str, str]) -> dict[str, int]:
    sets = {}
    for name in BUDGETS:
        text = form.get(name, "").strip()
        if not text:
            continue
        # ASCII only: '²' is a digit to str.isdigit but no number to int()
        if not (text.isascii() and text.isdigit()) or not 0 < int(text) < 10**12:
            raise ConsoleError(422, "invalid_budget", f"budgets.{name}: {text[:40]!r} is not "
                               "a whole number from 1")
        sets[name] = int(text)
    return sets


def _variables(form: dict[str, str]) -> dict[str, str]:
    lines = [line for line in form.get("variables", "").splitlines() if line.strip()]
    if len(lines) > 100:
        raise ConsoleError(422, "invalid_variables", "variables: at most 100 lines")
    return parse_var_args(lines, "variables:")


async def _act(request: Request, sid: str, action: str,
               form: dict[str, str]) -> str:
    """Do `action`; the page to show next."""
    store = get_store(request)
    if action == "pause":
        await control.pause(store, sid)
    elif action == "cancel":
        await control.cancel(store, sid)
    elif action == "resume":
        await control.resume(store, sid, variables=_variables(form) or None,
                             budget_sets=_budgets(form) or None)
    elif action == "signal":
        await control.resume(store, sid, hitl_response=form.get("response", ""))
    elif action == "requeue":
        await requeue(store, sid, step=form.get("step") or None)
    elif action == "fork":
        n = form.get("checkpoint", "")
        if not (n.isascii() and n.isdigit()) or not 0 < int(n) <= 10**9:
            raise ConsoleError(422, "invalid_checkpoint", f"checkpoint: {n[:40]!r} is not "
                               "a checkpoint number")
        new = await fork_from_checkpoint(store, sid, int(n), variables=_variables(form),
                                         budget_sets=_budgets(form))
        return f"/ui/sessions/{new}"
    else:
        raise ConsoleError(404, "unknown_action", f"no action {action[:40]!r}")
    return f"/ui/sessions/{sid}"


@router.post("/{sid}/{action}")
async def act(request: Request, sid: str, action: str) -> Response:
    async def work(user: ConsoleUser) -> Response:
        form = await read_form(request)
        auth.check_csrf(user, form.get("csrf"))
        require(user, Role.OPERATE)
        checked = await in_namespace(request, user, sid)
        target = await _act(request, checked, action, form)
        await record_action(request, user, action, checked)
        return RedirectResponse(target, status_code=303)
    return await guarded(request, work, form=True)
