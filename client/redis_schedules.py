"""The Redis backend's schedule operations (client/redis_backend.py mixes them in): the
functions /v1/schedules calls (api/routes_schedules.py), checked by its request models."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from strands_durable.api import routes_schedules as ops
from strands_durable.api.schemas_schedules import (
    ScheduleCreate,
    ScheduleList,
    ScheduleRun,
    ScheduleUpdate,
    ScheduleView,
)
from strands_durable.api.submission import Submitted, load_only
from strands_durable.client.errors import ApiInvalidInput
from strands_durable.errors import InvalidId
from strands_durable.settings import DurableSettings
from strands_durable.store.keys import check_schedule_name
from strands_durable.store.store import Store

T = TypeVar("T")


def schedule_name(name: str) -> str:
    """The name checked as the API's path checks it (a 422 naming it)."""
    try:
        return check_schedule_name(name)
    except InvalidId as exc:
        raise ApiInvalidInput(exc.code, str(exc), 422, exc.details()) from None


class RedisSchedules:
    store: Store
    settings: DurableSettings

    if TYPE_CHECKING:
        async def _prepared(self) -> Store: ...
        async def _in_thread(self, work: Callable[[Submitted], T], submitted: Submitted
                             ) -> T: ...

    async def schedules(self) -> ScheduleList:
        return await ops.all_schedules(self.store)

    async def schedule(self, name: str) -> ScheduleView:
        return await ops.one_schedule(self.store, schedule_name(name))

    async def create_schedule(self, body: dict[str, Any]) -> ScheduleView:
        from strands_durable.client.redis_backend import checked

        request = checked(ScheduleCreate, body)
        allow = self.settings.webhook_allow_list
        ops.check_options(request, allow)
        work = ops.spec_work(request)
        assert work is not None  # a create's spec is required
        loaded = await self._in_thread(load_only, work)
        return await ops.create_loaded(await self._prepared(), request, loaded, allow)

    async def update_schedule(self, name: str, body: dict[str, Any]) -> ScheduleView:
        from strands_durable.client.redis_backend import checked

        request = checked(ScheduleUpdate, body)
        allow = self.settings.webhook_allow_list
        ops.check_options(request, allow, await self.store.get_schedule(schedule_name(name)))
        work = ops.spec_work(request)
        loaded = await self._in_thread(load_only, work) if work is not None else None
        return await ops.update_loaded(self.store, name, request, loaded, allow)

    async def delete_schedule(self, name: str) -> None:
        await self.store.delete_schedule(schedule_name(name))

    async def schedule_action(self, name: str, action: str) -> ScheduleView:
        return await ops.pause_or_resume(self.store, schedule_name(name), action == "pause")

    async def trigger_schedule(self, name: str) -> ScheduleRun:
        return await ops.fire_now(await self._prepared(), schedule_name(name))
