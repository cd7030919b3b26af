"""Who a request is and what it may do.

A request presents a bearer token: `DURABLE_API_TOKEN` (an admin over every namespace,
compared in constant time, no Redis read), or a scoped token (`sdt_<id>_<secret>`,
core/access.py) looked up by its id and checked against its digest. With neither a
DURABLE_API_TOKEN nor any scoped token, the API is open, as it always was.

Each route needs a role (ROLE_OF, by route name: a route missing there needs admin, so a
new route is closed until someone says otherwise). Fleet-wide routes (admin) need a token
over every namespace. A request works in one namespace (the `X-Durable-Namespace`
header, `default` without it; a quota's path names its own) that its token must cover;
a session of another namespace is answered as one that does not exist. Lookups are
cached for REVOCATION_S, so a revoked or expired token is refused by every replica
within that time. Failed sign-ins are counted per client address: past MAX_FAILURES
within FAILURE_WINDOW_S, that address is answered 429 until the window has passed.
"""

from __future__ import annotations

import hmac
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from strands_durable.access import (
    DEFAULT_NAMESPACE,
    ENV_ADMIN,
    NAMESPACE_FORM,
    NAMESPACE_HEADER,
    OPEN,
    Principal,
    Role,
    TokenRecord,
    is_namespace,
    matches,
    token_id_of,
)
from strands_durable.api import sse
from strands_durable.api.errors import ApiError
from strands_durable.errors import SessionNotFound
from strands_durable.models import now_ms
from strands_durable.sessions.access import record_action
from strands_durable.store.keys import is_session_id
from strands_durable.store.store import Store

# auto_error=False: we answer 401 in our own envelope (FastAPI would send 403).
bearer = HTTPBearer(auto_error=False, description="DURABLE_API_TOKEN or a scoped token "
                    "(`durable tokens create`), when the server has any")
REVOCATION_S = 0.5  # a token lookup is reused this long: revocations apply within it
MAX_FAILURES = 20
FAILURE_WINDOW_S = 60.0
MAX_TRACKED_ADDRESSES = 10_000

# The role each route needs, by route (function) name. Missing: admin.
ROLE_OF: dict[str, Role] = {
    # sessions
    "list_sessions": Role.READ, "get_session": Role.READ, "events": Role.READ,
    "stream": Role.READ, "artifacts": Role.READ, "artifact": Role.READ,
    "checkpoints": Role.READ, "checkpoint": Role.READ, "export_session": Role.READ,
    "submit": Role.SUBMIT,
    "pause": Role.OPERATE, "cancel": Role.OPERATE, "resume": Role.OPERATE,
    "signal": Role.OPERATE, "requeue": Role.OPERATE, "delete": Role.OPERATE,
    "import_session": Role.OPERATE,
    # the namespace's audit trail (tokens: admin over every namespace)
    "audit": Role.OPERATE,
    # schedules (scheduler/schedules)
    "list_schedules": Role.READ, "get_schedule": Role.READ,
    "create_schedule": Role.OPERATE, "update_schedule": Role.OPERATE,
    "delete_schedule": Role.OPERATE, "pause_schedule": Role.OPERATE,
    "resume_schedule": Role.OPERATE, "trigger_schedule": Role.OPERATE,
    # namespaces' quotas: read those the token covers; set_quota and delete_quota are
    # not listed (admin over every namespace: a tenant may not raise its own quota)
    "list_quotas": Role.READ, "get_quota": Role.READ,
    # Not listed, so admin over every namespace: the webhook outbox (every namespace's
    # deliveries: list_webhooks, retry_webhook), the fleet, tokens.
}


def token_matches(expected: str | None, presented: str | None) -> bool:
    """Pure: no token configured lets everyone in; otherwise the two must be equal."""
    if expected is None:
        return True
    if presented is None:
        return False
    return hmac.compare_digest(presented.encode(), expected.encode())


