"""What operators do with schedules (the CLI's `durable schedules ...`, the API's
/v1/schedules, the client's Redis backend), and firing one tick, which the leader's
clock (schedule_clock.py) and `trigger` share: the stored spec planned into a new
session under the tick's idempotency key."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel, Field

from strands_durable.errors import DurableError, InvalidInput
from strands_durable.models import SessionStatus, now_ms
from strands_durable.scheduler.schedules import (
    DEFAULT_CATCHUP_S,
    MAX_CATCHUP_S,
    MAX_JITTER_S,
    MIN_CATCHUP_S,
    Timing,
    check_cron,
    check_overlap,
    check_seconds,
    check_timezone,
    next_fire_times,
)
from strands_durable.sessions.start import new_session, spec_json
from strands_durable.spec.cross_checks import check_templates
from strands_durable.spec.loader import LoadedSpec
from strands_durable.spec.model import parse_spec
from strands_durable.spec.variables import resolve_variables
from strands_durable.store.keys import check_schedule_name
from strands_durable.store.schedules import (
    RunTrigger,
    ScheduleDef,
    ScheduleRun,
    idempotency_key,
)
from strands_durable.store.store import Store
from strands_durable.webhooks import WebhookSubscription

ACTIVE = (SessionStatus.RUNNING, SessionStatus.PAUSED)
NEXT_SHOWN = 5


@dataclass(frozen=True)
class ScheduleOptions:
    """A create's or an update's options; None: the default (create) or unchanged."""

    cron: str | None = None
    timezone: str | None = None
    jitter_s: int | None = None
    overlap: str | None = None
    catchup_window_s: int | None = None
    webhook: str | None = None  # the subscription as stored (webhook_text); '': none


class ScheduleView(BaseModel):
    """A schedule as `durable schedules show --json` and GET /v1/schedules/{name} show it:
    its definition (the spec itself left out), its next fire times and recent runs."""

    name: str
    workflow_name: str
    pattern_type: str
    spec_hash: str
    source: str
    variables: dict[str, Any]
    cron: str
    timezone: str
    jitter_s: int
    overlap: str
    catchup_window_s: int
    paused: bool
    created_ms: int
    updated_ms: int
    webhook_url: str | None = Field(default=None, description="Where the runs' events "
                                    "are POSTed (its secret never shown); none: the "
                                    "fleet's default, if any.")
    last_tick_ms: int | None = Field(description="The last tick handled (fired or skipped).")
    buffered_tick_ms: int | None = Field(
        default=None, description="A tick waiting for the previous run to end (buffer_one).")
    next_fire_ms: list[int] = Field(description="The next fire times (epoch ms, jitter "
                                    "included); empty while paused.")
    recent_runs: list[ScheduleRun] = Field(description="Newest first.")


def timing_of(schedule: ScheduleDef) -> Timing:
    return Timing(schedule.name, schedule.cron, schedule.timezone, schedule.jitter_s,
                  schedule.catchup_window_s)


def checked_options(options: ScheduleOptions, base: ScheduleDef | None = None
                    ) -> dict[str, Any]:
    """The options' fields, each checked (InvalidSchedule naming the option), over
    `base`'s (an update) or the defaults (a create)."""
    if options.cron is None and base is None:
        raise InvalidInput("--cron: a schedule needs a cron expression")
    return {
        "cron": check_cron(options.cron) if options.cron is not None
        else base.cron if base else "",
        "timezone": check_timezone(options.timezone) if options.timezone is not None
        else base.timezone if base else "UTC",
        "jitter_s": check_seconds("--jitter", options.jitter_s, 0, MAX_JITTER_S)
        if options.jitter_s is not None else base.jitter_s if base else 0,
        "overlap": check_overlap(options.overlap).value if options.overlap is not None
        else base.overlap if base else "skip",
        "catchup_window_s": check_seconds("--catchup-window", options.catchup_window_s,
                                          MIN_CATCHUP_S, MAX_CATCHUP_S)
        if options.catchup_window_s is not None
        else base.catchup_window_s if base else DEFAULT_CATCHUP_S,
        "webhook": options.webhook if options.webhook is not None
        else base.webhook if base else "",
    }


def webhook_text(hook: WebhookSubscription | None, allow: Sequence[str]) -> str | None:
    """A subscription as a schedule stores it, its URL checked against the operator's
    DURABLE_WEBHOOK_ALLOW (InvalidWebhook: 422, exit 2); None: none given."""
    return hook.checked(allow).stored() if hook is not None else None


def spec_fields(loaded: LoadedSpec) -> dict[str, Any]:
    """What a schedule keeps of a loaded spec: the effective spec as sessions store it."""
    return {"workflow_name": loaded.spec.name, "pattern_type": loaded.spec.pattern.type,
            "spec_json": spec_json(loaded), "spec_hash": loaded.spec_hash,
            "source": loaded.source, "variables": dict(loaded.variables)}


