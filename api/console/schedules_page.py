"""The console's schedules page (/ui/schedules): every schedule with its next fire time
and its newest runs (a read token), and for an operator its pause, resume, trigger-now
and delete buttons (create and update them with `durable schedules` or /v1/schedules).
Schedules belong to the default namespace."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse

from strands_durable.access import DEFAULT_NAMESPACE, Role
from strands_durable.api.auth import audit
from strands_durable.api.console.auth import ConsoleUser, check_csrf
from strands_durable.api.console.common import ConsoleError, guarded, page, read_form, require
from strands_durable.api.deps import ensure_prepared, get_store
from strands_durable.errors import InvalidId
from strands_durable.models import utc_text
from strands_durable.scheduler.schedule_ops import schedule_views, set_paused, trigger_now
from strands_durable.store.keys import check_schedule_name

router = APIRouter(prefix="/ui", include_in_schema=False)


@router.get("/schedules")
async def schedules(request: Request) -> Response:
    async def work(user: ConsoleUser) -> Response:
        require(user, Role.READ)
        elsewhere = user.namespace != DEFAULT_NAMESPACE
        views = [] if elsewhere else await schedule_views(get_store(request), runs=3)
        return page(request, "schedules.html", schedules=views, utc=utc_text,
                    elsewhere=elsewhere, default_namespace=DEFAULT_NAMESPACE,
                    can_operate=user.principal.may(Role.OPERATE), quoted=_quoted)
    return await guarded(request, work)


def _quoted(name: str) -> str:
    return quote(name, safe="")


@router.post("/schedules/{name}/{action}")
async def act(request: Request, name: str, action: str) -> Response:
    """Pause, resume, trigger now or delete a schedule (an operator, in the default
    namespace), as `durable schedules` does; audited."""
    async def work(user: ConsoleUser) -> Response:
        form = await read_form(request)
        check_csrf(user, form.get("csrf"))
        require(user, Role.OPERATE)
        if user.namespace != DEFAULT_NAMESPACE:
            raise ConsoleError(403, "forbidden", "schedules belong to the default namespace; "
                               "switch to it first")
        try:
            check_schedule_name(name)
        except InvalidId as exc:
            raise ConsoleError(404, "invalid_id", str(exc)) from None
        store = get_store(request)
        detail = ""
        if action in ("pause", "resume"):
            await set_paused(store, name, action == "pause")
        elif action == "trigger":
            await ensure_prepared(request.app)  # the streams exist before a session does
            run = await trigger_now(store, name)
            detail = run.session_id or run.outcome
        elif action == "delete":
            await store.delete_schedule(name)
        else:
            raise ConsoleError(404, "unknown_action", f"no action {action[:40]!r}")
        request.state.principal, request.state.namespace = user.principal, user.namespace
        await audit(request, f"schedule_{action}", name, detail or "console")
        return RedirectResponse("/ui/schedules", status_code=303)
    return await guarded(request, work, form=True)