class TooManyFailures(Exception):
    def __init__(self, retry_after_s: int) -> None:
        super().__init__(retry_after_s)
        self.retry_after_s = retry_after_s


class FailedSignIns:
    """Failed sign-ins per client address in a sliding window (this replica's count)."""

    def __init__(self, limit: int = MAX_FAILURES, window_s: float = FAILURE_WINDOW_S,
                 max_addresses: int = MAX_TRACKED_ADDRESSES) -> None:
        self.limit, self.window_s, self.max_addresses = limit, window_s, max_addresses
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def check(self, address: str, now: float) -> None:
        """TooManyFailures while `address` is over the limit."""
        failures = self._recent(address, now)
        if failures is not None and len(failures) >= self.limit:
            raise TooManyFailures(max(1, int(failures[0] + self.window_s - now) + 1))

    def failed(self, address: str, now: float) -> None:
        failures = self._recent(address, now)
        if failures is None:
            if len(self._failures) >= self.max_addresses:
                self._failures.popitem(last=False)  # the longest-quiet address goes
            failures = self._failures[address] = deque()
        failures.append(now)
        self._failures.move_to_end(address)

    def _recent(self, address: str, now: float) -> deque[float] | None:
        failures = self._failures.get(address)
        if failures is None:
            return None
        while failures and failures[0] <= now - self.window_s:
            failures.popleft()
        return failures


class TokenCache:
    """Token records (and whether any exists) read at most every REVOCATION_S."""

    def __init__(self, store: Store, ttl_s: float = REVOCATION_S) -> None:
        self.store, self.ttl_s = store, ttl_s
        self._records: dict[str, tuple[float, TokenRecord | None]] = {}
        self._any: tuple[float, bool] = (0.0, False)

    async def any_tokens(self) -> bool:
        until, found = self._any
        if time.monotonic() >= until:
            found = await self.store.any_tokens()
            self._any = (time.monotonic() + self.ttl_s, found)
        return found

    async def record(self, token_id: str) -> TokenRecord | None:
        hit = self._records.get(token_id)
        if hit is not None and time.monotonic() < hit[0]:
            return hit[1]
        record = await self.store.token(token_id)
        if len(self._records) >= MAX_TRACKED_ADDRESSES:
            self._records.clear()
        self._records[token_id] = (time.monotonic() + self.ttl_s, record)
        return record


