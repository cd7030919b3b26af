"""Rows 1, 2 and 4: steps/s of real `arq strands_durable.worker.WorkerSettings` processes, and the
jobs/s of plain arq draining the same number of no-op jobs."""

from __future__ import annotations

import asyncio
import secrets
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from redis.asyncio import Redis

from bench.procs import Procs, clean_env
from bench.specs import chain_spec
from strands_durable.models import SessionStatus
from strands_durable.scheduler.operations.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store

WORKER_START_TIMEOUT_S = 60.0


class BenchError(RuntimeError):
    pass


@dataclass
class ThroughputResult:
    name: str
    workers: int
    units: int  # steps or jobs
    seconds: float  # the median run's
    runs: list[float] = field(default_factory=list)  # every run's seconds

    @property
    def rate(self) -> float:
        return self.units / self.seconds if self.seconds > 0 else 0.0

    @property
    def rates(self) -> list[float]:
        return [self.units / s for s in self.runs or [self.seconds] if s > 0]

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "rate": round(self.rate, 1),
                "rates": [round(r, 1) for r in self.rates]}


def median_of(results: list[ThroughputResult]) -> ThroughputResult:
    """One row from repeated runs: the median run's time, every run kept."""
    first = results[0]
    runs = [s for r in results for s in (r.runs or [r.seconds])]
    return ThroughputResult(first.name, first.workers, first.units, statistics.median(runs),
                            runs)


def fresh_prefix(tag: str) -> str:
    return f"bench-{tag}-{secrets.token_hex(4)}"


async def _wait(check, timeout_s: float, what: str, procs: Procs, interval_s: float = 0.01):
    deadline = time.monotonic() + timeout_s
    while True:
        value = await check()
        if value:
            return value
        if procs.dead():
            raise BenchError(f"a worker exited while waiting for {what}:\n{procs.tail()}")
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout_s:.0f}s waiting for {what}:\n"
                             f"{procs.tail()}")
        await asyncio.sleep(interval_s)


async def run_ours(redis_url: str, logdir: Path, *, workers: int, noop: bool, sessions: int,
                   steps: int, concurrency: int, timeout_s: float) -> ThroughputResult:
    """Start `workers` worker processes, wait for their heartbeats, then time the
    submission and completion of `sessions` chains of `steps` steps."""
    prefix = fresh_prefix("noop" if noop else "scripted")
    settings = DurableSettings(redis_url=redis_url, key_prefix=prefix,
                               worker_concurrency=concurrency)
    store = open_store(settings)
    env = clean_env(DURABLE_REDIS_URL=redis_url, DURABLE_KEY_PREFIX=prefix,
                    DURABLE_WORKER_CONCURRENCY=str(concurrency), DURABLE_LOG_LEVEL="WARNING")
    if noop:
        env["DURABLE_BENCH_NOOP"] = "1"
    procs = Procs(logdir)
    loaded = chain_spec(steps)  # parsed before the clock starts
    keys = store.keys
    done_keys = [keys.index_status(s, SessionStatus.COMPLETED) for s in range(keys.shards)]
    failed_keys = [keys.index_status(s, SessionStatus.FAILED) for s in range(keys.shards)]
    try:
        for _ in range(workers):
            procs.start("worker", ["strands_durable.worker.WorkerSettings"], env)

        async def beating() -> bool:
            return await store.redis.hlen(keys.workers()) >= workers

        await _wait(beating, WORKER_START_TIMEOUT_S, f"{workers} worker heartbeat(s)", procs,
                    interval_s=0.05)

        async def finished() -> bool:
            async with store.redis.pipeline(transaction=False) as pipe:
                for key in done_keys + failed_keys:
                    pipe.zcard(key)
                counts = await pipe.execute()
            failed = sum(counts[len(done_keys):])
            if failed:
                raise BenchError(f"{failed} bench session(s) failed:\n{procs.tail()}")
            return sum(counts[:len(done_keys)]) >= sessions

        t0 = time.perf_counter()
        results = await asyncio.gather(*(start_session(store, loaded) for _ in range(sessions)))
        assert all(created for _, created in results)
        await _wait(finished, timeout_s, f"{sessions} sessions to complete", procs)
        elapsed = time.perf_counter() - t0
    finally:
        procs.stop()
        await store.redis.aclose()
    name = "no-op steps" if noop else "scripted steps"
    return ThroughputResult(name, workers, sessions * steps, elapsed)


async def run_arq(port: int, logdir: Path, *, workers: int, jobs: int, max_jobs: int,
                  poll_delay: float, timeout_s: float) -> ThroughputResult:
    """Enqueue `jobs` no-op arq jobs, start `workers` burst-mode arq workers, release them
    together once all are up, and time until the last one has drained the queue."""
    from arq import create_pool
    from arq.connections import RedisSettings

    queue = fresh_prefix("arq")
    pool = await create_pool(RedisSettings(host="127.0.0.1", port=port),
                             default_queue_name=queue)
    redis = Redis(host="127.0.0.1", port=port, decode_responses=True)
    procs = Procs(logdir)
    env = clean_env(BENCH_ARQ_PORT=str(port), BENCH_ARQ_QUEUE=queue,
                    BENCH_ARQ_MAX_JOBS=str(max_jobs), BENCH_ARQ_POLL_DELAY=str(poll_delay))
    try:
        batch = 200
        for start in range(0, jobs, batch):
            await asyncio.gather(*(pool.enqueue_job("noop", _job_id=f"{queue}-{i}")
                                   for i in range(start, min(start + batch, jobs))))
        if await pool.zcard(queue) != jobs:
            raise BenchError("arq: not every job was enqueued")
        for _ in range(workers):
            procs.start("arq", ["bench.arq_noop.WorkerSettings"], env)

        async def ready() -> bool:
            return int(await redis.get(f"{queue}:ready") or 0) >= workers

        await _wait(ready, WORKER_START_TIMEOUT_S, f"{workers} arq worker(s)", procs,
                    interval_s=0.05)
        t0 = time.time()
        await redis.set(f"{queue}:go", "1")
        deadline = time.monotonic() + timeout_s
        while any(p.poll() is None for p in procs.procs):
            if time.monotonic() > deadline:
                raise BenchError(f"arq workers did not drain {jobs} jobs in {timeout_s:.0f}s")
            await asyncio.sleep(0.02)
        if any(p.returncode for p in procs.procs):
            raise BenchError(f"an arq worker failed:\n{procs.tail()}")
        ends = [float(x) for x in await redis.lrange(f"{queue}:done", 0, -1)]
        if len(ends) != workers:
            raise BenchError(f"arq: {len(ends)} of {workers} workers reported their end")
        done = 0
        async for _ in redis.scan_iter(match=f"arq:result:{queue}-*", count=1000):
            done += 1
        if done != jobs:
            raise BenchError(f"arq: {done} of {jobs} jobs have a result")
        elapsed = max(ends) - t0
    finally:
        procs.stop()
        await pool.aclose()
        await redis.aclose()
    return ThroughputResult(f"arq no-op jobs (poll_delay {poll_delay:g}s)", workers, jobs,
                            elapsed)
