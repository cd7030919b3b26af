"""Row 3: `Store.commit` latency, planning time and worker CPU by step index, in-process.

A StepConsumer (bench_noop=True, default concurrency) runs on the private
redis-server; its store's `commit` is wrapped with time.perf_counter, and every
successful commit is recorded under the 1-based step number of its job
(job.meta["index"] + 1, or the N of job.key "step:N" + 1). The latency is what the
worker sees: script call, round trip, and any wait for its event loop. Worker CPU per
step is this process's CPU time (time.process_time: the consumer, its planning
threads, the bench's probe and polling) between the first and the last commit of a
window's steps, divided by every commit made meanwhile.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.integrity import CommittedTwice, Footprint, check_once, completed_sessions, footprint
from bench.specs import chain_spec
from bench.throughput import BenchError, fresh_prefix
from strands_durable.models import SessionStatus
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.store import CommitOutcome, CommitRequest, Store
from strands_durable.worker import step_runner
from strands_durable.worker.consumer import StepConsumer
from strands_durable.worker.heap import freeze_startup_heap

LAG_PROBE_S = 0.005
CREATE_BATCH = 500  # sessions created concurrently at a time (10,000 at once: a memory spike)


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


def ratio(high: float, low: float) -> float:
    return high / low if low and not math.isnan(low) else float("nan")


@dataclass
class Window:
    label: str
    first: int  # 1-based step numbers, inclusive
    last: int
    samples: list[float] = field(default_factory=list)  # ms
    in_flight: list[int] = field(default_factory=list)  # steps running at each commit

    @property
    def in_flight_mean(self) -> float:
        return sum(self.in_flight) / len(self.in_flight) if self.in_flight else float("nan")

    @property
    def p50(self) -> float:
        return percentile(self.samples, 50)

    @property
    def p99(self) -> float:
        return percentile(self.samples, 99)

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "steps": [self.first, self.last], "n": len(self.samples),
                "p50_ms": round(self.p50, 4), "p99_ms": round(self.p99, 4),
                "mean_ms": round(sum(self.samples) / max(1, len(self.samples)), 4),
                "in_flight_mean": round(self.in_flight_mean, 2)}


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
    lag_p50_ms: float  # event-loop lag: how late a 5 ms sleep wakes up
    lag_p99_ms: float
    plan_low: Window | None = None  # planning time (plan_commit, in its thread)
    plan_high: Window | None = None
    cpu_low_us: float = float("nan")  # worker CPU per step in the low / high window
    cpu_high_us: float = float("nan")
    footprint: Footprint | None = None  # what a completed session holds
    running_mean: float = float("nan")  # steps running, sampled with the lag probe
    adaptive: bool = True  # the worker's adaptive concurrency (worker/slots.py) was on

    @property
    def plan_ratio(self) -> float:
        if self.plan_low is None or self.plan_high is None:
            return float("nan")
        return ratio(self.plan_high.p50, self.plan_low.p50)

    @property
    def ratio(self) -> float:
        return ratio(self.high.p50, self.low.p50)

    @property
    def cpu_ratio(self) -> float:
        return ratio(self.cpu_high_us, self.cpu_low_us)

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
                "plan_ratio_p50_high_low": round(self.plan_ratio, 3),
                "cpu_low_us": round(self.cpu_low_us, 1), "cpu_high_us": round(self.cpu_high_us, 1),
                "cpu_ratio_high_low": round(self.cpu_ratio, 3),
                "running_mean": round(self.running_mean, 2), "adaptive": self.adaptive,
                "footprint": self.footprint.to_dict() if self.footprint else None}


class Probe:
    """Wraps one store's commit and the planner, in this process, and records per step:
    commit latency, planning time, and (process CPU, commits so far) at each commit of
    a step in `cpu_spans`. Reading the process's CPU time is a system call that costs
    tens of microseconds on a virtual machine: read at every commit, it was a tenth of
    the worker CPU it measured, so it is read only where a window needs it."""

    def __init__(self, store: Store, cpu_spans: tuple[tuple[int, int], ...] = ()) -> None:
        self.store = store
        self.cpu_steps = frozenset(n for first, last in cpu_spans for n in range(first, last + 1))
        self.commits: dict[int, list[float]] = defaultdict(list)  # step -> ms
        self.plans: dict[int, list[float]] = defaultdict(list)
        # Steps running as each commit returned: commit latency follows it (a commit's
        # reply waits for the other steps' Python), so windows are compared knowing it.
        self.in_flight: dict[int, list[int]] = defaultdict(list)
        self.cpu: dict[int, list[tuple[float, int]]] = defaultdict(list)
        self.count = 0  # successful commits
        self.conflicts = 0
        self.lags: list[float] = []
        self.running: list[int] = []  # steps running at each lag-probe wake-up
        self.running_now: Callable[[], int] | None = None
        self._commit = store.commit
        self._plan = step_runner.plan_commit

    def install(self) -> None:
        async def timed_commit(req: CommitRequest, take_next: int = 0) -> CommitOutcome:
            t0 = time.perf_counter()
            outcome = await self._commit(req, take_next)
            elapsed = time.perf_counter() - t0
            if outcome.verdict == "ok":
                n = step_number(req)
                self.commits[n].append(elapsed * 1000)
                if self.running_now is not None:
                    self.in_flight[n].append(self.running_now())
                self.count += 1
                if n in self.cpu_steps:
                    self.cpu[n].append((time.process_time(), self.count))
            elif outcome.verdict == "conflict":
                self.conflicts += 1
            return outcome

        def timed_plan(snapshot: Any, job: Any, *args: Any, **kwargs: Any) -> CommitRequest:
            t0 = time.perf_counter()
            request = self._plan(snapshot, job, *args, **kwargs)
            self.plans[step_number(request)].append((time.perf_counter() - t0) * 1000)
            return request

        self.store.commit = timed_commit  # type: ignore[method-assign]
        step_runner.plan_commit = timed_plan

    def uninstall(self) -> None:
        step_runner.plan_commit = self._plan
        self.store.commit = self._commit  # type: ignore[method-assign]

    async def lag_probe(self) -> None:
        # A task that sleeps 5 ms at a time: how much later than asked it runs is how
        # long a ready coroutine (e.g. a commit whose reply has arrived) waits for the
        # event loop while other steps hold it.
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(LAG_PROBE_S)
            self.lags.append((time.perf_counter() - t0 - LAG_PROBE_S) * 1000)
            if self.running_now is not None:
                self.running.append(self.running_now())

    def window(self, label: str, span: tuple[int, int], plans: bool = False) -> Window:
        source = self.plans if plans else self.commits
        w = Window(label, *span)
        for n in range(span[0], span[1] + 1):
            w.samples.extend(source.get(n, []))
            if not plans:
                w.in_flight.extend(self.in_flight.get(n, []))
        return w

    def cpu_per_step_us(self, span: tuple[int, int]) -> float:
        marks = [m for n in range(span[0], span[1] + 1) for m in self.cpu.get(n, [])]
        if len(marks) < 2:
            return float("nan")
        first, last = min(marks, key=lambda m: m[1]), max(marks, key=lambda m: m[1])
        return (last[0] - first[0]) / (last[1] - first[1]) * 1e6

    def all_commits(self) -> list[float]:
        return [x for xs in self.commits.values() for x in xs]


def mean(values: list[int]) -> float:
    return sum(values) / len(values) if values else float("nan")


async def create_sessions(store: Store, steps: int, sessions: int) -> list[str]:
    loaded = chain_spec(steps)
    sids: list[str] = []
    for i in range(0, sessions, CREATE_BATCH):
        batch = min(CREATE_BATCH, sessions - i)
        sids += [sid for sid, _ in
                 await asyncio.gather(*(start_session(store, loaded) for _ in range(batch)))]
    return sids


async def wait_done(store: Store, sessions: int, timeout_s: float, what: str) -> None:
    keys = store.keys
    done_keys = [keys.index_status(s, SessionStatus.COMPLETED) for s in range(keys.shards)]
    failed_keys = [keys.index_status(s, SessionStatus.FAILED) for s in range(keys.shards)]
    deadline = time.monotonic() + timeout_s
    while True:
        done = sum([await store.redis.zcard(k) for k in done_keys])
        if sum([await store.redis.zcard(k) for k in failed_keys]):
            raise BenchError(f"{what}: a session failed")
        if done >= sessions:
            return
        if time.monotonic() > deadline:
            raise BenchError(f"{what}: {done}/{sessions} sessions done after {timeout_s:.0f}s")
        await asyncio.sleep(0.05)


async def checked(store: Store, steps: int, what: str, sample: int) -> Footprint | None:
    """Exactly once for every completed session (else the bench fails), and the
    footprint of `sample` of them (0: none)."""
    sids = await completed_sessions(store.redis, store.keys)
    try:
        await check_once(store.redis, store.keys, sids, steps)
    except CommittedTwice as exc:
        raise BenchError(f"EXACTLY-ONCE BROKEN ({what}): {exc}") from None
    return await footprint(store.redis, store.keys, sids, steps, sample) if sample else None


async def run_latency(redis_url: str, *, sessions: int, steps: int, low: tuple[int, int],
                      high: tuple[int, int], concurrency: int, timeout_s: float,
                      footprint_sample: int = 2, adaptive: bool = True) -> LatencyResult:
    """`sessions` chains of `steps` steps, all created before the consumer starts (the
    clock starts with it), run by one in-process StepConsumer to the end."""
    settings = DurableSettings(redis_url=redis_url, key_prefix=fresh_prefix("latency"),
                               bench_noop=True, worker_concurrency=concurrency,
                               worker_adaptive_concurrency=adaptive)
    store = open_store(settings)
    probe = Probe(store, cpu_spans=(low, high))
    consumer = StepConsumer(settings, store)
    try:
        await create_sessions(store, steps, sessions)
        probe.install()
        probe.running_now = lambda: consumer.running
        lag = asyncio.create_task(probe.lag_probe())
        t0 = time.perf_counter()
        await consumer.start()
        freeze_startup_heap()  # as a worker process does once started (worker/heap.py)
        try:
            await wait_done(store, sessions, timeout_s, "latency")
        finally:
            elapsed = time.perf_counter() - t0
            lag.cancel()
            probe.uninstall()
            await consumer.stop(grace_s=5)
        held = await checked(store, steps, "latency", footprint_sample)
    finally:
        await store.redis.aclose()
    everything = probe.all_commits()
    return LatencyResult(sessions, steps, elapsed, probe.window("step 10", low),
                         probe.window(f"step {steps}", high), percentile(everything, 50),
                         percentile(everything, 99), concurrency, probe.conflicts,
                         percentile(probe.lags, 50), percentile(probe.lags, 99),
                         probe.window("step 10", low, plans=True),
                         probe.window(f"step {steps}", high, plans=True),
                         probe.cpu_per_step_us(low), probe.cpu_per_step_us(high), held,
                         mean(probe.running), adaptive)
