"""The fleet as an operator sees it: the workers (heartbeats joined with what each
consumer holds pending on each shard) and the queues (stream length, lag, pending,
dead letters, timers). Reads only; the decisions (alive or not, totals) are pure."""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from strands_durable.models import now_ms
from strands_durable.store.base import DEFAULT_HEARTBEAT_S
from strands_durable.store.liveness import HOLDER, DeathInfo, Declaration, death_info
from strands_durable.store.store import Store

# A worker beats every DURABLE_HEARTBEAT_S; this many missed beats and it is taken for
# dead (by `durable workers`, /healthz and the fleet gauges alike).
HEARTBEAT_MISSES = 3


def liveness_window_s(heartbeat_s: float) -> float:
    """How recent a worker's last heartbeat must be for it to count as alive."""
    return HEARTBEAT_MISSES * heartbeat_s


def seen_recently(age_s: float | None, within_s: float) -> bool:
    return age_s is not None and age_s <= within_s


ALIVE_WITHIN_S = liveness_window_s(DEFAULT_HEARTBEAT_S)


def process_name() -> str:
    """A worker's consumer name or a scheduler replica's: stable for the life of the
    process, unique across restarts; a host name's odd characters become '-' (a consumer
    name is 1-255 printable ASCII characters)."""
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:200] or "host"
    return f"{host}-{os.getpid()}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class WorkerInfo:
    consumer: str
    host: str
    pid: int | None
    started_at: str
    last_seen: str  # "" for a consumer that holds entries but never sent a heartbeat
    last_seen_age_s: float | None
    alive: bool
    concurrency: int | None
    slots: int | None  # steps it took at once at its last heartbeat (worker/slots.py)
    running: tuple[str, ...]  # "session_id/step" of the steps it runs now
    pending_by_shard: tuple[int, ...]  # entries delivered to it and not yet acked
    pending: int
    idle_ms: int | None  # since its last stream interaction (XINFO CONSUMERS), if known
    # Declared dead by fast failover (store/liveness.py), with how fast its steps re-ran.
    declared_dead: DeathInfo | None = None
    version: str = ""  # the release it runs ("" from a release before 0.2.0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def slots_text(self) -> str:
        """"3 of 8": steps taken at once at its last heartbeat, of its concurrency (a
        heartbeat from before slots were reported: the concurrency alone)."""
        if self.concurrency is None:
            return ""
        if self.slots is None:
            return str(self.concurrency)
        return f"{self.slots} of {self.concurrency}"


@dataclass(frozen=True)
class ShardStats:
    shard: int
    stream: str
    length: int  # entries in the stream (acked ones are deleted): pending + undelivered
    lag: int  # entries not yet delivered to any worker
    pending: int  # delivered, not yet acked
    consumers: int
    dead_letters: int
    timers: int  # retry backoffs and HITL timeouts waiting on the timer set
    timers_due: int  # of which due now (a worker promotes them within timer_poll_ms)
    deferred: int = 0  # off the stream, on their namespaces' lists (fair dispatch)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


TOTALED = ("length", "lag", "pending", "dead_letters", "timers", "timers_due", "deferred")


@dataclass(frozen=True)
class QueueStats:
    shards: tuple[ShardStats, ...]

    @property
    def total(self) -> dict[str, int]:
        return {name: sum(getattr(s, name) for s in self.shards) for name in TOTALED}

    def to_dict(self) -> dict[str, Any]:
        return {"shards": [s.to_dict() for s in self.shards], "total": self.total}


