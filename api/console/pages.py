"""Console pages: sign in and out, the sessions list (filters, paging, live counts) and
the fleet (workers, provider capacity, shards, dead letters with requeue). Every read and write goes
through the same operations the API and the CLI call."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from strands_durable.access import NAMESPACE_FORM, Role, is_namespace
from strands_durable.api.auth import TooManyFailures
from strands_durable.api.capacity_view import capacity_docs, in_force_text, waiting_by_worker
from strands_durable.api.console import auth
from strands_durable.api.console.auth import ConsoleUser
from strands_durable.api.console.common import (
    ConsoleError,
    guarded,
    page,
    read_form,
    require,
    session_id_of,
)
from strands_durable.api.deps import get_settings, get_store
from strands_durable.api.listing import (
    BadCursor,
    ListQuery,
    decode_cursor,
    encode_cursor,
    list_page,
)
from strands_durable.metrics.fleet import parse_fleet
from strands_durable.models import SessionStatus
from strands_durable.sessions.requeue import DeadLetter, requeue
from strands_durable.sessions.status import summary
from strands_durable.store.fleet import list_workers, liveness_window_s, queue_stats

router = APIRouter(prefix="/ui", include_in_schema=False)
PAGE_SIZE = 25
MAX_DEAD_SHOWN = 100  # dead letters listed per shard (the count says how many there are)


@router.get("/login")
async def login_form(request: Request, next: str = "/ui") -> Response:
    if await auth.is_open(request):  # no token configured: nothing to type
        response = RedirectResponse(auth.safe_next(next), status_code=303)
        auth.set_cookie(request, response)
        return response
    return page(request, "login.html", next=auth.safe_next(next), failed=False)


@router.post("/login")
async def login(request: Request) -> Response:
    try:
        form = await read_form(request)
    except ConsoleError as exc:
        return page(request, "error.html", exc.status, code=exc.code, message=exc.message)
    target = auth.safe_next(form.get("next"))
    try:
        signed = await auth.sign_in(request, form.get("token", "")[:512])
    except TooManyFailures as exc:
        return page(request, "error.html", 429, code="too_many_failures",
                    message=f"too many failed sign-ins from this address; try again in "
                    f"{exc.retry_after_s} s")
    if signed is None:
        return page(request, "login.html", 401, next=target, failed=True)
    response = RedirectResponse(target, status_code=303)
    auth.set_cookie(request, response, *signed)
    return response


@router.post("/namespace")
async def switch_namespace(request: Request) -> Response:
    """Look at another namespace (one the token may use)."""
    async def work(user: ConsoleUser) -> Response:
        form = await read_form(request)
        auth.check_csrf(user, form.get("csrf"))
        wanted = form.get("namespace", "").strip()
        if not is_namespace(wanted):
            raise ConsoleError(422, "invalid_namespace",
                               f"namespace: {wanted[:80]!r} is not {NAMESPACE_FORM}")
        if not user.principal.may_use(wanted):
            raise ConsoleError(403, "forbidden",
                               f"your token may not use namespace {wanted!r}")
        response = RedirectResponse("/ui", status_code=303)
        auth.set_namespace(request, response, wanted)
        return response
    return await guarded(request, work, form=True)


@router.post("/logout")
async def logout(request: Request) -> Response:
    async def work(user: ConsoleUser) -> Response:
        auth.check_csrf(user, (await read_form(request)).get("csrf"))
        response = RedirectResponse("/ui/login", status_code=303)
        auth.clear_cookie(response)
        return response
    return await guarded(request, work, form=True)


def _when(text: str, name: str) -> int | None:
    """A datetime-local (or ISO 8601) field as ms; a time without a zone is UTC."""
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ConsoleError(422, "invalid_filter", f"{name}: {text[:40]!r} is not a date "
                           "and time (YYYY-MM-DDTHH:MM)") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp() * 1000)


def _query(params: dict[str, str]) -> ListQuery:
    status = params.get("status") or None
    if status is not None and status not in {s.value for s in SessionStatus}:
        raise ConsoleError(422, "invalid_filter", f"status: {status[:40]!r} is not one of "
                           + ", ".join(s.value for s in SessionStatus))
    workflow = (params.get("workflow") or "").strip()[:256] or None
    try:
        cursor = decode_cursor(params["cursor"]) if params.get("cursor") else None
    except BadCursor as exc:
        raise ConsoleError(422, "invalid_cursor", str(exc)) from None
    return ListQuery(limit=PAGE_SIZE, status=SessionStatus(status) if status else None,
                     workflow=workflow, cursor=cursor,
                     updated_after_ms=_when(params.get("after", ""), "updated after"),
                     updated_before_ms=_when(params.get("before", ""), "updated before"))


@router.get("")
async def sessions(request: Request) -> Response:
    async def work(user: ConsoleUser) -> Response:
        params = {k: v[:512] for k, v in request.query_params.items()}
        result = await list_page(get_store(request),
                                 replace(_query(params), namespace=user.namespace))
        filters = {k: params.get(k, "") for k in ("status", "workflow", "after", "before")}
        next_cursor = encode_cursor(result.next_cursor) if result.next_cursor else None
        return page(request, "sessions.html", items=[summary(r) for r in result.records],
                    filters=filters, next_cursor=next_cursor, statuses=list(SessionStatus),
                    counts=await _counts(request) if user.principal.namespaces is None
                    else {}, paged=bool(params.get("cursor")))
    return await guarded(request, work)


async def _counts(request: Request) -> dict[str, int]:
    store = get_store(request)
    now = int(time.time() * 1000)
    snap = parse_fleet(await store.fleet_replies(now), store.keys, now,
                       get_settings(request).heartbeat_s)
    return {**snap.sessions, "workers alive": snap.workers_alive}


@router.get("/counts")
async def counts(request: Request) -> Response:
    """The counts alone, re-read by the sessions page every few seconds."""
    async def work(user: ConsoleUser) -> Response:
        # The fleet's counts span every namespace: only for a token over all of them.
        counts = await _counts(request) if user.principal.namespaces is None else {}
        return page(request, "_counts.html", counts=counts)
    return await guarded(request, work)


@router.get("/fleet")
async def fleet(request: Request) -> Response:
    async def work(user: ConsoleUser) -> Response:
        require(user, Role.ADMIN, every_namespace=True)
        store = get_store(request)
        window = liveness_window_s(get_settings(request).heartbeat_s)
        letters = []
        for shard in range(store.keys.shards):
            entries = (await store.dead_letters(shard))[:MAX_DEAD_SHOWN]
            letters += [DeadLetter.parse(shard, e, f) for e, f in entries]
        capacity = await capacity_docs(store, get_settings(request))
        return page(request, "fleet.html", workers=await list_workers(
            store, alive_within_s=window), stats=await queue_stats(store), letters=letters,
            window=window, capacity=capacity, capacity_waits=waiting_by_worker(capacity),
            in_force=in_force_text)
    return await guarded(request, work)


@router.post("/fleet/requeue")
async def fleet_requeue(request: Request) -> Response:
    """Requeue one session's dead-lettered step, or every dead letter."""
    async def work(user: ConsoleUser) -> Response:
        form = await read_form(request)
        auth.check_csrf(user, form.get("csrf"))
        require(user, Role.ADMIN, every_namespace=True)
        sid = form.get("session_id") or None
        if sid is not None:
            sid = session_id_of(sid)
        report = await requeue(get_store(request), sid, step=form.get("step") or None,
                               dead=True)
        return page(request, "requeued.html", report=report)
    return await guarded(request, work, form=True)
