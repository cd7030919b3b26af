"""Who may do what: namespaces, roles and scoped API tokens (pure; the tokens are kept by
store/tokens.py and checked by api/auth.py).

A token is shown once, at creation: `sdt_<id>_<secret>`. Redis keeps its id, role,
namespaces, expiry and the SHA-256 of the whole token, never the token itself; the id in
the token's text finds its record in one read, and the digest is compared in constant
time. `DURABLE_API_TOKEN` stays what it was: an admin token over every namespace.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, Field, model_validator

DEFAULT_NAMESPACE = "default"
NAMESPACE_HEADER = "X-Durable-Namespace"  # the namespace an API request works in
ALL_NAMESPACES = "*"  # a token's namespaces: every one
NAMESPACE_FORM = ("a namespace: 1 to 63 lowercase letters, digits and '-', starting and "
                  "ending with a letter or digit")
_NAMESPACE = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
TOKEN_PREFIX = "sdt_"
_TOKEN = re.compile(r"sdt_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")
_TOKEN_ID = re.compile(r"[0-9a-f]{12}")
TOKEN_ID_FORM = "a token id: 12 lowercase hex digits (as `durable tokens list` shows)"
MAX_TOKEN_NAME_CHARS = 100
MAX_TOKEN_NAMESPACES = 100


class Role(StrEnum):
    """Each role may do what the one before it may, and more."""

    READ = "read"  # sessions, events, output, artifacts, checkpoints
    SUBMIT = "submit"  # + create sessions
    OPERATE = "operate"  # + pause, resume, cancel, answer, fork, requeue, delete, audit
    ADMIN = "admin"  # + the fleet (workers, queue, metrics, dead letters) and tokens

    @property
    def rank(self) -> int:
        return list(Role).index(self)

    def covers(self, needed: Role) -> bool:
        return self.rank >= needed.rank


def is_namespace(value: object) -> bool:
    return isinstance(value, str) and _NAMESPACE.fullmatch(value) is not None


def is_token_id(value: object) -> bool:
    return isinstance(value, str) and _TOKEN_ID.fullmatch(value) is not None


@dataclass(frozen=True)
class Principal:
    """Who a request is: a token's id (never its secret), its role and namespaces."""

    token_id: str
    role: Role
    namespaces: frozenset[str] | None  # None: every namespace

    def may(self, needed: Role) -> bool:
        return self.role.covers(needed)

    def may_use(self, namespace: str) -> bool:
        return self.namespaces is None or namespace in self.namespaces


# No token configured anywhere: the API is open, as it always was without one.
OPEN = Principal(token_id="open", role=Role.ADMIN, namespaces=None)
# DURABLE_API_TOKEN: the fleet's own token.
ENV_ADMIN = Principal(token_id="env", role=Role.ADMIN, namespaces=None)


class TokenRecord(BaseModel):
    """What Redis keeps of a token (the digest, never the token)."""

    id: str
    name: str = ""
    role: Role
    namespaces: list[str]  # ["*"]: every namespace
    digest: str  # sha256 of the whole token text, hex
    created_ms: int
    created_by: str = ""
    expires_ms: int | None = None
    revoked_ms: int | None = None
    revoked_by: str = ""

    def state(self, now_ms: int) -> str:
        if self.revoked_ms is not None:
            return "revoked"
        if self.expires_ms is not None and now_ms >= self.expires_ms:
            return "expired"
        return "active"

    def principal(self) -> Principal:
        every = ALL_NAMESPACES in self.namespaces
        return Principal(token_id=self.id, role=self.role,
                         namespaces=None if every else frozenset(self.namespaces))


class IssuedToken(BaseModel):
    """A token just created: the only time its text exists outside its holder."""

    token: str = Field(repr=False)
    record: TokenRecord


def digest(token_text: str) -> str:
    return hashlib.sha256(token_text.encode("utf-8", "surrogatepass")).hexdigest()


def token_id_of(token_text: str) -> str | None:
    """The id a presented token names, or None when it is not of our form."""
    match = _TOKEN.fullmatch(token_text)
    return match.group(1) if match else None