# -- pure ---------------------------------------------------------------------------
def worker_infos(beats: Mapping[str, str], pending: Sequence[Mapping[str, tuple[int, int]]],
                 now: int, alive_within_s: float = ALIVE_WITHIN_S,
                 declarations: Sequence[Declaration] = ()) -> list[WorkerInfo]:
    """Join heartbeats (consumer -> JSON) with per-shard {consumer: (pending, idle ms)} and
    the declarations of death: live workers first, then by most recently seen. A worker
    declared dead is not alive (unless it beat again since); the holder of dead workers'
    entries is listed only while it holds some."""
    deaths: dict[str, list[Declaration]] = {}
    for d in declarations:
        deaths.setdefault(d.consumer, []).append(d)
    names = set(beats) | {name for shard in pending for name in shard} | set(deaths)
    if not any(shard.get(HOLDER, (0, 0))[0] for shard in pending):
        names.discard(HOLDER)
    infos = []
    for name in names:
        try:
            beat: dict[str, Any] = json.loads(beats[name]) if name in beats else {}
        except ValueError:
            beat = {}
        seen_ms = beat.get("last_seen_ms")
        age = (now - int(seen_ms)) / 1000 if isinstance(seen_ms, int | float) else None
        per_shard = tuple(shard.get(name, (0, 0))[0] for shard in pending)
        idles = [shard[name][1] for shard in pending if name in shard]
        death = death_info(deaths.get(name, ()))
        infos.append(WorkerInfo(
            consumer=name, host=str(beat.get("host", "")),
            pid=int(beat["pid"]) if isinstance(beat.get("pid"), int) else None,
            started_at=str(beat.get("started_at", "")), last_seen=str(beat.get("last_seen", "")),
            last_seen_age_s=round(age, 3) if age is not None else None,
            alive=seen_recently(age, alive_within_s) and (death is None or death.revived),
            concurrency=int(beat["concurrency"]) if isinstance(beat.get("concurrency"), int)
            else None,
            slots=int(beat["slots"]) if isinstance(beat.get("slots"), int) else None,
            running=tuple(str(r) for r in beat.get("running", [])),
            pending_by_shard=per_shard, pending=sum(per_shard),
            idle_ms=min(idles) if idles else None, declared_dead=death,
            version=str(beat.get("version", "")),
        ))
    infos.sort(key=lambda w: (not w.alive, w.last_seen_age_s is None,
                              w.last_seen_age_s or 0.0, w.consumer))
    return infos


def lag_of(group: Mapping[str, Any] | None, length: int, pending: int) -> int:
    """XINFO GROUPS' lag when Redis knows it; else what is in the stream and not pending
    (exact here: entries are deleted when acked)."""
    if group is not None and group.get("lag") is not None:
        return int(group["lag"])
    return max(0, length - pending)


# -- I/O ----------------------------------------------------------------------------
async def group_consumers(store: Store, shard: int) -> dict[str, tuple[int, int]]:
    """{consumer name: (pending entries, idle ms)} of a shard's group."""
    return await store.group_consumers(shard)


async def list_workers(store: Store, *, alive_within_s: float | None = None
                       ) -> list[WorkerInfo]:
    """Every worker that sent a heartbeat (alive or not) and every consumer holding
    entries without one (a worker that died before its first beat). Alive: seen within
    `alive_within_s`, by default the store's heartbeat period's rule."""
    beats = await store.heartbeats()
    pending = [await store.group_consumers(shard) for shard in range(store.keys.shards)]
    declared = [d for shard in range(store.keys.shards) for d in await store.declarations(shard)]
    within = (alive_within_s if alive_within_s is not None
              else liveness_window_s(store.heartbeat_s))
    return worker_infos(beats, pending, now_ms(), within, declared)


async def queue_stats(store: Store) -> QueueStats:
    k = store.keys
    now = now_ms()
    shards = []
    for shard in range(k.shards):
        length, dead, timers, due = await store.queue_counts(shard, now)
        group = await store.group_info(shard)
        pending = int(group["pending"]) if group else 0
        shards.append(ShardStats(
            shard=shard, stream=k.stream(shard), length=length,
            lag=lag_of(group, length, pending), pending=pending,
            consumers=int(group["consumers"]) if group else 0, dead_letters=dead,
            timers=timers, timers_due=due, deferred=await store.deferred_steps(shard)))
    return QueueStats(tuple(shards))
