"""The clients' token and audit methods (/v1/tokens, /v1/audit), mixed into `AsyncClient`
and `Client`: kept here so the clients' modules stay a readable size."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from strands_durable.api.schemas_access import (
    AuditPage,
    TokenCreated,
    TokenCreateRequest,
    TokenOut,
)

if TYPE_CHECKING:
    from strands_durable.client.aio import AsyncClient
    from strands_durable.client.backend import Backend
    from strands_durable.client.sync import _LoopThread

Tokens = list[TokenOut]


class AsyncAccess:
    _backend: Backend

    async def tokens(self) -> Tokens:
        """Every API token: id, name, role, namespaces, state (never a token's text).
        Needs an admin token over every namespace.

        ```python
        active = [t.id for t in await client.tokens() if t.state == "active"]
        ```"""
        return (await self._backend.tokens()).items

    async def create_token(self, role: str, namespaces: Sequence[str], *, name: str = "",
                           expires_in_s: float | None = None) -> TokenCreated:
        """A new token with `role` (read, submit, operate, admin) in `namespaces`
        (['*']: every one). Its text is in the answer only, this once.

        ```python
        created = await client.create_token("read", ["team-a"], expires_in_s=86_400)
        reader = AsyncClient(url, token=created.token, namespace="team-a")
        ```"""
        return await self._backend.create_token(TokenCreateRequest.model_validate({
            "role": role, "namespaces": list(namespaces), "name": name,
            "expires_in_s": expires_in_s}))

    async def revoke_token(self, token_id: str) -> None:
        """Revoke a token; every API replica refuses it within a second.

        ```python
        await client.revoke_token(created.info.id)
        ```"""
        await self._backend.revoke_token(token_id)

    async def audit(self, *, limit: int = 50, before: str | None = None) -> AuditPage:
        """The namespace's audit trail, newest first (an operate token): who paused,
        cancelled, forked, deleted or changed a token, when and from where.

        ```python
        for entry in (await client.audit(limit=20)).items:
            print(entry.actor, entry.action, entry.target)
        ```"""
        return await self._backend.audit(limit, before)


class SyncAccess:
    _async: AsyncClient
    _thread: _LoopThread

    def tokens(self) -> Tokens:
        """Every API token (admin). `[t.id for t in client.tokens()]`"""
        return self._thread.run(self._async.tokens())

    def create_token(self, role: str, namespaces: Sequence[str], *, name: str = "",
                     expires_in_s: float | None = None) -> TokenCreated:
        """A new token, shown once. `client.create_token("read", ["team-a"]).token`"""
        return self._thread.run(self._async.create_token(
            role, namespaces, name=name, expires_in_s=expires_in_s))

    def revoke_token(self, token_id: str) -> None:
        """Revoke a token. `client.revoke_token(token_id)`"""
        self._thread.run(self._async.revoke_token(token_id))

    def audit(self, *, limit: int = 50, before: str | None = None) -> AuditPage:
        """The namespace's audit trail. `client.audit(limit=20).items`"""
        return self._thread.run(self._async.audit(limit=limit, before=before))
