"""The no-false-death soak of `python -m bench.failover`: a worker whose event loop is
held with Python code for 2 s every 10 s (DURABLE_LOOP_STALL=2:10: a CPU-heavy render, a
slow import) beside a normal one, 2 CPU hogs (processes spinning on the machine's cores),
and a steady load of chain sessions (16 in flight) for the whole time. No worker may be
declared dead: the beats come from a thread of their own."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.integrity import CommittedTwice, check_once
from bench.procs import Procs, clean_env
from bench.specs import chain_spec
from bench.throughput import BenchError, _wait, fresh_prefix
from strands_durable.models import SessionStatus
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.store import Store

STALL = "2:10"
HOGS = 2
IN_FLIGHT = 16
STEPS = 5


@dataclass
class SoakResult:
    seconds: float
    stalls: int  # times the stalled worker's loop was held
    declared: int  # declarations of death recorded (any worker, any shard)
    declared_events: int  # worker_declared_dead events in the sessions
    sessions: int  # sessions run to completion meanwhile
    hogs: int

    def text(self) -> str:
        return (f"soak: {self.seconds:.0f}s, one worker's loop held {STALL.split(':')[0]}s "
                f"every {STALL.split(':')[1]}s ({self.stalls} stalls), {self.hogs} CPU "
                f"hogs, {self.sessions} sessions done: {self.declared} declaration(s) of "
                f"death, {self.declared_events} worker_declared_dead event(s)")


async def _running(store: Store, sids: list[str]) -> int:
    return sum([(await store.get_session(s)).status == SessionStatus.RUNNING for s in sids])


async def run_soak(redis_url: str, logdir: Path, seconds: float, delay_s: float
                   ) -> SoakResult:
    prefix = fresh_prefix("soak")
    store = open_store(DurableSettings(redis_url=redis_url, key_prefix=prefix))
    await store.prepare()
    env = clean_env(DURABLE_REDIS_URL=redis_url, DURABLE_KEY_PREFIX=prefix,
                    DURABLE_LOG_LEVEL="INFO", DURABLE_METRICS_PORT="0")
    procs = Procs(logdir)
    stalled = procs.start("soak-stalled", ["strands_durable.worker.WorkerSettings"],
                          {**env, "DURABLE_LOOP_STALL": STALL})
    procs.start("soak-worker", ["strands_durable.worker.WorkerSettings"], env)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(HOGS)]
    sids: list[str] = []
    try:
        async def beating() -> bool:
            return int(await store.redis.hlen(store.keys.workers())) >= 2

        await _wait(beating, 60, "2 worker heartbeats", procs, 0.05)
        loaded = chain_spec(STEPS, delay_s)
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            if procs.dead():
                raise BenchError(f"soak: a worker exited:\n{procs.tail()}")
            missing = IN_FLIGHT - await _running(store, sids[-4 * IN_FLIGHT:])
            sids += [(await start_session(store, loaded))[0] for _ in range(max(0, missing))]
            await asyncio.sleep(0.5)
        elapsed = time.monotonic() - t0

        async def all_done() -> bool:
            return await _running(store, sids) == 0

        await _wait(all_done, 120, "the soak's sessions", procs)
        try:
            await check_once(store.redis, store.keys, sids, STEPS)
        except CommittedTwice as exc:
            raise BenchError(f"EXACTLY-ONCE BROKEN (soak): {exc}") from None
        declared = [d for k in range(store.keys.shards) for d in await store.declarations(k)]
        events = sum([sum(f["type"] == "worker_declared_dead" for _, f in
                          await store.events(sid)) for sid in sids])
        stall_log = Path(procs.logs[procs.procs.index(stalled)])
        stalls = stall_log.read_text(errors="replace").count("loop stall drill")
        return SoakResult(elapsed, stalls, len(declared), events, len(sids), HOGS)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait(timeout=10)
        procs.stop()
        await store.redis.aclose()
