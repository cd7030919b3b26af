"""The clients' schedule methods (/v1/schedules), mixed into `AsyncClient` and `Client`:
kept here so the clients' modules stay a readable size."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from strands_durable.api.schemas_schedules import ScheduleList, ScheduleRun, ScheduleView
from strands_durable.client.wire import SpecInput, spec_body
from strands_durable.webhooks import WebhookSubscription

if TYPE_CHECKING:
    from strands_durable.client.aio import AsyncClient
    from strands_durable.client.backend import Backend
    from strands_durable.client.sync import _LoopThread


def schedule_body(spec: SpecInput | None, **fields: Any) -> dict[str, Any]:
    """A schedule request's JSON: the fields given (None: left out) and the spec."""
    body = {key: value for key, value in fields.items() if value is not None}
    if spec is not None:
        body["spec"] = spec_body(spec)
    return body


def _hook(webhook: WebhookSubscription | None) -> dict[str, Any] | None:
    return webhook.model_dump(exclude_none=True) if webhook is not None else None


class AsyncSchedules:
    _backend: Backend

    async def schedules(self) -> ScheduleList:
        """Every schedule with its next fire times and newest runs (`durable schedules
        list --json`).

        ```python
        for s in (await client.schedules()).items:
            print(s.name, s.cron, s.next_fire_ms[:1])
        ```"""
        return await self._backend.schedules()

    async def schedule(self, name: str) -> ScheduleView:
        """One schedule: definition, next fire times, recent runs (newest first).

        ```python
        runs = (await client.schedule("nightly")).recent_runs
        ```"""
        return await self._backend.schedule(name)

    async def create_schedule(self, name: str, spec: SpecInput, *, cron: str,
                              variables: Mapping[str, Any] | None = None,
                              timezone: str | None = None, jitter_s: int | None = None,
                              overlap: str | None = None,
                              catchup_window_s: int | None = None,
                              provider: str | None = None, paused: bool = False,
                              webhook: WebhookSubscription | None = None) -> ScheduleView:
        """Create a schedule: `spec` (kept as it is now) starts a session at every tick
        of `cron`; `overlap` is skip, buffer_one, cancel_other or allow; `webhook`: where
        each run's events are POSTed.

        ```python
        await client.create_schedule("nightly", Path("report.yaml"), cron="0 2 * * *",
                                     timezone="Europe/Paris", variables={"team": "ops"})
        ```"""
        return await self._backend.create_schedule(schedule_body(
            spec, name=name, cron=cron, variables=dict(variables or {}), timezone=timezone,
            jitter_s=jitter_s, overlap=overlap, catchup_window_s=catchup_window_s,
            provider=provider, paused=paused, webhook=_hook(webhook)))

    async def update_schedule(self, name: str, *, spec: SpecInput | None = None,
                              variables: Mapping[str, Any] | None = None,
                              cron: str | None = None, timezone: str | None = None,
                              jitter_s: int | None = None, overlap: str | None = None,
                              catchup_window_s: int | None = None,
                              provider: str | None = None,
                              webhook: WebhookSubscription | None = None) -> ScheduleView:
        """Change a schedule: a new spec, variables over the stored ones, timing, webhook.

        ```python
        await client.update_schedule("nightly", cron="0 3 * * *")
        ```"""
        return await self._backend.update_schedule(name, schedule_body(
            spec, variables=dict(variables) if variables is not None else None, cron=cron,
            timezone=timezone, jitter_s=jitter_s, overlap=overlap,
            catchup_window_s=catchup_window_s, provider=provider, webhook=_hook(webhook)))

    async def delete_schedule(self, name: str) -> None:
        """Delete a schedule and its run history (its sessions stay).

        ```python
        await client.delete_schedule("nightly")
        ```"""
        await self._backend.delete_schedule(name)

    async def pause_schedule(self, name: str) -> ScheduleView:
        """Stop firing.

        ```python
        assert (await client.pause_schedule("nightly")).paused
        ```"""
        return await self._backend.schedule_action(name, "pause")

    async def resume_schedule(self, name: str) -> ScheduleView:
        """Fire again, from now (missed ticks are not caught up).

        ```python
        await client.resume_schedule("nightly")
        ```"""
        return await self._backend.schedule_action(name, "resume")

    async def trigger_schedule(self, name: str) -> ScheduleRun:
        """Start a run now, whatever the cron, pause or overlap policy say.

        ```python
        sid = (await client.trigger_schedule("nightly")).session_id
        ```"""
        return await self._backend.trigger_schedule(name)


class SyncSchedules:
    _async: AsyncClient
    _thread: _LoopThread

    def schedules(self) -> ScheduleList:
        """Every schedule. `[s.name for s in client.schedules().items]`"""
        return self._thread.run(self._async.schedules())

    def schedule(self, name: str) -> ScheduleView:
        """One schedule. `client.schedule("nightly").recent_runs`"""
        return self._thread.run(self._async.schedule(name))

    def create_schedule(self, name: str, spec: SpecInput, *, cron: str,
                        variables: Mapping[str, Any] | None = None,
                        timezone: str | None = None, jitter_s: int | None = None,
                        overlap: str | None = None, catchup_window_s: int | None = None,
                        provider: str | None = None, paused: bool = False,
                        webhook: WebhookSubscription | None = None) -> ScheduleView:
        """Create a schedule. `client.create_schedule("n", Path("x.yaml"), cron="@daily")`"""
        return self._thread.run(self._async.create_schedule(
            name, spec, cron=cron, variables=variables, timezone=timezone, jitter_s=jitter_s,
            overlap=overlap, catchup_window_s=catchup_window_s, provider=provider,
            paused=paused, webhook=webhook))

    def update_schedule(self, name: str, *, spec: SpecInput | None = None,
                        variables: Mapping[str, Any] | None = None, cron: str | None = None,
                        timezone: str | None = None, jitter_s: int | None = None,
                        overlap: str | None = None, catchup_window_s: int | None = None,
                        provider: str | None = None,
                        webhook: WebhookSubscription | None = None) -> ScheduleView:
        """Change a schedule. `client.update_schedule("n", cron="0 3 * * *")`"""
        return self._thread.run(self._async.update_schedule(
            name, spec=spec, variables=variables, cron=cron, timezone=timezone,
            jitter_s=jitter_s, overlap=overlap, catchup_window_s=catchup_window_s,
            provider=provider, webhook=webhook))

    def delete_schedule(self, name: str) -> None:
        """Delete a schedule. `client.delete_schedule("nightly")`"""
        self._thread.run(self._async.delete_schedule(name))

    def pause_schedule(self, name: str) -> ScheduleView:
        """Stop firing. `client.pause_schedule("nightly")`"""
        return self._thread.run(self._async.pause_schedule(name))

    def resume_schedule(self, name: str) -> ScheduleView:
        """Fire again from now. `client.resume_schedule("nightly")`"""
        return self._thread.run(self._async.resume_schedule(name))

    def trigger_schedule(self, name: str) -> ScheduleRun:
        """Start a run now. `client.trigger_schedule("nightly").session_id`"""
        return self._thread.run(self._async.trigger_schedule(name))