def matches(record: TokenRecord, token_text: str) -> bool:
    return hmac.compare_digest(record.digest.encode(), digest(token_text).encode())


def check_namespaces(values: list[str]) -> list[str]:
    """A token's namespaces, sorted and unique; ValueError naming the first bad one."""
    if not values:
        raise ValueError("a token needs at least one namespace (or '*' for every one)")
    if len(values) > MAX_TOKEN_NAMESPACES:
        raise ValueError(f"a token may name at most {MAX_TOKEN_NAMESPACES} namespaces")
    for value in values:
        if value != ALL_NAMESPACES and not is_namespace(value):
            raise ValueError(f"{value[:80]!r} is not {NAMESPACE_FORM}, nor '*'")
    return sorted(set(values))


def new_token(role: Role, namespaces: list[str], now_ms: int, *, name: str = "",
              expires_ms: int | None = None, created_by: str = "") -> IssuedToken:
    """A fresh token and its record (ValueError for a bad name, namespace or expiry)."""
    if len(name) > MAX_TOKEN_NAME_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ValueError(f"a token's name is at most {MAX_TOKEN_NAME_CHARS} characters, "
                         "without control characters")
    if expires_ms is not None and expires_ms <= now_ms:
        raise ValueError("a token's expiry must be in the future")
    token_id = secrets.token_hex(6)
    text = f"{TOKEN_PREFIX}{token_id}_{secrets.token_urlsafe(32)}"
    record = TokenRecord(id=token_id, name=name, role=role,
                         namespaces=check_namespaces(namespaces), digest=digest(text),
                         created_ms=now_ms, created_by=created_by, expires_ms=expires_ms)
    return IssuedToken(token=text, record=record)


class AuditEntry(BaseModel):
    """One control action or token change: who (a token id, never its text), what, on
    what, when and from where."""

    id: str = ""  # the audit stream's entry id, once written
    at_ms: int
    actor: str  # token id, `env`, `open`, or `cli:<user>@<host>`
    action: str  # pause, cancel, resume, signal, requeue, delete, submit, token_create, ...
    target: str = ""  # a session id, a token id, a schedule name
    namespace: str = DEFAULT_NAMESPACE
    source: str = ""  # the client's address (HTTP) or `cli`
    detail: str = ""


MAX_QUOTA_SESSIONS = 100_000
MAX_QUOTA_TOKENS = 10**12  # model tokens per day
MAX_WEIGHT = 100  # a namespace's share of the workers' takes (fair dispatch)
MAX_QUOTA_STEPS = 100_000  # steps in flight at once
QUEUED_FOR_QUOTA = "waiting for its namespace's quota of running sessions"


class NamespaceQuota(BaseModel):
    """A namespace's limits: sessions not yet ended (running or paused) at once, model
    tokens per UTC day, or both. Over one,
    a submit is refused (`refuse`, a 429) or its session waits paused until another
    ends (`queue`)."""

    namespace: str
    running_sessions: int | None = Field(default=None, ge=1, le=MAX_QUOTA_SESSIONS)
    # Model tokens (input + output) of the namespace's steps per UTC day.
    tokens_per_day: int | None = Field(default=None, ge=1, le=MAX_QUOTA_TOKENS)
    over: str = Field(default="refuse", pattern="^(refuse|queue)$")
    # Its share of the workers' takes against other namespaces with steps waiting (fair
    # dispatch, store/lua/_lib.lua); None: 1.
    weight: int | None = Field(default=None, ge=1, le=MAX_WEIGHT)
    # Its steps running at once (taken by workers, not yet ended); over it, its steps
    # wait their turn at the take (store/lua/_lib.lua), never failed.
    steps_in_flight: int | None = Field(default=None, ge=1, le=MAX_QUOTA_STEPS)

    @model_validator(mode="after")
    def _some_limit(self) -> NamespaceQuota:
        if self.running_sessions is None and self.tokens_per_day is None \
                and self.weight is None and self.steps_in_flight is None:
            raise ValueError("a quota needs running_sessions, tokens_per_day, weight or "
                             "steps_in_flight")
        return self
