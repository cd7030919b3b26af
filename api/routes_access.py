"""Tokens (admin over every namespace) and the namespace's audit trail (operate), the
same operations as `durable tokens` and `durable audit` (sessions/access.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query, Request, Response

from strands_durable.api.auth import client_address, namespace_of
from strands_durable.api.deps import StoreDep
from strands_durable.api.schemas import error_responses
from strands_durable.api.schemas_access import (
    AuditPage,
    TokenCreated,
    TokenCreateRequest,
    TokenList,
    TokenOut,
)
from strands_durable.api.wiring import api_router
from strands_durable.models import now_ms
from strands_durable.sessions import access
from strands_durable.store.codec import STREAM_ID_PATTERN

router = api_router("/v1", tags=["access"])
TokenIdPath = Annotated[str, Path(min_length=12, max_length=12, pattern=r"^[0-9a-f]{12}$",
                                  description="A token's id (`durable tokens list`)")]


def actor(request: Request) -> str:
    return str(request.state.principal.token_id)


@router.get("/tokens", response_model=TokenList)
async def list_tokens(store: StoreDep) -> TokenList:
    """Every token: id, name, role, namespaces, state; never a token's text."""
    now = now_ms()
    return TokenList(items=[TokenOut.of(r, now) for r in await access.list_tokens(store)])


@router.post("/tokens", status_code=201, response_model=TokenCreated)
async def create_token(body: TokenCreateRequest, request: Request, store: StoreDep
                       ) -> TokenCreated:
    """Create a token. Its text is in this answer only: Redis keeps its digest."""
    issued = await access.create_token(store, body.role, body.namespaces, name=body.name,
                                       expires_in_s=body.expires_in_s, actor=actor(request),
                                       source=client_address(request))
    return TokenCreated(token=issued.token, info=TokenOut.of(issued.record, now_ms()))


@router.delete("/tokens/{token_id}", status_code=204, response_class=Response,
               responses=error_responses(404, e404="No such token"))
async def revoke_token(token_id: TokenIdPath, request: Request, store: StoreDep) -> Response:
    """Revoke a token: every API replica refuses it within a second."""
    await access.revoke_token(store, token_id, actor=actor(request),
                              source=client_address(request))
    return Response(status_code=204)


@router.get("/audit", response_model=AuditPage)
async def audit(request: Request, store: StoreDep,
                limit: Annotated[int, Query(ge=1, le=access.MAX_AUDIT_PAGE)] = 50,
                before: Annotated[str | None, Query(max_length=41, pattern=STREAM_ID_PATTERN,
                                                    description="next_before of the page "
                                                    "before")] = None) -> AuditPage:
    """The namespace's audit trail, newest first: who did what, when and from where."""
    items = await access.audit_page(store, namespace_of(request), limit, before)
    return AuditPage(items=items,
                     next_before=items[-1].id if len(items) == limit else None)
