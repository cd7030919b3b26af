"""What every console page shares: the templates (Jinja2, autoescaped: ids, step keys,
agent names and replies come from specs written by strangers), reading a bounded form,
and turning a refused request into a page that says what and where."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape

from strands_durable.access import Role
from strands_durable.api.auth import ROLE_OF, audit
from strands_durable.api.console.auth import (
    BadCsrf,
    ConsoleUser,
    SignInRequired,
    current_user,
    known_user,
    sign_in_url,
)
from strands_durable.api.errors import ApiError, domain_error
from strands_durable.errors import DurableError, InvalidId
from strands_durable.store.keys import check_session_id
from strands_durable.store.outage import REDIS_DOWN

HERE = Path(__file__).resolve().parent
STATIC = HERE / "static"
MAX_FIELDS = 40
MAX_FIELD_CHARS = 65_536  # a human's answer may be long; nothing else comes near

templates = Environment(loader=FileSystemLoader(HERE / "templates"),
                        autoescape=select_autoescape(["html"]), trim_blocks=True,
                        lstrip_blocks=True)
# The audit page needs the API's role for the audit trail; the navigation shows its link
# to whom has it.
AUDIT_ROLE = ROLE_OF.get("audit", Role.ADMIN)
templates.globals["audit_role"] = AUDIT_ROLE
T = TypeVar("T")


class ConsoleError(Exception):
    """A refused request, shown as a page with its status."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def page(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    user = _user_or_none(request)
    html = templates.get_template(name).render(request=request, user=user,
                                               csrf=user.csrf if user else "", **context)
    return HTMLResponse(html, status_code=status, headers={
        # Our own files only: no inline script, nothing from another origin.
        "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; "
        "form-action 'self'; base-uri 'none'",
        "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin",
        "Cache-Control": "no-store"})


def _user_or_none(request: Request) -> ConsoleUser | None:
    return known_user(request)  # pages shown signed in were guarded, which found it


def require(user: ConsoleUser, needed: Role, *, every_namespace: bool = False) -> None:
    """ConsoleError 403 unless the user's token has `needed` (over every namespace)."""
    principal = user.principal
    if not principal.may(needed) or (every_namespace and principal.namespaces is not None):
        over = " over every namespace" if every_namespace else ""
        raise ConsoleError(403, "forbidden", f"your token's role ({principal.role.value}) "
                           f"may not do this: it needs {needed.value}{over}")


async def record_action(request: Request, user: ConsoleUser, action: str, target: str
                        ) -> None:
    """The console's control actions go to the audit trail as the API's do."""
    request.state.principal, request.state.namespace = user.principal, user.namespace
    await audit(request, action, target, "console")


async def in_namespace(request: Request, user: ConsoleUser, sid: str) -> str:
    """`sid`, unless it is a session of another namespace: 404 then, as for no session
    (which the operation itself answers)."""
    checked = session_id_of(sid)
    found = await request.app.state.store.session_namespace(checked)
    if found is not None and found != user.namespace:
        raise ConsoleError(404, "session_not_found", f"no session {checked}")
    return checked


def session_id_of(value: str) -> str:
    try:
        return check_session_id(value)
    except InvalidId as exc:
        raise ConsoleError(404, "invalid_id", str(exc)) from None


async def read_form(request: Request) -> dict[str, str]:
    """A urlencoded form (what our pages post), bounded in fields and size."""
    kind = request.headers.get("content-type", "").split(";")[0].strip()
    if kind != "application/x-www-form-urlencoded":
        raise ConsoleError(415, "unsupported_media_type",
                           f"form: expected application/x-www-form-urlencoded, got {kind!r}")
    try:
        fields = parse_qs((await request.body()).decode(), keep_blank_values=True,
                          max_num_fields=MAX_FIELDS, strict_parsing=False)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConsoleError(422, "invalid_form", f"form: {exc}") from None
    form = {k: v[-1] for k, v in fields.items()}
    for name, value in form.items():
        if len(value) > MAX_FIELD_CHARS:
            raise ConsoleError(413, "field_too_large", f"form field {name[:40]!r} is "
                               f"{len(value)} characters; the limit is {MAX_FIELD_CHARS}")
    return form


async def guarded(request: Request, work: Callable[[ConsoleUser], Awaitable[Response]],
                  *, form: bool = False) -> Response:
    """Run a page or an action: sign-in, CSRF (for forms) and errors as pages."""
    try:
        user = await current_user(request)
    except SignInRequired:
        if form:
            return page(request, "error.html", 401, code="unauthorized",
                        message="sign in again: your console session ended")
        return RedirectResponse(sign_in_url(request.url.path), status_code=303)
    try:
        return await work(user)
    except BadCsrf:
        return page(request, "error.html", 403, code="csrf_failed",
                    message="this form is not from this browser's console session; "
                    "reload the page and try again")
    except ConsoleError as exc:
        return page(request, "error.html", exc.status, code=exc.code, message=exc.message)
    except ApiError as exc:
        return page(request, "error.html", exc.status, code=exc.code, message=exc.message)
    except DurableError as exc:
        api = domain_error(exc)
        return page(request, "error.html", api.status, code=api.code, message=api.message)
    except REDIS_DOWN as exc:
        return page(request, "error.html", 503, code="redis_unavailable",
                    message=f"cannot reach Redis ({exc})")
