"""Schedules in Redis (issue 30): their definitions, the last tick each has handled, the
one tick a buffer_one schedule keeps waiting, and each one's recent runs.

Every write here is one command on one key and harmless twice, so two scheduler
replicas that both believe they lead for a moment do no damage: a tick's session is
created under an idempotency key of the schedule and the tick (store.create_session),
its run is written under the tick's field (the same value again), and the cursor only
ever rises (ZADD GT). Definitions are written by operators (the CLI, the API), the rest
by the scheduler's leader.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from strands_durable.errors import Conflict, NotFound
from strands_durable.store.base import StoreBase
from strands_durable.store.codec import as_str
from strands_durable.store.keys import check_schedule_name, check_token, shard_for_key

RUNS_KEPT = 50  # recent runs kept per schedule
MAX_SCHEDULES = 10_000  # listed at most (the scheduler reads them all every round)

RunOutcome = Literal["started", "skipped", "buffered", "failed"]
RunTrigger = Literal["cron", "manual", "buffered"]


class ScheduleNotFound(NotFound):
    code = "schedule_not_found"

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no schedule named {name!r}")

    def details(self) -> dict[str, object]:
        return {"name": self.name}


class ScheduleExists(Conflict):
    code = "schedule_exists"

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"a schedule named {name!r} exists; `update` it or delete it first")

    def details(self) -> dict[str, object]:
        return {"name": self.name}


class ScheduleDef(BaseModel):
    """A schedule as stored: the spec as it was when created or last updated (the
    effective spec JSON sessions store; a later edit of the file changes nothing), its
    variables (resolved), and its timing and policies (checked by scheduler/schedules.py
    before they get here)."""

    name: str
    workflow_name: str
    pattern_type: str
    spec_json: str
    spec_hash: str
    source: str
    variables: dict[str, Any] = Field(default_factory=dict)
    cron: str
    timezone: str = "UTC"
    jitter_s: int = 0
    overlap: str = "skip"
    catchup_window_s: int = 300
    paused: bool = False
    created_ms: int
    updated_ms: int
    # The runs' webhook subscription as sessions keep it (core/webhooks.py; its secret
    # included, so never shown); '': the fleet's default, if any.
    webhook: str = Field(default="", repr=False)


class ScheduleRun(BaseModel):
    """One tick of a schedule and what became of it."""

    tick_ms: int = Field(description="The tick (epoch ms): when it was due, before jitter.")
    at_ms: int = Field(description="When the scheduler handled it.")
    outcome: RunOutcome
    trigger: RunTrigger = "cron"
    session_id: str | None = None
    detail: str = ""

    @property
    def field(self) -> str:
        """Its field in the runs hash: the tick, so a tick handled twice is one run."""
        return f"m{self.tick_ms}" if self.trigger == "manual" else str(self.tick_ms)


def idempotency_key(name: str, tick_ms: int, manual: bool = False) -> str:
    """The idempotency key of a tick's session: a tick fired twice (two leaders, a
    leader that died before it recorded the run) makes one session."""
    return check_token("idempotency key",
                       f"schedule:{name}:{'manual:' if manual else ''}{tick_ms}")


class ScheduleOps(StoreBase):
    # -- definitions -------------------------------------------------------------------
    async def create_schedule(self, schedule: ScheduleDef) -> None:
        """ScheduleExists when the name is taken. Its cursor starts at its creation."""
        k = self.keys
        check_schedule_name(schedule.name)
        if not await self.redis.hsetnx(k.schedules(), schedule.name,
                                       schedule.model_dump_json()):
            raise ScheduleExists(schedule.name)
        await self.redis.zadd(k.schedule_cursors(), {schedule.name: schedule.created_ms})

    async def replace_schedule(self, schedule: ScheduleDef) -> None:
        """Write an existing schedule's new definition (ScheduleNotFound when gone)."""
        if not await self.redis.hexists(self.keys.schedules(), schedule.name):
            raise ScheduleNotFound(schedule.name)
        await self.redis.hset(self.keys.schedules(), schedule.name, schedule.model_dump_json())

    async def get_schedule(self, name: str) -> ScheduleDef:
        raw = await self.redis.hget(self.keys.schedules(), check_schedule_name(name))
        if raw is None:
            raise ScheduleNotFound(name)
        return ScheduleDef.model_validate_json(raw)

    async def list_schedules(self) -> list[ScheduleDef]:
        """Every schedule, by name (at most MAX_SCHEDULES)."""
        found: list[ScheduleDef] = []
        async for _name, raw in self.redis.hscan_iter(self.keys.schedules(), count=500):
            found.append(ScheduleDef.model_validate_json(raw))
            if len(found) >= MAX_SCHEDULES:
                break
        return sorted(found, key=lambda s: s.name)

    async def delete_schedule(self, name: str) -> None:
        k = self.keys
        if not await self.redis.hdel(k.schedules(), check_schedule_name(name)):
            raise ScheduleNotFound(name)
        await self.redis.zrem(k.schedule_cursors(), name)
        await self.redis.hdel(k.schedule_buffered(), name)
        await self.redis.delete(k.schedule_runs(name))

    # -- the leader's bookkeeping -----------------------------------------------------
    async def schedule_cursors(self) -> dict[str, int]:
        """Each schedule's last tick handled (epoch ms)."""
        pairs = await self.redis.zrange(self.keys.schedule_cursors(), 0, -1, withscores=True)
        return {as_str(name): int(score) for name, score in pairs}

    async def advance_schedule(self, name: str, tick_ms: int) -> None:
        """Raise the schedule's cursor to `tick_ms` (never lowers it)."""
        # XX: a schedule deleted meanwhile keeps no cursor.
        await self.redis.zadd(self.keys.schedule_cursors(), {name: tick_ms}, xx=True, gt=True)

    async def buffered_ticks(self) -> dict[str, int]:
        raw = await self.redis.hgetall(self.keys.schedule_buffered())
        return {as_str(name): int(tick) for name, tick in raw.items()}

    async def buffer_tick(self, name: str, tick_ms: int) -> bool:
        """Keep `tick_ms` waiting; False when one waits already."""
        return bool(await self.redis.hsetnx(self.keys.schedule_buffered(), name, str(tick_ms)))

    async def clear_buffered(self, name: str) -> None:
        await self.redis.hdel(self.keys.schedule_buffered(), name)

    async def record_runs(self, name: str, runs: list[ScheduleRun], kept: int = RUNS_KEPT
                          ) -> None:
        """Write runs under their ticks' fields, then drop the oldest past `kept`."""
        if not runs or not await self.redis.hexists(self.keys.schedules(), name):
            return  # nothing, or a schedule deleted meanwhile: no history left behind
        key = self.keys.schedule_runs(name)
        await self.redis.hset(key, mapping={r.field: r.model_dump_json() for r in runs})
        if await self.redis.hlen(key) > kept:
            fields = sorted((as_str(f) for f in await self.redis.hkeys(key)), key=_tick_of)
            await self.redis.hdel(key, *fields[:-kept])

    async def schedule_runs(self, name: str) -> list[ScheduleRun]:
        """The recent runs, newest first."""
        raw = await self.redis.hgetall(self.keys.schedule_runs(name))
        runs = [ScheduleRun.model_validate_json(value) for value in raw.values()]
        return sorted(runs, key=lambda r: (r.tick_ms, r.at_ms), reverse=True)

    async def session_of_key(self, key: str) -> str | None:
        """The session an idempotency key made, if any."""
        shard = shard_for_key(key, self.keys.shards)
        raw = await self.redis.get(self.keys.idempotency(shard, key))
        # "<sid> <request digest>" (create.lua)
        return as_str(raw).split(" ", 1)[0] if raw is not None else None


def _tick_of(field: str) -> int:
    try:
        return int(field.lstrip("m"))
    except ValueError:
        return 0