def client_address(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


def token_cache(request: Request) -> TokenCache:
    return _state_of(request)[0]


def _state_of(request: Request) -> tuple[TokenCache, FailedSignIns]:
    app_state = request.app.state
    cache: TokenCache | None = getattr(app_state, "token_cache", None)
    if cache is None:
        cache = app_state.token_cache = TokenCache(app_state.store)
        app_state.failed_sign_ins = FailedSignIns()
    failures: FailedSignIns = app_state.failed_sign_ins
    return cache, failures


async def principal_of(request: Request, presented: str | None) -> Principal | None:
    """Who `presented` stands for; None when it stands for no one (a wrong, expired or
    revoked token, or none where one is needed). Counts failures; TooManyFailures when
    the client's address is over the limit."""
    settings = request.app.state.settings
    cache, failures = _state_of(request)
    address, now = client_address(request), time.monotonic()
    failures.check(address, now)
    expected: str | None = settings.api_token
    if presented is None:
        if expected is None and not await cache.any_tokens():
            return OPEN
        return None  # not a failed sign-in: nothing was tried
    if expected is not None and token_matches(expected, presented):
        return ENV_ADMIN
    token_id = token_id_of(presented)
    if token_id is not None:
        record = await cache.record(token_id)
        if record is not None and record.state(now_ms()) == "active" \
                and matches(record, presented):
            return record.principal()
    if expected is None and not await cache.any_tokens():
        return OPEN  # an open API ignores whatever token comes, as it always did
    failures.failed(address, now)
    return None


def required_role(request: Request) -> Role:
    route = request.scope.get("route")
    return ROLE_OF.get(getattr(route, "name", ""), Role.ADMIN)


def request_namespace(request: Request) -> str:
    """The namespace a request works in: a path's (/v1/quotas/{namespace}), else the
    X-Durable-Namespace header's, else `default`."""
    in_path = request.path_params.get("namespace")
    if in_path is not None:
        if not is_namespace(in_path):
            raise ApiError(422, "invalid_request", f"namespace: {str(in_path)[:80]!r} is not "
                           f"{NAMESPACE_FORM}", {"field": "namespace"})
        return str(in_path)
    namespace = request.headers.get(NAMESPACE_HEADER, DEFAULT_NAMESPACE)
    if not is_namespace(namespace):
        raise ApiError(422, "invalid_request", f"{NAMESPACE_HEADER}: {namespace[:80]!r} is "
                       f"not {NAMESPACE_FORM}", {"header": NAMESPACE_HEADER})
    return namespace


def unauthorized() -> ApiError:
    return ApiError(401, "unauthorized",
                    "missing, wrong, expired or revoked bearer token "
                    "(Authorization: Bearer <token>)",
                    headers={"WWW-Authenticate": "Bearer"})


async def authenticate(request: Request, presented: str | None) -> Principal:
    try:
        principal = await principal_of(request, presented)
    except TooManyFailures as exc:
        raise ApiError(429, "too_many_failures",
                       f"too many failed sign-ins from this address; retry in "
                       f"{exc.retry_after_s} s", headers={"Retry-After": str(exc.retry_after_s)}
                       ) from None
    if principal is None:
        raise unauthorized()
    return principal


async def require_token(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
) -> None:
    """Every authenticated route: the token, the route's role, the namespace, and a
    session path's namespace. Leaves the principal and namespace on request.state."""
    principal = await authenticate(
        request, credentials.credentials if credentials is not None else None)
    needed = required_role(request)
    if not principal.may(needed) or (needed is Role.ADMIN and principal.namespaces is not None):
        every = " over every namespace" if needed is Role.ADMIN else ""
        raise ApiError(403, "forbidden", f"this token's role ({principal.role.value}) may not "
                       f"do this: it needs {needed.value}{every}",
                       {"needs": needed.value, "token": principal.token_id})
    namespace = request_namespace(request)
    if not principal.may_use(namespace):
        raise ApiError(403, "forbidden", f"this token may not use namespace {namespace!r}",
                       {"namespace": namespace, "token": principal.token_id})
    request.state.principal = principal
    request.state.namespace = namespace
    session_id = request.path_params.get("session_id")
    if is_session_id(session_id):
        found = await request.app.state.store.session_namespace(session_id)
        if found is not None and found != namespace:
            raise SessionNotFound(str(session_id))  # answered as a missing session is


def admitted_stream(request: Request, frames: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """`frames` for as long as the request's token admits it: a scoped token is asked
    again every REVOCATION_S (the fleet's own token and an open API never change)."""
    principal: Principal = getattr(request.state, "principal", OPEN)
    if principal.token_id in (OPEN.token_id, ENV_ADMIN.token_id):
        return frames
    cache = token_cache(request)

    async def admitted() -> bool:
        record = await cache.record(principal.token_id)
        return record is not None and record.state(now_ms()) == "active"

    return sse.while_admitted(frames, admitted, REVOCATION_S)


def namespace_of(request: Request) -> str:
    namespace: str = getattr(request.state, "namespace", DEFAULT_NAMESPACE)
    return namespace


async def audit(request: Request, action: str, target: str = "", detail: str = "") -> None:
    """Record a control action that succeeded, in the request's namespace."""
    principal: Principal = getattr(request.state, "principal", OPEN)
    await record_action(request.app.state.store, action, target, actor=principal.token_id,
                        source=client_address(request), namespace=namespace_of(request),
                        detail=detail)
