"""The Redis backend's quota operations (client/redis_backend.py mixes them in): the
functions /v1/quotas calls (api/routes_quotas.py), checked by its request model, and
recorded in the audit trail as the Python client's (`python:<user>@<host>`)."""

from __future__ import annotations

from typing import Any

from strands_durable.api import routes_quotas as ops
from strands_durable.api.schemas_quotas import QuotaList, QuotaOut, QuotaSetRequest
from strands_durable.client.quotas import quota_namespace
from strands_durable.sessions import access
from strands_durable.store.store import Store


def _every(_: str) -> bool:
    return True  # whoever holds Redis sees every namespace


class RedisQuotas:
    store: Store

    async def quotas(self) -> QuotaList:
        return await ops.quota_list(self.store, _every)

    async def quota(self, namespace: str) -> QuotaOut:
        return await ops.quota_view(self.store, quota_namespace(namespace))

    async def set_quota(self, namespace: str, body: dict[str, Any]) -> QuotaOut:
        from strands_durable.client.redis_backend import checked

        request = checked(QuotaSetRequest, body)
        return await ops.put_quota(self.store, quota_namespace(namespace), request,
                                   actor=access.local_actor("python"), source="python")

    async def delete_quota(self, namespace: str) -> None:
        await ops.remove_quota(self.store, quota_namespace(namespace),
                               actor=access.local_actor("python"), source="python")
