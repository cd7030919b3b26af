"""The request and response models of /v1/schedules (api/routes_schedules.py), kept apart
from api/schemas.py (at its size limit). A schedule's answer is the document `durable
schedules show --json` prints (scheduler/schedule_ops.py ScheduleView)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field

from strands_durable.api.schemas import SPEC_DOC, SpecBody, _valid
from strands_durable.scheduler.schedule_ops import ScheduleView
from strands_durable.scheduler.schedules import (
    DEFAULT_CATCHUP_S,
    MAX_CRON_CHARS,
    MAX_TIMEZONE_CHARS,
)
from strands_durable.store.keys import MAX_SCHEDULE_NAME_CHARS, check_schedule_name
from strands_durable.store.schedules import ScheduleRun
from strands_durable.webhooks import WebhookSubscription

__all__ = ["ScheduleCreate", "ScheduleList", "ScheduleNamePath", "ScheduleRun",
           "ScheduleUpdate", "ScheduleView"]

ScheduleName = Annotated[str, _valid(check_schedule_name), Field(
    min_length=1, max_length=MAX_SCHEDULE_NAME_CHARS,
    description="Letters, digits, '.', '_' or '-', starting with a letter or digit.")]
ScheduleNamePath = Annotated[str, _valid(check_schedule_name), Path(
    description="The schedule's name", json_schema_extra={"maxLength": MAX_SCHEDULE_NAME_CHARS})]
Overlap = Literal["skip", "buffer_one", "cancel_other", "allow"]
CRON_DOC = ('When it fires: 5 fields ("0 * * * *": minute hour day month weekday), a 6th '
            'of seconds ("0 * * * * */10"), or @hourly, @daily, ...')


class _Timing(BaseModel):
    model_config = ConfigDict(extra="forbid")

    timezone: str | None = Field(default=None, min_length=1, max_length=MAX_TIMEZONE_CHARS,
                                 description="The IANA time zone the cron reads in "
                                 "(default UTC).")
    jitter_s: int | None = Field(default=None, strict=True, description="Delay each tick "
                                 "by up to this many seconds (0-3600, default 0).")
    overlap: Overlap | None = Field(default=None, description="What a tick does while the "
                                    "previous run still runs (default skip).")
    catchup_window_s: int | None = Field(
        default=None, strict=True, description="After the scheduler was down, fire the "
        f"ticks missed no longer ago than this (default {DEFAULT_CATCHUP_S}).")
    provider: str | None = Field(default=None, min_length=1, max_length=64,
                                 description="Override runtime.provider (with `spec`).")
    webhook: WebhookSubscription | None = Field(
        default=None, description="Where each run's events are POSTed (completed, failed, "
        "cancelled, paused, waiting_for_human), signed as Standard Webhooks says; none: the "
        "fleet's DURABLE_WEBHOOK_URL, if set (an update without it keeps the schedule's).")


class ScheduleCreate(_Timing):
    name: ScheduleName
    spec: SpecBody = Field(description=SPEC_DOC + " Kept as it is now: sessions are "
                           "started from this copy until the schedule is updated.")
    variables: dict[str, Any] = Field(default_factory=dict, description="Input variables "
                                      "(like --var).")
    cron: str = Field(min_length=1, max_length=MAX_CRON_CHARS, description=CRON_DOC)
    paused: bool = Field(default=False, description="Create it paused.")


class ScheduleUpdate(_Timing):
    spec: SpecBody | None = Field(default=None, description="A new spec (" + SPEC_DOC + ")")
    variables: dict[str, Any] | None = Field(
        default=None, description="Variables over the stored ones (with `spec`: its "
        "variables).")
    cron: str | None = Field(default=None, min_length=1, max_length=MAX_CRON_CHARS,
                             description=CRON_DOC)


class ScheduleList(BaseModel):
    items: list[ScheduleView] = Field(description="By name, each with its newest runs.")
