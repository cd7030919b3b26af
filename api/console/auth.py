"""The console's sign-in: any token the API takes (DURABLE_API_TOKEN or a scoped token),
typed once into a form, kept as a signed cookie (HttpOnly, SameSite=Strict), never put
in a URL.

The cookie holds the token's id and a random nonce, an expiry and an HMAC of both keyed
by the token (DURABLE_API_TOKEN itself, or a scoped token's digest, which only Redis
holds): rotating DURABLE_API_TOKEN signs everyone out, revoking a scoped token signs out
its holders within a second, and any API replica verifies a cookie another one issued.
Each form carries a CSRF token derived from the nonce, which a page on another site can
neither read nor compute. With no token configured at all the console is open, as the
API is, but forms still need the CSRF token. The namespace a signed-in user looks at is
a cookie of its own, checked against the token's namespaces on every request.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field, replace
from urllib.parse import quote

from fastapi import Request, Response

from strands_durable.access import (
    DEFAULT_NAMESPACE,
    ENV_ADMIN,
    OPEN,
    Principal,
    is_namespace,
    is_token_id,
)
from strands_durable.api.auth import principal_of, token_cache

COOKIE = "durable_console"
NAMESPACE_COOKIE = "durable_namespace"
LIFETIME_S = 12 * 3600
# Where a sign-in may send the browser next: our own pages only (no open redirect).
NEXT_PREFIXES = ("/ui", "/docs", "/redoc")


class SignInRequired(Exception):
    """No valid console cookie: pages redirect to the sign-in form, feeds answer 401."""


class BadCsrf(Exception):
    """A form without this browser's CSRF token (another site, or a stale page)."""


@dataclass(frozen=True)
class ConsoleUser:
    nonce: str
    csrf: str
    principal: Principal = field(default=OPEN)
    namespace: str = DEFAULT_NAMESPACE

    @property
    def token_id(self) -> str:
        return self.nonce.partition("~")[0] if "~" in self.nonce else ""


def _key(token: str | None) -> bytes:
    # A key per token: with none set, forging a cookie gains nothing (the console is open)
    # and the CSRF token still depends on the browser's own secret nonce.
    return hmac.new((token or "").encode(), b"durable-console-v1", hashlib.sha256).digest()


