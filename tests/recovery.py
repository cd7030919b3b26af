"""Shared by the recovery drills and the chaos mix: how a session ended (what must not
change when workers crash) and an uninterrupted reference run to compare it with."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from helpers import RedisServer, random_prefix, status_doc, wait_for
from helpers.fleet import Fleet
from pattern_specs import PatternCase

from strands_durable.models import SessionStatus
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

CLAIM_IDLE_MS = 400
# Each agent call takes this long. Where a drill's worker dies is decided by its crash
# point, not by this time; nothing waits on it.
DELAY_S = 0.05


@dataclass
class Outcome:
    status: dict[str, Any]
    responses: dict[str, str]
    artifacts: dict[str, str]
    completed: Counter[str]
    started: Counter[str]

    def comparable(self) -> dict[str, Any]:
        status = {k: v for k, v in self.status.items()
                  if k not in ("session_id", "created_at", "updated_at")}
        return {"status": status, "responses": self.responses, "artifacts": self.artifacts}


async def outcome(store: Store, sid: str) -> Outcome:
    events = [f for _, f in await store.events(sid)]
    return Outcome(
        status=await status_doc(store, sid),
        responses={r.key: r.response for r in await store.results(sid)},
        artifacts=await store.artifacts(sid),
        completed=Counter(f["step"] for f in events if f["type"] == "step_completed"),
        started=Counter(f["step"] for f in events
                        if f["type"] in ("step_started", "step_reclaimed")))


# Quick to notice a dead worker's steps, so that drills spend their time on recovery.
FAST: dict[str, Any] = {"claim_idle_ms": CLAIM_IDLE_MS, "read_block_ms": 100,
                        "timer_poll_ms": 50, "heartbeat_s": 0.5}


def settings_for(server: RedisServer, prefix: str) -> DurableSettings:
    return DurableSettings(redis_url=server.url, key_prefix=prefix, **FAST)


async def ended(store: Store, sid: str) -> bool:
    return (await store.get_session(sid)).status != SessionStatus.RUNNING


async def reference_run(server: RedisServer, case: PatternCase) -> Outcome:
    """The same spec with nothing going wrong (an in-process worker)."""
    settings = settings_for(server, random_prefix())
    store = open_store(settings)
    await store.prepare()
    consumer = StepConsumer(settings, store)
    await consumer.start()
    try:
        sid, _ = await start_session(store, case.load(DELAY_S))
        await wait_for(lambda: ended(store, sid), timeout_s=60, what="reference run")
        return await outcome(store, sid)
    finally:
        await consumer.stop(grace_s=0)
        await store.redis.aclose()


async def all_ended(store: Store, sids: list[str]) -> bool:
    for sid in sids:
        if (await store.get_session(sid)).status == SessionStatus.RUNNING:
            return False
    return True


async def start_fleet(fleet: Fleet, store: Store, size: int) -> list[subprocess.Popen[bytes]]:
    """`size` real workers, returned once each heartbeats (consuming, not booting)."""
    workers = [fleet.start_worker() for _ in range(size)]

    async def live() -> bool:
        return len(await store.heartbeats()) >= size

    await wait_for(live, timeout_s=60, what=f"{size} workers to heartbeat")
    return workers


async def consuming_pids(store: Store) -> set[int]:
    """The pids of the workers that have sent a heartbeat (are consuming, not booting)."""
    pids = set()
    for beat in (await store.heartbeats()).values():
        pid = json.loads(beat).get("pid")
        if isinstance(pid, int):
            pids.add(pid)
    return pids


async def kill_every_second(fleet: Fleet, workers: list[subprocess.Popen[bytes]],
                            store: Store, sids: list[str], seed: int,
                            limit_s: float = 240) -> int:
    """SIGKILL a random consuming worker and start a new one, at most once a second, until
    every session has ended; returns how many were killed (at least 3, or the chaos did
    not bite).

    A kill lands only on a worker that is consuming, only once a step has committed since
    the last kill, and after the first three only while another worker is consuming: on a
    machine so loaded that a worker boots slower than a clock kills, killing by the clock
    alone kills every worker before it reads a step and no session ever ends."""
    rng = random.Random(seed)
    kills = 0
    committed_at_last_kill, last_kill = -1, 0.0
    deadline = time.monotonic() + limit_s
    while not await all_ended(store, sids):
        assert time.monotonic() < deadline, f"sessions still running after {kills} kills\n" \
            + fleet.logs()[-3000:]
        if time.monotonic() - last_kill >= 1:  # the rest is read only when a kill is due
            committed = 0
            for sid in sids:
                committed += len(await store.results(sid))
            consuming = await consuming_pids(store)
            up = [i for i, worker in enumerate(workers) if worker.pid in consuming]
            # After the three kills the drill must show, one worker is left consuming.
            spare = len(up) >= 2 or (up and kills < 3)
            if spare and committed > committed_at_last_kill:
                victim = rng.choice(up)
                fleet.kill(workers[victim])
                workers[victim] = fleet.start_worker()
                kills += 1
                committed_at_last_kill, last_kill = committed, time.monotonic()
        await asyncio.sleep(0.05)
    assert kills >= 3, "the run ended before the chaos had a chance to bite"
    return kills
