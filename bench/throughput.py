"""Rows 1, 2 and 4: steps/s of real `arq strands_durable.worker.WorkerSettings` processes, and the
jobs/s of plain arq draining the same number of no-op jobs."""

from __future__ import annotations

import asyncio
import secrets
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from redis.asyncio import Redis

from bench.arq_agent import seed_lane
from bench.integrity import CommittedTwice, Footprint, check_once, completed_sessions, footprint
from bench.procs import Procs, clean_env
from bench.redis_stats import RedisCost, RedisSnapshot
from bench.specs import chain_spec
from strands_durable.models import SessionStatus
from strands_durable.sessions.start import start_session
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
    redis: RedisCost | None = None  # the median run's, per unit
    footprint: Footprint | None = None  # ours: what a session holds

    @property
    def rate(self) -> float:
        return self.units / self.seconds if self.seconds > 0 else 0.0

    @property
    def rates(self) -> list[float]:
        return [self.units / s for s in self.runs or [self.seconds] if s > 0]

    def to_dict(self) -> dict[str, object]:
        plain = {k: v for k, v in asdict(self).items() if k not in ("redis", "footprint")}
        return {**plain, "rate": round(self.rate, 1),
                "rates": [round(r, 1) for r in self.rates],
                "redis": self.redis.to_dict() if self.redis else None,
                "footprint": self.footprint.to_dict() if self.footprint else None}


def median_of(results: list[ThroughputResult]) -> ThroughputResult:
    """One row from repeated runs: the median run's time, every run kept; the Redis
    counters of the run nearest the median."""
    first = results[0]
    runs = [s for r in results for s in (r.runs or [r.seconds])]
    mid = statistics.median(runs)
    near = min(results, key=lambda r: abs(r.seconds - mid))
    return ThroughputResult(first.name, first.workers, first.units, mid, runs, near.redis,
                            near.footprint)


def fresh_prefix(tag: str) -> str:
    return f"bench-{tag}-{secrets.token_hex(4)}"


async def _wait(check: Callable[[], Awaitable[bool]], timeout_s: float, what: str,
                procs: Procs, interval_s: float = 0.01) -> bool:
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
                   steps: int, concurrency: int, timeout_s: float,
                   clock: Callable[[bool], None] | None = None) -> ThroughputResult:
    """Start `workers` worker processes, wait for their heartbeats, then time the
    submission and completion of `sessions` chains of `steps` steps. `clock` is told
    when the timed part starts (True) and ends (False)."""
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

        polls = 0

        async def finished() -> bool:
            nonlocal polls
            polls += 1
            async with store.redis.pipeline(transaction=False) as pipe:
                for key in done_keys + failed_keys:
                    pipe.zcard(key)
                counts = await pipe.execute()
            failed = sum(counts[len(done_keys):])
            if failed:
                raise BenchError(f"{failed} bench session(s) failed:\n{procs.tail()}")
            return sum(counts[:len(done_keys)]) >= sessions

        before = await RedisSnapshot.take(store.redis)
        if clock is not None:
            clock(True)
        t0 = time.perf_counter()
        results = await asyncio.gather(*(start_session(store, loaded) for _ in range(sessions)))
        assert all(created for _, created in results)
        await _wait(finished, timeout_s, f"{sessions} sessions to complete", procs)
        elapsed = time.perf_counter() - t0
        if clock is not None:
            clock(False)
        after = await RedisSnapshot.take(store.redis)
        procs.stop()
        cost = RedisCost.between(before, after, sessions * steps, own_reads=polls)
        sids = await completed_sessions(store.redis, keys)
        try:
            await check_once(store.redis, keys, sids, steps)
        except CommittedTwice as exc:
            raise BenchError(f"EXACTLY-ONCE BROKEN: {exc}") from None
        held = await footprint(store.redis, keys, sids, steps)
    finally:
        procs.stop()
        await store.redis.aclose()
    name = "no-op steps" if noop else "scripted steps"
    return ThroughputResult(name, workers, sessions * steps, elapsed, redis=cost,
                            footprint=held)