def _mac(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def issue(token: str | None, now: float | None = None, token_id: str = "") -> str:
    """A new cookie value: nonce.expiry.mac, the nonce naming the token id as
    `<id>~<random>` (pure but for the nonce and the clock)."""
    nonce = secrets.token_urlsafe(24)
    if token_id:
        nonce = f"{token_id}~{nonce}"
    expiry = int((now if now is not None else time.time()) + LIFETIME_S)
    body = f"{nonce}.{expiry}"
    return f"{body}.{_mac(_key(token), body)}"


def verify(token: str | None, value: str | None, now: float | None = None) -> ConsoleUser:
    """The user a cookie stands for; SignInRequired if it is missing, forged or old."""
    if not value or len(value) > 200:
        raise SignInRequired()
    parts = value.split(".")
    # ASCII digits only: int() cannot read every str.isdigit() digit ('²')
    if len(parts) != 3 or not (parts[1].isascii() and parts[1].isdigit()):
        raise SignInRequired()
    nonce, expiry, mac = parts
    key = _key(token)
    if not _same(mac, _mac(key, f"{nonce}.{expiry}")):
        raise SignInRequired()
    if int(expiry) < (now if now is not None else time.time()):
        raise SignInRequired()
    return ConsoleUser(nonce=nonce, csrf=_mac(key, f"csrf:{nonce}"))


def _same(presented: str, expected: str) -> bool:
    # As bytes: compare_digest raises TypeError for a str with non-ASCII characters.
    return hmac.compare_digest(presented.encode(), expected.encode())


def api_token(request: Request) -> str | None:
    token: str | None = request.app.state.settings.api_token
    return token


async def is_open(request: Request) -> bool:
    """No token configured anywhere: nothing to sign in with."""
    return api_token(request) is None and not await token_cache(request).any_tokens()


async def _signer(request: Request, token_id: str) -> tuple[Principal, str | None]:
    """Who a cookie naming `token_id` stands for, and what its MAC is keyed by;
    SignInRequired when that token no longer admits anyone."""
    if token_id == ENV_ADMIN.token_id and api_token(request) is not None:
        return ENV_ADMIN, api_token(request)
    if token_id == OPEN.token_id and await is_open(request):
        return OPEN, None
    if is_token_id(token_id):
        record = await token_cache(request).record(token_id)
        if record is not None and record.state(int(time.time() * 1000)) == "active":
            return record.principal(), record.digest
    raise SignInRequired()


def _namespace(request: Request, principal: Principal) -> str:
    wanted = request.cookies.get(NAMESPACE_COOKIE, "")
    if is_namespace(wanted) and principal.may_use(wanted):
        return wanted
    if principal.may_use(DEFAULT_NAMESPACE) or principal.namespaces is None:
        return DEFAULT_NAMESPACE
    return sorted(principal.namespaces)[0]


async def current_user(request: Request) -> ConsoleUser:
    """The signed-in user (remembered for the request); SignInRequired otherwise."""
    known: ConsoleUser | None = getattr(request.state, "console_user", None)
    if known is not None:
        return known
    value = request.cookies.get(COOKIE)
    if not value or len(value) > 300:
        raise SignInRequired()
    nonce = value.split(".", 1)[0]
    # Cookies issued before scoped tokens name no id: the token of those days.
    token_id = nonce.partition("~")[0] if "~" in nonce else (
        ENV_ADMIN.token_id if api_token(request) is not None else OPEN.token_id)
    principal, key = await _signer(request, token_id)
    user = verify(key, value)
    user = replace(user, principal=principal, namespace=_namespace(request, principal))
    request.state.console_user = user
    return user


def known_user(request: Request) -> ConsoleUser | None:
    """The user `current_user` found for this request, if it was asked."""
    user: ConsoleUser | None = getattr(request.state, "console_user", None)
    return user


def check_csrf(user: ConsoleUser, presented: str | None) -> None:
    if not presented or not _same(presented, user.csrf):
        raise BadCsrf()


async def sign_in(request: Request, presented: str) -> tuple[Principal, str | None] | None:
    """The principal a typed token stands for and its cookie key; None if it stands for
    no one (counted as a failed sign-in). TooManyFailures when the address is over."""
    principal = await principal_of(request, presented or None)
    if principal is None:
        return None
    if principal.token_id == ENV_ADMIN.token_id:
        return principal, api_token(request)
    if principal.token_id == OPEN.token_id:
        return principal, None
    record = await token_cache(request).record(principal.token_id)
    return (principal, record.digest) if record is not None else None


def set_cookie(request: Request, response: Response, principal: Principal = OPEN,
               key: str | None = None) -> None:
    response.set_cookie(COOKIE, issue(key, token_id=principal.token_id), max_age=LIFETIME_S,
                        path="/", httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")


def set_namespace(request: Request, response: Response, namespace: str) -> None:
    response.set_cookie(NAMESPACE_COOKIE, namespace, max_age=LIFETIME_S, path="/ui",
                        httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")


def clear_cookie(response: Response) -> None:
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")


def safe_next(target: str | None) -> str:
    """Only a path of ours: never another host (`//evil`, `https://...`), never a CRLF."""
    if (not target or len(target) > 512 or not target.startswith(NEXT_PREFIXES)
            or any(c in target for c in "\\\r\n") or target.startswith("//")):
        return "/ui"
    return target


def sign_in_url(next_path: str) -> str:
    return "/ui/login?next=" + quote(safe_next(next_path), safe="/")
