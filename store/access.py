"""Tenancy in Redis: scoped API tokens, each session's namespace, and the audit trail.

Tokens live in one hash (id -> record JSON, the token's digest and never its text), so
every API replica reads the same one: a revocation is seen by the next lookup. The audit
trail is a capped stream per namespace (XADD MAXLEN ~), written after the action it
records succeeded.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

from strands_durable.access import DEFAULT_NAMESPACE, AuditEntry, TokenRecord
from strands_durable.store.codec import as_entries, as_str, range_before
from strands_durable.store.quotas import QuotaOps
from strands_durable.store.script_access import TokenSaveArgs, TokenSaveKeys

AUDIT_MAX = 100_000  # entries kept per namespace (approximately: MAXLEN ~)
MAX_TOKENS = 10_000  # tokens a fleet may hold (revoked ones included, until purged)


class TooManyTokens(Exception):
    pass


class AccessOps(QuotaOps):
    # -- tokens --------------------------------------------------------------------
    async def add_token(self, record: TokenRecord) -> None:
        """Store a new token's record; TooManyTokens past MAX_TOKENS."""
        if await self.redis.hlen(self.keys.tokens()) >= MAX_TOKENS:
            raise TooManyTokens(f"this fleet holds {MAX_TOKENS:,} tokens already; revoke "
                                "and purge some (`durable tokens purge`)")
        await self.redis.hsetnx(self.keys.tokens(), record.id, record.model_dump_json())

    async def token(self, token_id: str) -> TokenRecord | None:
        raw = await self.redis.hget(self.keys.tokens(), token_id)
        return _record(raw) if raw is not None else None

    async def tokens(self) -> list[TokenRecord]:
        raw = await self.redis.hgetall(self.keys.tokens())
        records = [_record(value) for value in raw.values()]
        return sorted((r for r in records if r is not None), key=lambda r: r.created_ms)

    async def any_tokens(self) -> bool:
        return bool(await self.redis.exists(self.keys.tokens()))

    async def save_token(self, record: TokenRecord) -> bool:
        """Rewrite a token's record (revocation): only one that exists."""
        return await self.scripts.token_save(
            keys=TokenSaveKeys(self.keys.tokens()),
            args=TokenSaveArgs(token_id=record.id, record=record.model_dump_json()))

    async def drop_tokens(self, token_ids: Sequence[str]) -> int:
        if not token_ids:
            return 0
        return int(await self.redis.hdel(self.keys.tokens(), *token_ids))

    # -- namespaces ----------------------------------------------------------------
    async def session_namespace(self, session_id: str) -> str | None:
        """The session's namespace; None when there is no such session."""
        namespace, status = await self.redis.hmget(self.keys.meta(session_id),
                                                   ["namespace", "status"])
        if status is None:
            return None
        return as_str(namespace) if namespace else DEFAULT_NAMESPACE

    async def session_labels(self, session_ids: Sequence[str]
                             ) -> list[tuple[str, str] | None]:
        """Each session's (workflow name, namespace); None for one deleted meanwhile."""
        if not session_ids:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for sid in session_ids:
                pipe.hmget(self.keys.meta(sid), ["workflow_name", "namespace"])
            rows = await pipe.execute()
        return [None if name is None else
                (as_str(name), as_str(namespace) if namespace else DEFAULT_NAMESPACE)
                for name, namespace in rows]

    # -- audit ---------------------------------------------------------------------
    async def add_audit(self, entry: AuditEntry) -> str:
        fields = entry.model_dump(exclude={"id"}, exclude_defaults=False)
        eid = await self.redis.xadd(self.keys.audit(entry.namespace),
                                    {k: str(v) for k, v in fields.items()},
                                    maxlen=AUDIT_MAX, approximate=True)
        return as_str(eid)

    async def audit_page(self, namespace: str, count: int, before: str | None = None
                         ) -> list[AuditEntry]:
        """The newest `count` entries of a namespace's trail (older than `before`)."""
        top = range_before(before) if before else "+"
        if top is None:
            return []
        rows = as_entries(await self.redis.xrevrange(self.keys.audit(namespace), top, "-",
                                                     count=count))
        entries = []
        for eid, fields in rows:
            try:
                entries.append(AuditEntry.model_validate({**fields, "id": eid}))
            except ValidationError:
                continue  # not one of ours: skipped, never a 500
        return entries


def _record(raw: bytes | str) -> TokenRecord | None:
    try:
        return TokenRecord.model_validate_json(raw)
    except ValidationError:
        return None  # a damaged record admits no one

