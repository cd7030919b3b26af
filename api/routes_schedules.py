"""Schedules over HTTP (/v1/schedules): what `durable schedules ...` does, the same
operations (scheduler/schedule_ops.py). Reading needs the read role; creating, changing,
pausing, resuming, triggering and deleting need operate (api/auth.py ROLE_OF)."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import Depends, Request, Response

from strands_durable.access import DEFAULT_NAMESPACE
from strands_durable.api.auth import audit, namespace_of
from strands_durable.api.deps import RenderStageDep, SettingsDep, StoreDep, ensure_prepared
from strands_durable.api.errors import ApiError
from strands_durable.api.schemas import error_responses
from strands_durable.api.schemas_schedules import (
    ScheduleCreate,
    ScheduleList,
    ScheduleNamePath,
    ScheduleRun,
    ScheduleUpdate,
    ScheduleView,
)
from strands_durable.api.submission import Submitted, load_only
from strands_durable.api.wiring import api_router
from strands_durable.scheduler.schedule_ops import (
    ScheduleOptions,
    checked_options,
    new_schedule,
    schedule_view,
    schedule_views,
    set_paused,
    trigger_now,
    updated_schedule,
    webhook_text,
)
from strands_durable.spec.loader import LoadedSpec
from strands_durable.store.schedules import ScheduleDef
from strands_durable.store.store import Store


async def default_namespace_only(request: Request) -> None:
    """Schedules are the fleet's own and start sessions in the default namespace: a
    request working in another namespace (a namespaced token's) sees none of them."""
    namespace = namespace_of(request)
    if namespace != DEFAULT_NAMESPACE:
        raise ApiError(403, "forbidden", f"schedules live in the {DEFAULT_NAMESPACE!r} "
                       f"namespace, not {namespace!r}", {"namespace": namespace})


router = api_router("/v1/schedules", tags=["schedules"],
                    dependencies=[Depends(default_namespace_only)])
NOT_FOUND = error_responses(404, e404="No schedule by that name")


def options_of(body: ScheduleCreate | ScheduleUpdate, allow: Sequence[str]) -> ScheduleOptions:
    """The body's options; its webhook's URL checked against DURABLE_WEBHOOK_ALLOW."""
    return ScheduleOptions(body.cron, body.timezone, body.jitter_s, body.overlap,
                           body.catchup_window_s, webhook_text(body.webhook, allow))


def spec_work(body: ScheduleCreate | ScheduleUpdate) -> Submitted | None:
    """What the render stage loads (None: an update that keeps the stored spec)."""
    if body.spec is None:
        return None
    return Submitted(body.spec, body.variables, body.provider)


# -- the operations, shared with the client's Redis backend (client/redis_backend.py) --
async def create_loaded(store: Store, body: ScheduleCreate, loaded: LoadedSpec,
                        allow: Sequence[str]) -> ScheduleView:
    made = new_schedule(body.name, loaded, options_of(body, allow))
    await store.create_schedule(made.model_copy(update={"paused": body.paused}))
    return await schedule_view(store, body.name)


async def update_loaded(store: Store, name: str, body: ScheduleUpdate,
                        loaded: LoadedSpec | None, allow: Sequence[str]) -> ScheduleView:
    current = await store.get_schedule(name)
    await store.replace_schedule(updated_schedule(current, loaded, body.variables,
                                                  options_of(body, allow)))
    return await schedule_view(store, name)


async def all_schedules(store: Store) -> ScheduleList:
    return ScheduleList(items=await schedule_views(store))


async def one_schedule(store: Store, name: str) -> ScheduleView:
    return await schedule_view(store, name)


async def pause_or_resume(store: Store, name: str, paused: bool) -> ScheduleView:
    return await set_paused(store, name, paused)


async def fire_now(store: Store, name: str) -> ScheduleRun:
    return await trigger_now(store, name)


def check_options(body: ScheduleCreate | ScheduleUpdate, allow: Sequence[str],
                  current: ScheduleDef | None = None) -> None:
    """The body's options checked (422 naming the option), before any spec loads."""
    checked_options(options_of(body, allow), current)


# -- routes ------------------------------------------------------------------------------
@router.get("", response_model=ScheduleList)
async def list_schedules(store: StoreDep) -> ScheduleList:
    """Every schedule: its definition (not the spec itself), its next fire times and its
    newest runs."""
    return await all_schedules(store)


@router.post("", status_code=201, response_model=ScheduleView,
             responses=error_responses(409, e409="A schedule by that name exists"))
async def create_schedule(body: ScheduleCreate, request: Request, response: Response,
                          store: StoreDep, stage: RenderStageDep, settings: SettingsDep
                          ) -> ScheduleView:
    """Create a schedule: the spec (checked now, and kept as it is now) starts a session at
    every tick of `cron`, fired once each by the scheduler's leader."""
    allow = settings.webhook_allow_list
    check_options(body, allow)  # cheap: before the spec is loaded
    work = spec_work(body)
    assert work is not None
    loaded = await stage.run(load_only, work)
    view = await create_loaded(store, body, loaded, allow)
    await audit(request, "schedule_create", body.name)
    response.headers["Location"] = f"/v1/schedules/{body.name}"
    return view


@router.get("/{name}", response_model=ScheduleView, responses=NOT_FOUND)
async def get_schedule(name: ScheduleNamePath, store: StoreDep) -> ScheduleView:
    """One schedule: its definition, next fire times and recent runs (newest first)."""
    return await schedule_view(store, name)


@router.patch("/{name}", response_model=ScheduleView, responses=NOT_FOUND)
async def update_schedule(name: ScheduleNamePath, body: ScheduleUpdate, request: Request,
                          store: StoreDep, stage: RenderStageDep, settings: SettingsDep
                          ) -> ScheduleView:
    """Change a schedule: a new spec, variables over the stored ones, timing, webhook."""
    allow = settings.webhook_allow_list
    check_options(body, allow, await store.get_schedule(name))
    work = spec_work(body)
    loaded = await stage.run(load_only, work) if work is not None else None
    view = await update_loaded(store, name, body, loaded, allow)
    await audit(request, "schedule_update", name)
    return view


@router.delete("/{name}", status_code=204, responses=NOT_FOUND)
async def delete_schedule(name: ScheduleNamePath, store: StoreDep, request: Request
                          ) -> Response:
    """Delete a schedule and its run history; its sessions stay."""
    await store.delete_schedule(name)
    await audit(request, "schedule_delete", name)
    return Response(status_code=204)


@router.post("/{name}/pause", response_model=ScheduleView, responses=NOT_FOUND)
async def pause_schedule(name: ScheduleNamePath, store: StoreDep, request: Request
                         ) -> ScheduleView:
    """Stop firing (runs already started go on)."""
    view = await set_paused(store, name, True)
    await audit(request, "schedule_pause", name)
    return view


@router.post("/{name}/resume", response_model=ScheduleView, responses=NOT_FOUND)
async def resume_schedule(name: ScheduleNamePath, store: StoreDep, request: Request
                          ) -> ScheduleView:
    """Fire again from now: the ticks missed while paused are not caught up."""
    view = await set_paused(store, name, False)
    await audit(request, "schedule_resume", name)
    return view


@router.post("/{name}/trigger", response_model=ScheduleRun, responses=NOT_FOUND)
async def trigger_schedule(name: ScheduleNamePath, request: Request, response: Response,
                           store: StoreDep) -> ScheduleRun:
    """Start a run now, whatever the cron, the pause or the overlap policy say. Its
    `outcome` is `started` (with `session_id`) or `failed` (the stored spec no longer
    plans: `detail` says why)."""
    await ensure_prepared(request.app)  # the streams exist before a session is created
    run = await trigger_now(store, name)
    await audit(request, "schedule_trigger", name, run.session_id or run.outcome)
    if run.session_id:
        response.headers["Location"] = f"/v1/sessions/{run.session_id}"
    return run

