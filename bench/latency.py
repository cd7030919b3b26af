"""Row 3: `Store.commit` latency by step index, in-process.

A StepConsumer (bench_noop=True, default concurrency) runs on the private
redis-server; its store's `commit` is wrapped with time.perf_counter, and every
successful commit is recorded under the 1-based step number of its job
(job.meta["index"] + 1, or the N of job.key "step:N" + 1). The latency is what the
worker sees: script call, round trip, and any wait for its event loop.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from bench.specs import chain_spec
from bench.throughput import BenchError, fresh_prefix
from strands_durable.models import SessionStatus
from strands_durable.scheduler.operations.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.store import CommitOutcome, CommitRequest
from strands_durable.worker import step_runner
from strands_durable.worker.consumer import StepConsumer

LAG_PROBE_S = 0.005


def step_number(req: CommitRequest) -> int:
    index = req.job.meta.get("index")
    if index is None:
        index = int(req.job.key.split(":", 1)[1])
    return int(index) + 1


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass
class Window:
    label: str
    first: int  # 1-based step numbers, inclusive
    last: int
    samples: list[float] = field(default_factory=list)  # ms

    @property
    def p50(self) -> float:
        return percentile(self.samples, 50)

    @property
    def p99(self) -> float:
        return percentile(self.samples, 99)

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "steps": [self.first, self.last], "n": len(self.samples),
                "p50_ms": round(self.p50, 4), "p99_ms": round(self.p99, 4),
                "mean_ms": round(sum(self.samples) / max(1, len(self.samples)), 4)}


@dataclass
class LatencyResult:
    sessions: int
    steps: int
    seconds: float
    low: Window
    high: Window
    all_p50_ms: float
    all_p99_ms: float
    concurrency: int
    conflicts: int  # commits answered "conflict" (re-planned); expected 0 for chains
    lag_p50_ms: float  # event-loop lag: how late a 1 ms sleep wakes up
    lag_p99_ms: float
    plan_low: Window | None = None  # planning time (plan_commit, in its thread)
    plan_high: Window | None = None

    @property
    def plan_ratio(self) -> float:
        if self.plan_low is None or self.plan_high is None or not self.plan_low.p50:
            return float("nan")
        return self.plan_high.p50 / self.plan_low.p50

    @property
    def ratio(self) -> float:
        return self.high.p50 / self.low.p50 if self.low.p50 else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {"sessions": self.sessions, "steps": self.steps,
                "concurrency": self.concurrency, "conflicts": self.conflicts,
                "loop_lag_p50_ms": round(self.lag_p50_ms, 4),
                "loop_lag_p99_ms": round(self.lag_p99_ms, 4),
                "seconds": round(self.seconds, 3),
                "steps_per_s": round(self.sessions * self.steps / self.seconds, 1),
                "low": self.low.to_dict(), "high": self.high.to_dict(),
                "all_p50_ms": round(self.all_p50_ms, 4), "all_p99_ms": round(self.all_p99_ms, 4),
                "ratio_p50_high_low": round(self.ratio, 3),
                "plan_low": self.plan_low.to_dict() if self.plan_low else None,
                "plan_high": self.plan_high.to_dict() if self.plan_high else None,
                "plan_ratio_p50_high_low": round(self.plan_ratio, 3)}


async def run_latency(redis_url: str, *, sessions: int, steps: int, low: tuple[int, int],
                      high: tuple[int, int], concurrency: int, timeout_s: float,
                      ) -> LatencyResult:
    prefix = fresh_prefix("latency")
    settings = DurableSettings(redis_url=redis_url, key_prefix=prefix, bench_noop=True,
                               worker_concurrency=concurrency)
    store = open_store(settings)
    by_step: dict[int, list[float]] = defaultdict(list)
    conflicts = 0
    lags: list[float] = []
    commit = store.commit

    async def timed_commit(req: CommitRequest) -> CommitOutcome:
        nonlocal conflicts
        t0 = time.perf_counter()
        outcome = await commit(req)
        elapsed = time.perf_counter() - t0
        if outcome.verdict == "ok":
            by_step[step_number(req)].append(elapsed * 1000)
        elif outcome.verdict == "conflict":
            conflicts += 1
        return outcome

    async def lag_probe() -> None:
        # A task that sleeps 5 ms at a time: how much later than asked it runs is how
        # long a ready coroutine (e.g. a commit whose reply has arrived) waits for the
        # event loop while other steps hold it.
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(LAG_PROBE_S)
            lags.append((time.perf_counter() - t0 - LAG_PROBE_S) * 1000)

    planned: dict[int, list[float]] = defaultdict(list)
    plan = step_runner.plan_commit

    def timed_plan(snapshot: Any, job: Any, *args: Any, **kwargs: Any) -> CommitRequest:
        t0 = time.perf_counter()
        request = plan(snapshot, job, *args, **kwargs)
        planned[step_number(request)].append((time.perf_counter() - t0) * 1000)
        return request

    store.commit = timed_commit  # type: ignore[method-assign]
    step_runner.plan_commit = timed_plan
    loaded = chain_spec(steps)
    consumer = StepConsumer(settings, store)
    keys = store.keys
    done_keys = [keys.index_status(s, SessionStatus.COMPLETED) for s in range(keys.shards)]
    failed_keys = [keys.index_status(s, SessionStatus.FAILED) for s in range(keys.shards)]
    await consumer.start()
    probe = asyncio.create_task(lag_probe())
    try:
        t0 = time.perf_counter()
        await asyncio.gather(*(start_session(store, loaded) for _ in range(sessions)))
        deadline = time.monotonic() + timeout_s
        while True:
            done = sum([await store.redis.zcard(k) for k in done_keys])
            failed = sum([await store.redis.zcard(k) for k in failed_keys])
            if failed:
                raise BenchError(f"latency: {failed} session(s) failed")
            if done >= sessions:
                break
            if time.monotonic() > deadline:
                raise BenchError(f"latency: {done}/{sessions} sessions done after "
                                 f"{timeout_s:.0f}s")
            await asyncio.sleep(0.05)
        elapsed = time.perf_counter() - t0
    finally:
        step_runner.plan_commit = plan
        probe.cancel()
        await consumer.stop(grace_s=5)
        await store.redis.aclose()

    def window(label: str, span: tuple[int, int],
               samples: dict[int, list[float]] = by_step) -> Window:
        w = Window(label, *span)
        for n in range(span[0], span[1] + 1):
            w.samples.extend(samples.get(n, []))
        return w

    everything = [x for xs in by_step.values() for x in xs]
    return LatencyResult(sessions, steps, elapsed, window("step 10", low),
                         window(f"step {steps}", high), percentile(everything, 50),
                         percentile(everything, 99), concurrency, conflicts,
                         percentile(lags, 50), percentile(lags, 99),
                         window("step 10", low, planned), window(f"step {steps}", high, planned))
