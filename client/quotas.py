"""The clients' quota methods (/v1/quotas), mixed into `AsyncClient` and `Client`: kept
here so the clients' modules stay a readable size."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from strands_durable.access import NAMESPACE_FORM, is_namespace
from strands_durable.api.schemas_quotas import QuotaOut
from strands_durable.client.errors import ApiInvalidInput

if TYPE_CHECKING:
    from strands_durable.client.aio import AsyncClient
    from strands_durable.client.backend import Backend
    from strands_durable.client.sync import _LoopThread

Quotas = list[QuotaOut]


def quota_namespace(namespace: str) -> str:
    """The namespace checked as the API's path checks it (a 422 naming it)."""
    if not is_namespace(namespace):
        raise ApiInvalidInput("invalid_request", f"namespace: {str(namespace)[:80]!r} is not "
                              f"{NAMESPACE_FORM}", 422, {"field": "namespace"})
    return namespace


def quota_body(running_sessions: Any, tokens_per_day: Any, over: Any,
               weight: Any = None, steps_in_flight: Any = None) -> dict[str, Any]:
    """A PUT /v1/quotas/{namespace} body: the limits given (None: no limit), `over` and
    the weight (None: 1)."""
    body = {"running_sessions": running_sessions, "tokens_per_day": tokens_per_day,
            "over": over, "weight": weight, "steps_in_flight": steps_in_flight}
    return {key: value for key, value in body.items() if value is not None}


class AsyncQuotas:
    _backend: Backend

    async def quotas(self) -> Quotas:
        """Every namespace's quota (those the token covers), with the model tokens its
        steps used today, UTC (`durable quotas list --json`).

        ```python
        for q in await client.quotas():
            print(q.namespace, q.running_sessions, q.tokens_today, q.tokens_per_day)
        ```"""
        return (await self._backend.quotas()).items

    async def quota(self, namespace: str) -> QuotaOut:
        """A namespace's quota and today's tokens; a NotFound without one.

        ```python
        q = await client.quota("team-a")
        print(q.tokens_today, "of", q.tokens_per_day, "tokens today")
        ```"""
        return await self._backend.quota(quota_namespace(namespace))

    async def set_quota(self, namespace: str, *, running_sessions: int | None = None,
                        tokens_per_day: int | None = None, over: str = "refuse",
                        weight: int | None = None, steps_in_flight: int | None = None
                        ) -> QuotaOut:
        """Set a namespace's quota, replacing the one it had (an admin token over every
        namespace): sessions not yet ended, model tokens per UTC day, or both; `over`:
        refuse (429) or queue; `weight`: its share of the workers' takes (fair dispatch,
        1 to 100); `steps_in_flight`: its steps running at once (over it they wait).
        A bad value raises ApiInvalidInput (422) naming it.

        ```python
        await client.set_quota("team-a", running_sessions=50, tokens_per_day=2_000_000,
                               over="queue")
        ```"""
        return await self._backend.set_quota(quota_namespace(namespace), quota_body(
            running_sessions, tokens_per_day, over, weight, steps_in_flight))

    async def delete_quota(self, namespace: str) -> None:
        """Remove a namespace's quota (admin over every namespace); a NotFound without one.

        ```python
        await client.delete_quota("team-a")
        ```"""
        await self._backend.delete_quota(quota_namespace(namespace))


class SyncQuotas:
    _async: AsyncClient
    _thread: _LoopThread

    def quotas(self) -> Quotas:
        """Every namespace's quota, with today's tokens. `[q.namespace for q in client.quotas()]`"""
        return self._thread.run(self._async.quotas())

    def quota(self, namespace: str) -> QuotaOut:
        """A namespace's quota. `client.quota("team-a").tokens_today`"""
        return self._thread.run(self._async.quota(namespace))

    def set_quota(self, namespace: str, *, running_sessions: int | None = None,
                  tokens_per_day: int | None = None, over: str = "refuse",
                  weight: int | None = None, steps_in_flight: int | None = None
                  ) -> QuotaOut:
        """Set a namespace's quota (admin). `client.set_quota("team-a", running_sessions=50)`"""
        return self._thread.run(self._async.set_quota(
            namespace, running_sessions=running_sessions, tokens_per_day=tokens_per_day,
            over=over, weight=weight, steps_in_flight=steps_in_flight))

    def delete_quota(self, namespace: str) -> None:
        """Remove a namespace's quota (admin). `client.delete_quota("team-a")`"""
        self._thread.run(self._async.delete_quota(namespace))