async def run_arq(port: int, logdir: Path, *, workers: int, jobs: int, max_jobs: int,
                  poll_delay: float, timeout_s: float,
                  agent_chains: tuple[int, int] | None = None,
                  restored: int | None = None, lean: bool = False) -> ThroughputResult:
    """Enqueue `jobs` no-op arq jobs (or, with `agent_chains` = (sessions, steps), one
    `agent_step` job per step of that many chains, each with its step's history; with
    `restored` too, one job per chain, its last step, restoring that many messages),
    start `workers` burst-mode arq workers, release them together once all are up, and
    time until the last one has drained the queue."""
    from arq import create_pool
    from arq.connections import RedisSettings

    queue = fresh_prefix("arq")
    pool = await create_pool(RedisSettings(host="127.0.0.1", port=port),
                             default_queue_name=queue)
    redis = Redis(host="127.0.0.1", port=port, decode_responses=True)
    procs = Procs(logdir)
    env = clean_env(BENCH_ARQ_PORT=str(port), BENCH_ARQ_QUEUE=queue,
                    BENCH_ARQ_MAX_JOBS=str(max_jobs), BENCH_ARQ_POLL_DELAY=str(poll_delay),
                    BENCH_ARQ_LEAN="1" if lean else "0")
    try:
        calls = (_agent_jobs(queue, *agent_chains, restored) if agent_chains
                 else [("noop", ())] * jobs)
        if agent_chains:
            lane = seed_lane(agent_chains[1] if restored is None else restored // 2)
            for s in range(agent_chains[0] if lane else 0):
                await redis.rpush(f"{queue}:lane:{s}", *lane)
        jobs = len(calls)
        batch = 200
        for start in range(0, jobs, batch):
            await asyncio.gather(*(pool.enqueue_job(fn, *a, _job_id=f"{queue}-{i}")
                                   for i, (fn, a) in enumerate(calls[start:start + batch],
                                                               start)))
        if await pool.zcard(queue) != jobs:
            raise BenchError("arq: not every job was enqueued")
        for _ in range(workers):
            procs.start("arq", ["bench.arq_noop.WorkerSettings"], env)

        async def ready() -> bool:
            return int(await redis.get(f"{queue}:ready") or 0) >= workers

        await _wait(ready, WORKER_START_TIMEOUT_S, f"{workers} arq worker(s)", procs,
                    interval_s=0.05)
        before = await RedisSnapshot.take(redis)
        t0 = time.time()
        await redis.set(f"{queue}:go", "1")
        deadline = time.monotonic() + timeout_s
        while any(p.poll() is None for p in procs.procs):
            if time.monotonic() > deadline:
                raise BenchError(f"arq workers did not drain {jobs} jobs in {timeout_s:.0f}s")
            await asyncio.sleep(0.02)
        after = await RedisSnapshot.take(redis)
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
        if agent_chains:
            stored = sum([await redis.hlen(f"{queue}:res:{s}")
                          for s in range(agent_chains[0])])
            if stored != jobs:
                raise BenchError(f"arq: {stored} of {jobs} agent replies were stored")
        elapsed = max(ends) - t0
    finally:
        procs.stop()
        await pool.aclose()
        await redis.aclose()
    what = "agent call + history" if agent_chains else "no-op"
    return ThroughputResult(f"arq {what} jobs (poll_delay {poll_delay:g}s)", workers, jobs,
                            elapsed, redis=RedisCost.between(before, after, jobs, own_reads=1))


def _agent_jobs(queue: str, sessions: int, steps: int, restored: int | None = None
                ) -> list[tuple[str, tuple[object, ...]]]:
    """Step k of chain s: its lane's first 2k messages, prompt "step k" (as ours); with
    `restored`, only each chain's last step (k = restored / 2)."""
    ks = range(steps) if restored is None else [restored // 2]
    return [("agent_step", (f"{queue}:lane:{s}", 2 * k, f"step {k}", steps,
                            f"{queue}:res:{s}", str(k)))
            for k in ks for s in range(sessions)]
