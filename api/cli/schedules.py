"""`durable schedules create|list|show|pause|resume|trigger|delete|update`: workflows
that start on a cron schedule, fired by the scheduler's leader (scheduler/schedule_clock.py).
They live in the fleet's Redis (DURABLE_REDIS_URL), as submitted sessions do."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import replace
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from pydantic import ValidationError
from rich.markup import escape

from strands_durable.api.cli.common import (
    EXIT_USAGE,
    JsonOpt,
    ProviderOpt,
    VarOpt,
    app,
    checked,
    env_settings,
    fail,
    load,
    out,
    print_json,
    run_async,
    with_store,
)
from strands_durable.api.cli.output import new_table, print_table
from strands_durable.models import utc_text
from strands_durable.scheduler.schedule_ops import (
    ScheduleOptions,
    ScheduleView,
    checked_options,
    new_schedule,
    schedule_view,
    schedule_views,
    set_paused,
    trigger_now,
    updated_schedule,
    webhook_text,
)
from strands_durable.sessions.access import local_actor, record_schedule_action
from strands_durable.spec.loader import parse_var_args
from strands_durable.store.keys import check_schedule_name
from strands_durable.store.schedules import ScheduleRun
from strands_durable.store.store import Store
from strands_durable.webhooks import InvalidWebhook, WebhookSubscription

T = TypeVar("T")

schedules_app = typer.Typer(help="Workflows that start on a cron schedule.",
                            no_args_is_help=True)
app.add_typer(schedules_app, name="schedules")

NameArg = Annotated[str, typer.Argument(
    help="The schedule's name: letters, digits, '.', '_' or '-' (at most 64).",
    callback=checked(check_schedule_name))]
CronOpt = Annotated[str | None, typer.Option(
    "--cron", help='When it fires: 5 fields ("0 * * * *": minute hour day month weekday), '
    'a 6th of seconds ("0 * * * * */10"), or @hourly, @daily, ...')]
TimezoneOpt = Annotated[str | None, typer.Option(
    "--timezone", help="The IANA time zone the cron reads in (default UTC).")]
JitterOpt = Annotated[int | None, typer.Option(
    "--jitter", metavar="SECONDS", help="Delay each tick by up to this many seconds "
    "(the same delay on every scheduler replica; default 0).")]
OverlapOpt = Annotated[str | None, typer.Option(
    "--overlap", metavar="skip|buffer_one|cancel_other|allow",
    help="What a tick does while the previous run still runs (default skip).")]
WebhookOpt = Annotated[str | None, typer.Option(
    "--webhook", metavar="URL", help="POST each run's events there (completed, failed, "
    "cancelled, paused, waiting_for_human), signed with the fleet's DURABLE_WEBHOOK_SECRET; "
    "default: the fleet's DURABLE_WEBHOOK_URL. `update --webhook ''` removes it.")]
CatchupOpt = Annotated[int | None, typer.Option(
    "--catchup-window", metavar="SECONDS", help="After the scheduler was down, fire the "
    "ticks missed no longer ago than this (default 300); older ones are skipped.")]


def _vars(var: list[str] | None) -> dict[str, str]:
    return parse_var_args(var or [])


def _webhook(url: str | None) -> str | None:
    """--webhook URL as the schedule stores it (checked against DURABLE_WEBHOOK_ALLOW);
    '' (an update's --webhook ''): none any more."""
    if not url:
        return url
    try:
        hook = WebhookSubscription(url=url)
    except ValidationError as exc:
        raise InvalidWebhook(f"--webhook: {exc.errors()[0]['msg']}") from None
    return webhook_text(hook, env_settings().webhook_allow_list)


async def _checked(options: ScheduleOptions, webhook: str | None) -> ScheduleOptions:
    options = replace(options, webhook=_webhook(webhook))
    checked_options(options)
    return options


def _show(view: ScheduleView, as_json: bool) -> None:
    if as_json:
        print_json(view)
        return
    state = "paused" if view.paused else "active"
    out.print(f"schedule {escape(view.name)} ({state}): {escape(view.workflow_name)} "
              f"({view.pattern_type}), cron {escape(view.cron)} {view.timezone}, "
              f"overlap {view.overlap}, jitter {view.jitter_s}s, catch-up "
              f"{view.catchup_window_s}s"
              + (f", webhook {escape(view.webhook_url)}" if view.webhook_url else ""),
              highlight=False, soft_wrap=True)
    out.print("next: " + (", ".join(utc_text(t) for t in view.next_fire_ms) or "- (paused)"),
              highlight=False, soft_wrap=True)
    if view.recent_runs:
        _runs_table(view.recent_runs)
    else:
        out.print("no runs yet", highlight=False)


def _runs_table(runs: list[ScheduleRun]) -> None:
    table = new_table("tick", "outcome", "trigger", "session_id", "detail")
    for run in runs:
        table.add_row(utc_text(run.tick_ms), run.outcome, run.trigger, run.session_id or "-",
                      escape(run.detail))
    print_table(table)


async def _audit(store: Store, action: str, name: str) -> None:
    await record_schedule_action(store, action, name, actor=local_actor("cli"), source="cli")


async def _audited(done: Awaitable[T], store: Store, action: str, name: str) -> T:
    result = await done
    await _audit(store, action, name)
    return result


@schedules_app.command("create")
def schedules_create(
    name: NameArg,
    spec: Annotated[Path, typer.Argument(help="Workflow spec (strands-cli YAML); kept as "
                                         "it is now: later edits change nothing until "
                                         "`update`.")],
    cron: CronOpt = None, timezone: TimezoneOpt = None, var: VarOpt = None,
    jitter: JitterOpt = None, overlap: OverlapOpt = None, catchup_window: CatchupOpt = None,
    provider: ProviderOpt = None, webhook: WebhookOpt = None,
    paused: Annotated[bool, typer.Option("--paused", help="Create it paused.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Create a schedule: SPEC (with its --var values) starts a session at every tick of
    --cron. Prints the schedule and its next fire times."""
    if cron is None:
        raise fail("schedules create: --cron is required (e.g. --cron '0 * * * *')",
                   EXIT_USAGE)
    # The options first: cheap, and before the spec's file is read.
    options = run_async(_checked(ScheduleOptions(cron, timezone, jitter, overlap,
                                                 catchup_window), webhook))

    async def body(store: Store) -> ScheduleView:
        made = new_schedule(name, load(spec, var, provider, None), options)
        await store.create_schedule(made.model_copy(update={"paused": paused}))
        await _audit(store, "create", name)
        return await schedule_view(store, name)

    _show(run_async(with_store(body, fleet=True)), as_json)


@schedules_app.command("update")
def schedules_update(
    name: NameArg,
    spec: Annotated[Path | None, typer.Argument(help="A new spec (read now).")] = None,
    cron: CronOpt = None, timezone: TimezoneOpt = None, var: VarOpt = None,
    jitter: JitterOpt = None, overlap: OverlapOpt = None, catchup_window: CatchupOpt = None,
    provider: ProviderOpt = None, webhook: WebhookOpt = None, as_json: JsonOpt = False,
) -> None:
    """Change a schedule: a new SPEC (read from the file now), --var values (over the
    stored ones, or with SPEC its variables), or any timing option."""
    options = ScheduleOptions(cron, timezone, jitter, overlap, catchup_window)

    async def body(store: Store) -> ScheduleView:
        current = await store.get_schedule(name)
        checked = replace(options, webhook=_webhook(webhook))
        checked_options(checked, current)  # before the spec's file is read
        loaded = load(spec, var, provider, None) if spec is not None else None
        await store.replace_schedule(updated_schedule(current, loaded, _vars(var), checked))
        await _audit(store, "update", name)
        return await schedule_view(store, name)

    _show(run_async(with_store(body, fleet=True)), as_json)


@schedules_app.command("list")
def schedules_list(as_json: JsonOpt = False) -> None:
    """Every schedule: its cron, state, next fire time and latest run."""
    views = run_async(with_store(schedule_views, fleet=True))
    if as_json:
        print_json(views)
        return
    table = new_table("name", "workflow", "cron", "timezone", "state", "next", "last run")
    for v in views:
        last = v.recent_runs[0] if v.recent_runs else None
        table.add_row(escape(v.name), escape(v.workflow_name), escape(v.cron), v.timezone,
                      "paused" if v.paused else "active",
                      utc_text(v.next_fire_ms[0]) if v.next_fire_ms else "-",
                      f"{utc_text(last.tick_ms)} {last.outcome}" if last else "-")
    print_table(table)


@schedules_app.command("show")
def schedules_show(name: NameArg, as_json: JsonOpt = False) -> None:
    """One schedule: its definition, next fire times and recent runs."""
    _show(run_async(with_store(lambda store: schedule_view(store, name), fleet=True)), as_json)


@schedules_app.command("pause")
def schedules_pause(name: NameArg, as_json: JsonOpt = False) -> None:
    """Stop firing (runs already started go on)."""
    _show(run_async(with_store(lambda s: _audited(set_paused(s, name, True), s, "pause",
                                                  name), fleet=True)), as_json)


@schedules_app.command("resume")
def schedules_resume(name: NameArg, as_json: JsonOpt = False) -> None:
    """Fire again, from now: the ticks missed while paused are not caught up."""
    _show(run_async(with_store(lambda s: _audited(set_paused(s, name, False), s, "resume",
                                                  name), fleet=True)), as_json)


@schedules_app.command("trigger")
def schedules_trigger(name: NameArg, as_json: JsonOpt = False) -> None:
    """Start a run now, whatever the cron, the pause or the overlap policy say; prints
    its session id."""
    run = run_async(with_store(lambda s: _audited(trigger_now(s, name), s, "trigger", name),
                               fleet=True))
    if as_json:
        print_json(run)
    elif run.outcome != "started":
        raise fail(f"schedules trigger {name}: {run.detail}")
    else:
        print(run.session_id)
    if run.outcome != "started":
        raise typer.Exit(1)


@schedules_app.command("delete")
def schedules_delete(name: NameArg, as_json: JsonOpt = False) -> None:
    """Delete a schedule and its run history (its sessions stay)."""

    async def body(store: Store) -> None:
        await store.delete_schedule(name)
        await _audit(store, "delete", name)

    run_async(with_store(body, fleet=True))
    if as_json:
        print_json({"name": name, "deleted": True})
        return
    out.print(f"deleted schedule {escape(name)}", highlight=False)
