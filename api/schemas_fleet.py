"""The response models of the fleet's routes (api/routes_fleet.py): the workers and the
step streams, as `durable workers --json` and `durable queue --json` show them (kept
apart from api/schemas.py, which is at its size limit)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class DeclaredDead(BaseModel):
    """A worker declared dead by fast failover (store/liveness.py DeathInfo)."""

    at_ms: int
    by: str = Field(description="The worker that declared it.")
    silent_s: float
    steps: int = Field(description="Entries taken from it on every shard.")
    rerun: int = Field(description="Of which run again by now.")
    rerun_after_s: tuple[float, float] | None = Field(
        description="First and last re-run, seconds after its last heartbeat.")
    revived: bool = Field(description="It beat again after it was declared dead.")


class WorkerOut(BaseModel):
    """One worker, as `durable workers --json` shows it (store/fleet.py WorkerInfo)."""

    consumer: str
    host: str
    pid: int | None
    started_at: str
    last_seen: str = Field(description="Empty for a consumer that holds entries but never "
                           "sent a heartbeat.")
    last_seen_age_s: float | None
    alive: bool
    concurrency: int | None
    slots: int | None = Field(description="Steps it took at once at its last heartbeat.")
    running: list[str] = Field(description="session_id/step of the steps it runs now.")
    pending_by_shard: list[int]
    pending: int = Field(description="Entries delivered to it and not yet acked.")
    idle_ms: int | None
    declared_dead: DeclaredDead | None = None
    version: str = Field(default="", description="The strands-durable release it runs "
                         "(empty: a release before 0.2.0).")
    capacity_waiting: dict[str, int] = Field(
        default_factory=dict, description="Provider key -> requests of its steps waiting "
        "for that key's capacity.")


class WorkerList(BaseModel):
    items: list[WorkerOut] = Field(description="Live workers first, then by most recently "
                                   "seen.")


class ShardOut(BaseModel):
    shard: int
    stream: str
    length: int = Field(description="Entries in the stream: pending and undelivered.")
    lag: int = Field(description="Entries not yet delivered to any worker.")
    pending: int = Field(description="Delivered, not yet acked.")
    consumers: int
    dead_letters: int
    timers: int = Field(description="Retry backoffs and HITL timeouts waiting.")
    timers_due: int = Field(description="Of which due now.")
    deferred: int = Field(default=0, description="Steps waiting off the stream for their "
                          "namespace's turn (fair dispatch).")


class QueueOut(BaseModel):
    """The step streams, per shard and in total (`durable queue --json`)."""

    shards: list[ShardOut]
    total: dict[str, int] = Field(description="length, lag, pending, dead_letters, timers, "
                                  "timers_due and deferred summed over the shards.")
