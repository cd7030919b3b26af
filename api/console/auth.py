"""The console's sign-in: the same token as the API, typed once into a form, kept as a
signed cookie (HttpOnly, SameSite=Strict), never put in a URL.

The cookie holds a random nonce, an expiry and an HMAC of both keyed by the API token:
rotating DURABLE_API_TOKEN signs everyone out, and any API replica verifies a cookie
another one issued. Each form carries a CSRF token derived from the nonce, which a page
on another site can neither read nor compute. With no token configured the console is
open, as the API is, but forms still need the CSRF token.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from urllib.parse import quote

from fastapi import Request, Response

from strands_durable.api.auth import token_matches

COOKIE = "durable_console"
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


def _key(token: str | None) -> bytes:
    # A key per token: with none set, forging a cookie gains nothing (the console is open)
    # and the CSRF token still depends on the browser's own secret nonce.
    return hmac.new((token or "").encode(), b"durable-console-v1", hashlib.sha256).digest()


def _mac(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def issue(token: str | None, now: float | None = None) -> str:
    """A new cookie value: nonce.expiry.mac (pure but for the nonce and the clock)."""
    nonce = secrets.token_urlsafe(24)
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


def current_user(request: Request) -> ConsoleUser:
    return verify(api_token(request), request.cookies.get(COOKIE))


def check_csrf(user: ConsoleUser, presented: str | None) -> None:
    if not presented or not _same(presented, user.csrf):
        raise BadCsrf()


def token_ok(request: Request, presented: str) -> bool:
    return token_matches(api_token(request), presented)


def set_cookie(request: Request, response: Response) -> None:
    response.set_cookie(COOKIE, issue(api_token(request)), max_age=LIFETIME_S, path="/",
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
