"""Token and audit operations, the same for `durable tokens|audit`, the HTTP API and the
Python client: every token change is written to the audit trail of each namespace the
token names (or of `default` for a token over every namespace)."""

from __future__ import annotations

import getpass
import socket

from strands_durable.access import (
    ALL_NAMESPACES,
    DEFAULT_NAMESPACE,
    AuditEntry,
    IssuedToken,
    Role,
    TokenRecord,
    is_token_id,
    new_token,
)
from strands_durable.errors import InvalidId, InvalidInput, NotFound
from strands_durable.models import now_ms
from strands_durable.store.access import TooManyTokens
from strands_durable.store.codec import STREAM_ID_FORM, is_stream_id
from strands_durable.store.store import Store

MAX_EXPIRY_S = 10 * 365 * 86_400
MAX_AUDIT_PAGE = 500


class TokenNotFound(NotFound):
    code = "token_not_found"

    def __init__(self, token_id: str) -> None:
        super().__init__(f"no token {token_id}")
        self.token_id = token_id

    def details(self) -> dict[str, object]:
        return {"token_id": self.token_id}


class TokenRefused(InvalidInput):
    """A token request that cannot be granted as asked (role, namespaces, expiry)."""

    code = "invalid_token_request"


def local_actor(kind: str) -> str:
    """Who an operator's own command acts as in the audit trail (`cli:user@host`): it
    holds no token, it has Redis."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{kind}:{user}@{socket.gethostname()}"[:200]


async def record_action(store: Store, action: str, target: str, *, actor: str,
                        source: str, namespace: str | None = None, detail: str = "") -> None:
    """One entry of a namespace's audit trail: every writer of the trail comes here.
    Without `namespace`, `target` is a session and its namespace is read (read it
    yourself before a delete)."""
    if namespace is None:
        namespace = await store.session_namespace(target) or DEFAULT_NAMESPACE
    await store.add_audit(AuditEntry(at_ms=now_ms(), actor=actor, action=action,
                                     target=target, namespace=namespace, source=source,
                                     detail=detail[:500]))


async def record_schedule_action(store: Store, action: str, name: str, *, actor: str,
                                 source: str, detail: str = "") -> None:
    """A change to a schedule (they belong to the default namespace)."""
    await record_action(store, f"schedule_{action}", name, actor=actor, source=source,
                        namespace=DEFAULT_NAMESPACE, detail=detail)


def _trails(namespaces: list[str]) -> list[str]:
    return [DEFAULT_NAMESPACE] if ALL_NAMESPACES in namespaces else namespaces


async def _record_change(store: Store, action: str, record: TokenRecord, actor: str,
                         source: str) -> None:
    detail = f"{record.role.value} on {', '.join(record.namespaces)}"
    if record.name:
        detail += f" ({record.name})"
    for namespace in _trails(record.namespaces):
        await record_action(store, action, record.id, actor=actor, source=source,
                            namespace=namespace, detail=detail)


async def create_token(store: Store, role: Role | str, namespaces: list[str], *,
                       name: str = "", expires_in_s: float | None = None,
                       actor: str, source: str) -> IssuedToken:
    """A new token (its text is in the answer and nowhere else, ever)."""
    try:
        role = Role(role)
    except ValueError:
        raise TokenRefused(f"role {str(role)[:40]!r} is not one of "
                           + ", ".join(r.value for r in Role)) from None
    if expires_in_s is not None and not 0 < expires_in_s <= MAX_EXPIRY_S:
        raise TokenRefused(f"expiry must be between 1 s and {MAX_EXPIRY_S:,} s from now")
    now = now_ms()
    expires_ms = now + int(expires_in_s * 1000) if expires_in_s is not None else None
    try:
        issued = new_token(role, namespaces, now, name=name, expires_ms=expires_ms,
                           created_by=actor)
        await store.add_token(issued.record)
    except (ValueError, TooManyTokens) as exc:
        raise TokenRefused(str(exc)) from None
    await _record_change(store, "token_create", issued.record, actor, source)
    return issued


async def revoke_token(store: Store, token_id: str, *, actor: str, source: str
                       ) -> TokenRecord:
    """Revoke a token (again: no change). Every API replica refuses it within a second."""
    if not is_token_id(token_id):
        raise InvalidId("token id", token_id, "12 lowercase hex digits")
    record = await store.token(token_id)
    if record is None:
        raise TokenNotFound(token_id)
    if record.revoked_ms is not None:
        return record
    record = record.model_copy(update={"revoked_ms": now_ms(), "revoked_by": actor})
    await store.save_token(record)
    await _record_change(store, "token_revoke", record, actor, source)
    return record


async def list_tokens(store: Store) -> list[TokenRecord]:
    return await store.tokens()


async def audit_page(store: Store, namespace: str, limit: int = 50,
                     before: str | None = None) -> list[AuditEntry]:
    if not 1 <= limit <= MAX_AUDIT_PAGE:
        raise InvalidInput(f"limit must be 1 to {MAX_AUDIT_PAGE}")
    if before is not None and not is_stream_id(before):
        raise InvalidInput(f"before: {before[:40]!r} is not an audit entry id "
                           f"(as `id` of an entry: {STREAM_ID_FORM})")
    return await store.audit_page(namespace, limit, before)

