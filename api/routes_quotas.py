"""Namespaces' quotas (/v1/quotas): the same operations as `durable quotas set|list|delete`
(sessions/quotas.py), each change in the quota's namespace's audit trail.

Reading a quota needs a read token that covers its namespace (the list shows only the
namespaces the token covers); setting and deleting one need an admin token over every
namespace: a quota is the fleet's limit on a tenant, which the tenant's own tokens, admin
included, may not raise. The path's namespace is the request's (api/auth.py): a token
that does not cover it is answered 403, as the X-Durable-Namespace header would be.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Path, Request, Response

from strands_durable.access import Principal
from strands_durable.api.auth import client_address
from strands_durable.api.deps import StoreDep
from strands_durable.api.schemas import error_responses
from strands_durable.api.schemas_quotas import (
    NAMESPACE_PATTERN,
    QuotaList,
    QuotaOut,
    QuotaSetRequest,
)
from strands_durable.api.wiring import api_router
from strands_durable.errors import NotFound
from strands_durable.models import now_ms
from strands_durable.sessions import quotas
from strands_durable.sessions.token_quota import utc_day
from strands_durable.store.store import Store

router = api_router("/v1", tags=["quotas"])
NamespacePath = Annotated[str, Path(min_length=1, max_length=63, pattern=NAMESPACE_PATTERN,
                                    description="The namespace", examples=["team-a"])]


class QuotaNotFound(NotFound):
    """The namespace has no quota."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        super().__init__(f"namespace {namespace!r} has no quota")

    def details(self) -> dict[str, object]:
        return {"namespace": self.namespace}


# -- the operations (the Redis-backed client calls them too) -------------------------
async def quota_list(store: Store, visible: Callable[[str], bool]) -> QuotaList:
    """The quotas of the namespaces `visible` admits, with today's tokens."""
    day = utc_day(now_ms())
    return QuotaList(items=[QuotaOut.of(q, await store.tokens_used(q.namespace, day))
                            for q in await store.quotas() if visible(q.namespace)])


async def quota_view(store: Store, namespace: str) -> QuotaOut:
    quota = await store.quota(namespace)
    if quota is None:
        raise QuotaNotFound(namespace)
    return QuotaOut.of(quota, await store.tokens_used(namespace, utc_day(now_ms())))


async def put_quota(store: Store, namespace: str, body: QuotaSetRequest, *, actor: str,
                    source: str) -> QuotaOut:
    await quotas.set_quota(store, body.quota(namespace), actor=actor, source=source)
    return await quota_view(store, namespace)


async def remove_quota(store: Store, namespace: str, *, actor: str, source: str) -> None:
    if not await quotas.drop_quota(store, namespace, actor=actor, source=source):
        raise QuotaNotFound(namespace)


# -- the routes -------------------------------------------------------------------------
def principal(request: Request) -> Principal:
    found: Principal = request.state.principal
    return found


@router.get("/quotas", response_model=QuotaList)
async def list_quotas(request: Request, store: StoreDep) -> QuotaList:
    """Every namespace's quota that the token covers, with the model tokens its steps
    used today (UTC), as `durable quotas list --json` shows them."""
    return await quota_list(store, principal(request).may_use)


@router.get("/quotas/{namespace}", response_model=QuotaOut,
            responses=error_responses(404, e404="The namespace has no quota"))
async def get_quota(namespace: NamespacePath, store: StoreDep) -> QuotaOut:
    """A namespace's quota and the model tokens its steps used today (UTC)."""
    return await quota_view(store, namespace)


@router.put("/quotas/{namespace}", response_model=QuotaOut)
async def set_quota(namespace: NamespacePath, body: QuotaSetRequest, request: Request,
                    store: StoreDep) -> QuotaOut:
    """Set a namespace's quota, replacing the one it had (admin over every namespace);
    recorded in the namespace's audit trail."""
    return await put_quota(store, namespace, body, actor=principal(request).token_id,
                           source=client_address(request))


@router.delete("/quotas/{namespace}", status_code=204, response_class=Response,
               responses=error_responses(404, e404="The namespace has no quota"))
async def delete_quota(namespace: NamespacePath, request: Request, store: StoreDep
                       ) -> Response:
    """Remove a namespace's quota: its sessions are no longer counted (admin over every
    namespace); recorded in the namespace's audit trail."""
    await remove_quota(store, namespace, actor=principal(request).token_id,
                       source=client_address(request))
    return Response(status_code=204)
