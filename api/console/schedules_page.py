"""The console's schedules page (/ui/schedules): every schedule with its next fire time
and its newest runs, read-only (a read token; change them with `durable schedules` or
/v1/schedules). Schedules belong to the default namespace."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request, Response

from strands_durable.access import DEFAULT_NAMESPACE, Role
from strands_durable.api.console.auth import ConsoleUser
from strands_durable.api.console.common import guarded, page, require
from strands_durable.api.deps import get_store
from strands_durable.scheduler.schedule_ops import schedule_views

router = APIRouter(prefix="/ui", include_in_schema=False)


def utc(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


@router.get("/schedules")
async def schedules(request: Request) -> Response:
    async def work(user: ConsoleUser) -> Response:
        require(user, Role.READ)
        elsewhere = user.namespace != DEFAULT_NAMESPACE
        views = [] if elsewhere else await schedule_views(get_store(request), runs=3)
        return page(request, "schedules.html", schedules=views, utc=utc,
                    elsewhere=elsewhere, default_namespace=DEFAULT_NAMESPACE)
    return await guarded(request, work)