def new_schedule(name: str, loaded: LoadedSpec, options: ScheduleOptions,
                 now: int | None = None) -> ScheduleDef:
    """Pure: the schedule to store (every option checked)."""
    at = now_ms() if now is None else now
    return ScheduleDef(name=check_schedule_name(name), **spec_fields(loaded),
                       **checked_options(options), created_ms=at, updated_ms=at)


def updated_schedule(current: ScheduleDef, loaded: LoadedSpec | None,
                     variables: Mapping[str, Any] | None, options: ScheduleOptions,
                     now: int | None = None) -> ScheduleDef:
    """Pure: `current` with a new spec (loaded with its variables), or new variables
    over the stored ones (checked against the stored spec), or new options."""
    fields: dict[str, Any] = checked_options(options, current)
    if loaded is not None:
        fields.update(spec_fields(loaded))
    elif variables:
        spec = parse_spec(current.spec_json)
        resolved = resolve_variables(spec, {**current.variables, **variables}, current.source)
        check_templates(spec, resolved, current.source)
        fields["variables"] = resolved
    fields["updated_ms"] = now_ms() if now is None else now
    return current.model_copy(update=fields)


def loaded_of(schedule: ScheduleDef) -> LoadedSpec:
    """The stored spec as a session is planned from (it was checked when stored)."""
    return LoadedSpec(spec=parse_spec(schedule.spec_json), text=schedule.spec_json,
                      source=schedule.source, spec_hash=schedule.spec_hash,
                      variables=dict(schedule.variables))


async def start_run(store: Store, schedule: ScheduleDef, tick_ms: int,
                    trigger: RunTrigger = "cron") -> ScheduleRun:
    """A tick's session, created under the tick's idempotency key (a tick fired twice
    makes one session); a spec that no longer plans is a failed run, not a crash."""
    key = idempotency_key(schedule.name, tick_ms, manual=trigger == "manual")
    try:
        # Planning renders templates: CPU work kept off the leader's loop.
        planned = await asyncio.to_thread(new_session, loaded_of(schedule), key)
        if schedule.webhook:
            planned = replace(planned, webhook=schedule.webhook)
        sid, _ = await store.create_session(planned)
    except DurableError as exc:
        return ScheduleRun(tick_ms=tick_ms, at_ms=now_ms(), outcome="failed",
                           trigger=trigger, detail=exc.public_message()[:500])
    return ScheduleRun(tick_ms=tick_ms, at_ms=now_ms(), outcome="started",
                       trigger=trigger, session_id=sid)


async def previous_active(store: Store, runs: list[ScheduleRun]) -> str | None:
    """The latest started run's session when it is still going (running or paused)."""
    latest = next((r for r in runs if r.outcome == "started" and r.session_id), None)
    if latest is None or latest.session_id is None:
        return None
    status = await store.status_of(latest.session_id)
    return latest.session_id if status in ACTIVE else None


# -- operators' actions ------------------------------------------------------------------
async def schedule_view(store: Store, name: str, now: int | None = None) -> ScheduleView:
    schedule = await store.get_schedule(name)
    cursors, buffered = await store.schedule_cursors(), await store.buffered_ticks()
    return view_of(schedule, await store.schedule_runs(name), cursors.get(name),
                   buffered.get(name), now_ms() if now is None else now)


def view_of(schedule: ScheduleDef, runs: list[ScheduleRun], cursor: int | None,
            buffered: int | None, now: int) -> ScheduleView:
    upcoming = [] if schedule.paused else next_fire_times(timing_of(schedule), now,
                                                          NEXT_SHOWN)
    hook = WebhookSubscription.from_stored(schedule.webhook)
    return ScheduleView(**schedule.model_dump(exclude={"spec_json", "webhook"}),
                        webhook_url=hook.url if hook else None, last_tick_ms=cursor,
                        buffered_tick_ms=buffered, next_fire_ms=upcoming, recent_runs=runs)


async def schedule_views(store: Store, runs: int = 5) -> list[ScheduleView]:
    """Every schedule with its next fire times and its newest `runs` runs."""
    now = now_ms()
    cursors, buffered = await store.schedule_cursors(), await store.buffered_ticks()
    return [view_of(s, (await store.schedule_runs(s.name))[:runs], cursors.get(s.name),
                    buffered.get(s.name), now) for s in await store.list_schedules()]


async def set_paused(store: Store, name: str, paused: bool) -> ScheduleView:
    """Pause or resume. A resumed schedule starts from now: the ticks it missed while
    paused are not caught up (its cursor moves to now before it runs again)."""
    schedule = await store.get_schedule(name)
    if not paused:
        await store.advance_schedule(name, now_ms())
    if schedule.paused != paused:
        await store.replace_schedule(schedule.model_copy(update={"paused": paused,
                                                                  "updated_ms": now_ms()}))
    return await schedule_view(store, name)


async def trigger_now(store: Store, name: str) -> ScheduleRun:
    """Fire the schedule once now, whatever its cron, pause or overlap policy say."""
    schedule = await store.get_schedule(name)
    run = await start_run(store, schedule, now_ms(), trigger="manual")
    await store.record_runs(name, [run])
    return run
