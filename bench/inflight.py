"""Many steps in flight on one worker (issue 26): one real `arq
strands_durable.worker.WorkerSettings` process, `--sessions` chains of `--steps` steps
whose model call (the `scripted` provider, `delay_s`) takes `--delay-s`; then arq
(`max_jobs` = `--max-jobs`) making the same call, one job per step.

    python -m bench.inflight                         # 1,000 x 5 steps, 2 s a call
    python -m bench.inflight --sessions 50 --delay-s 0.5 --skip-arq

Our worker runs with its defaults (DURABLE_WORKER_CONCURRENCY included) unless
`--concurrency` is given. Printed for each: peak steps in flight at once, steps/s over
the run (and as a share of the bound: every session's steps back to back at `delay_s`
each), the worker's RSS idle and at its peak (VmHWM) and per step in flight, and its CPU
per step. Ours counts the steps in flight twice: from its own gauge
(`durable_worker_running_steps` on its /metrics, sampled every SAMPLE_S) and exactly, from
each step's `step_started` and `step_completed` events (to the millisecond); arq's job
counts its jobs running in its process.

`run_inflight(..., hold=DIR)` (the tests: a count, never a timing) holds every chain's first
step in flight, on both sides, until all of them are at once, then lets them go: ours at
a worker breakpoint (DURABLE_BREAKPOINT_DIR=DIR, worker/faults.py) and until its gauge has
counted them too, arq's jobs on a Redis key, in place of hoping a long `delay_s` keeps
the first ones running until the last ones start.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

# How often ours' gauges and RSS are sampled: each scrape renders the worker's whole
# /metrics, about 5% of its CPU at 10 a second (py-spy), a cost arq's side never pays.
SAMPLE_S = 0.5
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
WARMUP_TIMEOUT_S = 60.0
# The goal (issue 26), for the target lines.
GOAL_IN_FLIGHT = 1000
GOAL_RATE = 400.0
GOAL_RSS = 1 << 30
GOAL_VS_ARQ = 1.0


@dataclass
class InflightResult:
    name: str
    sessions: int
    steps: int  # per session
    delay_s: float
    concurrency: int  # our worker's slot ceiling, or arq's max_jobs
    seconds: float  # submit (ours) / release (arq) to the last step done
    peak_in_flight: int  # ours: exact, from the events; arq: counted in the job
    peak_gauge: int  # ours: the worker's own gauge at its highest sample (arq: = peak)
    rss_idle: int  # bytes, after start-up (ours: after a warm-up session)
    rss_peak: int  # VmHWM
    cpu_s: float  # the worker process's user + system CPU over the run
    slots_min: int = 0  # ours: the lowest slot limit sampled (adaptive concurrency)
    running_mean: float = 0.0  # ours: steps running, mean of the samples

    @property
    def units(self) -> int:
        return self.sessions * self.steps

    @property
    def rate(self) -> float:
        return self.units / self.seconds if self.seconds > 0 else 0.0

    @property
    def bound(self) -> float:
        """Steps/s if every session's steps ran back to back at exactly delay_s each."""
        return self.sessions / self.delay_s if self.delay_s > 0 else float("inf")

    @property
    def rss_per_step(self) -> float:
        """Bytes the peak adds to the idle worker, per step in flight at the peak."""
        return (self.rss_peak - self.rss_idle) / self.peak_in_flight if self.peak_in_flight else 0.0

    @property
    def cpu_per_step_ms(self) -> float:
        return 1000 * self.cpu_s / self.units if self.units else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "rate": round(self.rate, 1), "bound": round(self.bound, 1),
                "rss_per_step": round(self.rss_per_step),
                "cpu_per_step_ms": round(self.cpu_per_step_ms, 3)}


# -- /proc -----------------------------------------------------------------------------
def proc_memory(pid: int | str = "self") -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process, in bytes."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            found[line[:5]] = int(line.split()[1]) * 1024
    return found.get("VmRSS", 0), found.get("VmHWM", 0)


def proc_cpu_s(pid: int | str = "self") -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


# -- ours --------------------------------------------------------------------------------
_RUNNING = re.compile(r"^durable_worker_running_steps (\S+)$", re.M)
_SLOTS = re.compile(r"^durable_worker_step_slots (\S+)$", re.M)


async def _gauges(client: Any, url: str) -> tuple[int, int] | None:
    """The worker's steps running and its slot limit now (None: no answer)."""
    try:
        reply = await client.get(url)
    except Exception:  # not up yet, or busy: the next sample
        return None
    running, slots = _RUNNING.search(reply.text), _SLOTS.search(reply.text)
    if running is None or slots is None:
        return None
    return int(float(running.group(1))), int(float(slots.group(1)))


async def _exact_peak(redis: Any, keys: Any, sids: list[str]) -> int:
    """The most steps in flight at once: each step from its step_started (or
    step_reclaimed) event to its step_completed, to the millisecond; an end sorts before a
    start of the same millisecond (the peak is never overstated)."""
    from strands_durable.models import EventType

    marks: list[tuple[str, int]] = []
    begin = {EventType.STEP_STARTED.value, EventType.STEP_RECLAIMED.value}
    for sid in sids:
        for _, fields in await redis.xrange(keys.events(sid), "-", "+"):
            kind = _text(fields.get(b"type", fields.get("type", "")))
            at = _text(fields.get(b"at", fields.get("at", "")))
            if kind in begin:
                marks.append((at, 1))
            elif kind == EventType.STEP_COMPLETED.value:
                marks.append((at, -1))
    peak = running = 0
    for _, change in sorted(marks):
        running += change
        peak = max(peak, running)
    return peak


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def _release_when_all_held(hold: Path, name: str, sessions: int,
                                 samples: list[tuple[int, int]] | None, timeout_s: float,
                                 procs: Any) -> None:
    """Wait until `sessions` first steps have reached the breakpoint `name` in `hold` (and
    the worker's gauge, when it serves one, has been sampled counting them all), then
    remove it: every one of them goes on."""
    from bench.throughput import _wait
    from strands_durable.worker.faults import HITS_SUFFIX

    hits = hold / (name + HITS_SUFFIX)

    async def all_held() -> bool:
        held = hits.read_text().count("\n") if hits.exists() else 0
        counted = samples is None or max((r for r, _ in samples), default=0) >= sessions
        return held >= sessions and counted

    await _wait(all_held, timeout_s, f"{sessions} first steps held at once", procs, 0.05)
    (hold / name).unlink()


async def run_ours(redis_url: str, logdir: Path, *, sessions: int, steps: int, delay_s: float,
                   concurrency: int | None, timeout_s: float, adaptive: bool = True,
                   hold: Path | None = None) -> InflightResult:
    """One worker process with its defaults (and DURABLE_WORKER_CONCURRENCY=`concurrency`
    when given; adaptive concurrency off unless `adaptive`); a warm-up session, then
    `sessions` chains submitted at once and run to the end, every step checked to be
    committed once; with `hold`, every chain's first step held until all are in flight."""
    import httpx

    from bench.integrity import CommittedTwice, check_once
    from bench.procs import Procs, clean_env
    from bench.redis_server import free_port
    from bench.specs import chain_spec
    from bench.throughput import WORKER_START_TIMEOUT_S, BenchError, _wait, fresh_prefix
    from strands_durable.models import SessionStatus
    from strands_durable.patterns.chain import step_key
    from strands_durable.sessions.start import start_session
    from strands_durable.settings import DurableSettings
    from strands_durable.store.connect import open_store
    from strands_durable.worker.faults import breakpoint_name

    prefix = fresh_prefix("inflight")
    port = free_port()
    store = open_store(DurableSettings(redis_url=redis_url, key_prefix=prefix))
    env = clean_env(DURABLE_REDIS_URL=redis_url, DURABLE_KEY_PREFIX=prefix,
                    DURABLE_METRICS_PORT=str(port), DURABLE_LOG_LEVEL="WARNING")
    if concurrency:
        env["DURABLE_WORKER_CONCURRENCY"] = str(concurrency)
    if not adaptive:
        env["DURABLE_WORKER_ADAPTIVE_CONCURRENCY"] = "false"
    if hold is not None:
        env["DURABLE_BREAKPOINT_DIR"] = str(hold)
    procs = Procs(logdir)
    loaded, warm = chain_spec(steps, delay_s), chain_spec(1)
    keys = store.keys
    done_keys = [keys.index_status(s, SessionStatus.COMPLETED) for s in range(keys.shards)]
    failed_keys = [keys.index_status(s, SessionStatus.FAILED) for s in range(keys.shards)]
    metrics_url = f"http://127.0.0.1:{port}/metrics"
    try:
        pid = procs.start("inflight-worker", ["strands_durable.worker.WorkerSettings"], env).pid

        async def beating() -> bool:
            return await store.redis.hlen(keys.workers()) >= 1

        await _wait(beating, WORKER_START_TIMEOUT_S, "the worker's heartbeat", procs, 0.05)

        async def completed(n: int) -> bool:
            async with store.redis.pipeline(transaction=False) as pipe:
                for key in done_keys + failed_keys:
                    pipe.zcard(key)
                counts = await pipe.execute()
            if sum(counts[len(done_keys):]):
                raise BenchError(f"a bench session failed:\n{procs.tail()}")
            return sum(counts[:len(done_keys)]) >= n

        # A warm-up session: what the first step imports and builds is not per-step memory.
        await start_session(store, warm)
        await _wait(lambda: completed(1), WARMUP_TIMEOUT_S, "the warm-up session", procs, 0.02)
        (beat,) = (json.loads(raw) for raw in (await store.redis.hgetall(keys.workers())).values())
        slots = int(beat["concurrency"])  # the worker's DURABLE_WORKER_CONCURRENCY
        async with httpx.AsyncClient(timeout=5) as client:
            # Its gauges, if it serves them (a port another process took first: it runs on
            # without /metrics, and the exact count below still holds).
            deadline = time.monotonic() + 10
            while (served := await _gauges(client, metrics_url)) is None \
                    and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)  # what the warm-up left settles
            rss_idle, _ = proc_memory(pid)
            cpu0 = proc_cpu_s(pid)
            samples: list[tuple[int, int]] = []
            stop = asyncio.Event()

            async def sample() -> None:
                while not stop.is_set():
                    seen = await _gauges(client, metrics_url)
                    if seen is not None:
                        samples.append(seen)
                    await asyncio.sleep(SAMPLE_S)

            sampler = asyncio.create_task(sample())
            held_at = breakpoint_name(loaded.spec.name, step_key(0))
            if hold is not None:  # set after the warm-up, whose chain may share the name
                hold.mkdir(parents=True, exist_ok=True)
                (hold / held_at).touch()
            t0 = time.perf_counter()
            created = await asyncio.gather(*(start_session(store, loaded)
                                             for _ in range(sessions)))
            if hold is not None:
                await _release_when_all_held(hold, held_at, sessions,
                                             samples if served else None, timeout_s, procs)
            # Polled every 50 ms (a 10-second run's end to 0.5%): the bench shares the
            # machine's cores with the worker and redis-server.
            await _wait(lambda: completed(sessions + 1), timeout_s,
                        f"{sessions} sessions to complete", procs, 0.05)
            elapsed = time.perf_counter() - t0
            stop.set()
            await sampler
        cpu_s = proc_cpu_s(pid) - cpu0
        _, rss_peak = proc_memory(pid)
        procs.stop()
        sids = [sid for sid, _ in created]
        try:
            await check_once(store.redis, keys, sids, steps)
        except CommittedTwice as exc:
            raise BenchError(f"EXACTLY-ONCE BROKEN: {exc}") from None
        peak = await _exact_peak(store.redis, keys, sids)
    finally:
        procs.stop()
        await store.redis.aclose()
    return InflightResult("ours", sessions, steps, delay_s, slots, elapsed, peak,
                          max((r for r, _ in samples), default=0), rss_idle, rss_peak, cpu_s,
                          min((s for _, s in samples), default=0),
                          sum(r for r, _ in samples) / len(samples) if samples else 0.0)


# -- arq making the same call ---------------------------------------------------------------
ARQ_QUEUE = os.environ.get("BENCH_ARQ_QUEUE", "bench:inflight")
_arq_running = 0
_arq_peak = 0


@cache
def _arq_model() -> tuple[Any, str]:
    from bench.specs import chain_spec
    from strands_durable.worker.execute import model_config
    from strands_durable.worker.providers import build_model
    from strands_durable.worker.system_prompt import system_prompt

    spec = chain_spec(int(os.environ.get("BENCH_INFLIGHT_STEPS", "1")),
                      float(os.environ.get("BENCH_INFLIGHT_DELAY_S", "0"))).spec
    return build_model(model_config(spec, "a")), system_prompt(spec, "a",
                                                               spec.agents["a"].prompt)


async def inflight_step(ctx: dict[str, Any], lane: str, upto: int, prompt: str, results: str,
                        field: str) -> str:
    """Step k of a chain, as bench/arq_agent.py's `agent_step` (its lane's first 2k
    messages restored, a Strands Agent on the same scripted model, the reply stored), on
    the model with the run's delay; counts the jobs running at once."""
    from strands import Agent
    from strands.agent.conversation_manager import NullConversationManager

    global _arq_running, _arq_peak
    _arq_running += 1
    _arq_peak = max(_arq_peak, _arq_running)
    try:
        redis = ctx["redis"]
        if upto == 0 and os.environ.get("BENCH_INFLIGHT_HOLD"):
            await _held(redis)
        raw = await redis.lrange(lane, 0, upto - 1) if upto else []
        model, instructions = _arq_model()
        agent = Agent(model=model, system_prompt=instructions,
                      messages=[json.loads(m) for m in raw],
                      conversation_manager=NullConversationManager(), callback_handler=None)
        reply = str(await agent.invoke_async(prompt)).strip()
        await redis.hset(results, field, reply)
        return reply
    finally:
        _arq_running -= 1


async def _held(redis: Any) -> None:
    """A first step held (BENCH_INFLIGHT_HOLD): counted, then running until the bench
    lets every first step go."""
    await redis.incr(f"{ARQ_QUEUE}:held")
    while not await redis.exists(f"{ARQ_QUEUE}:release"):
        await asyncio.sleep(0.02)


async def _arq_startup(ctx: dict[str, Any]) -> None:
    from strands import Agent  # noqa: F401 - imported before the idle RSS is read

    _arq_model()
    redis = ctx["redis"]
    rss, _ = proc_memory()
    await redis.set(f"{ARQ_QUEUE}:idle", json.dumps({"rss": rss, "cpu": proc_cpu_s()}))
    await redis.incr(f"{ARQ_QUEUE}:ready")
    while not await redis.exists(f"{ARQ_QUEUE}:go"):
        await asyncio.sleep(0.002)


async def _arq_shutdown(ctx: dict[str, Any]) -> None:
    _, hwm = proc_memory()
    await ctx["redis"].rpush(f"{ARQ_QUEUE}:done", json.dumps({
        "end": time.time(), "peak": _arq_peak, "hwm": hwm, "cpu": proc_cpu_s()}))


class ArqWorkerSettings:
    """`arq bench.inflight.ArqWorkerSettings`: burst mode, poll_delay 0.01 s (arq at its
    best), max_jobs from BENCH_ARQ_MAX_JOBS, a start barrier (start-up is not timed)."""

    functions = [inflight_step]
    on_startup = _arq_startup
    on_shutdown = _arq_shutdown
    queue_name = ARQ_QUEUE
    max_jobs = int(os.environ.get("BENCH_ARQ_MAX_JOBS", "1000"))
    poll_delay = 0.01
    burst = True
    health_check_interval = 3600
    keep_result = 60

    @staticmethod
    def _redis() -> Any:
        from arq.connections import RedisSettings

        return RedisSettings(host="127.0.0.1", port=int(os.environ.get("BENCH_ARQ_PORT",
                                                                      "6379")))

    redis_settings = _redis()


async def run_arq(port: int, logdir: Path, *, sessions: int, steps: int, delay_s: float,
                  max_jobs: int, timeout_s: float, hold: bool = False) -> InflightResult:
    """One burst-mode arq worker; one `inflight_step` job per step of every chain, all
    enqueued first (untimed); timed from the release of its start barrier to its end;
    with `hold`, every chain's first step held until all are running at once."""
    from arq import create_pool
    from arq.connections import RedisSettings
    from redis.asyncio import Redis

    from bench.arq_agent import seed_lane
    from bench.procs import Procs, clean_env
    from bench.throughput import WORKER_START_TIMEOUT_S, BenchError, _wait, fresh_prefix

    queue = fresh_prefix("arq-inflight")
    pool = await create_pool(RedisSettings(host="127.0.0.1", port=port),
                             default_queue_name=queue)
    redis = Redis(host="127.0.0.1", port=port, decode_responses=True)
    procs = Procs(logdir)
    env = clean_env(BENCH_ARQ_PORT=str(port), BENCH_ARQ_QUEUE=queue,
                    BENCH_ARQ_MAX_JOBS=str(max_jobs), BENCH_INFLIGHT_STEPS=str(steps),
                    BENCH_INFLIGHT_DELAY_S=str(delay_s))
    if hold:
        env["BENCH_INFLIGHT_HOLD"] = "1"
    jobs = sessions * steps
    try:
        lane = seed_lane(steps)
        for s in range(sessions):
            await redis.rpush(f"{queue}:lane:{s}", *lane)
        # Step k of every chain, then step k + 1: the order our chains reach them.
        calls = [(f"{queue}:lane:{s}", 2 * k, f"step {k}", f"{queue}:res:{s}", str(k))
                 for k in range(steps) for s in range(sessions)]
        for start in range(0, jobs, 500):
            await asyncio.gather(*(pool.enqueue_job("inflight_step", *a, _job_id=f"{queue}-{i}")
                                   for i, a in enumerate(calls[start:start + 500], start)))
        if await pool.zcard(queue) != jobs:
            raise BenchError("arq: not every job was enqueued")
        pid = procs.start("arq-inflight", ["bench.inflight.ArqWorkerSettings"], env).pid

        async def ready() -> bool:
            return int(await redis.get(f"{queue}:ready") or 0) >= 1

        await _wait(ready, WORKER_START_TIMEOUT_S, "the arq worker", procs, 0.05)
        idle = json.loads(await redis.get(f"{queue}:idle"))
        t0 = time.time()
        await redis.set(f"{queue}:go", "1")
        if hold:
            async def all_held() -> bool:
                return int(await redis.get(f"{queue}:held") or 0) >= sessions

            await _wait(all_held, timeout_s, f"arq: {sessions} first steps held at once", procs,
                        0.02)
            await redis.set(f"{queue}:release", "1")
        deadline = time.monotonic() + timeout_s
        while procs.procs[0].poll() is None:
            if time.monotonic() > deadline:
                raise BenchError(f"arq did not drain {jobs} jobs in {timeout_s:.0f}s")
            await asyncio.sleep(0.02)
        if procs.procs[0].returncode:
            raise BenchError(f"the arq worker (pid {pid}) failed:\n{procs.tail()}")
        ends = [json.loads(x) for x in await redis.lrange(f"{queue}:done", 0, -1)]
        if len(ends) != 1:
            raise BenchError("arq: the worker did not report its end")
        stored = sum([await redis.hlen(f"{queue}:res:{s}") for s in range(sessions)])
        if stored != jobs:
            raise BenchError(f"arq: {stored} of {jobs} agent replies were stored")
        end = ends[0]
    finally:
        procs.stop()
        await pool.aclose()
        await redis.aclose()
    return InflightResult("arq", sessions, steps, delay_s, max_jobs, end["end"] - t0,
                          end["peak"], end["peak"], idle["rss"], end["hwm"],
                          end["cpu"] - idle["cpu"])


# -- the row -------------------------------------------------------------------------------
@dataclass
class InflightRow:
    ours: InflightResult
    arq: InflightResult | None
    ours_setting: str = "worker defaults"  # or the DURABLE_WORKER_CONCURRENCY it was given

    @property
    def ratio(self) -> float | None:
        return self.ours.rate / self.arq.rate if self.arq and self.arq.rate else None

    def targets(self) -> list[dict[str, Any]]:
        """The goal's lines (at the goal's size only: 1,000 sessions, 2 s a call)."""
        ours = self.ours
        if ours.sessions < GOAL_IN_FLIGHT or ours.delay_s != 2.0:
            return []
        out = [
            {"target": "in flight on one worker >= 1,000 (2 s a call)",
             "value": f"{ours.peak_in_flight:,}", "pass": ours.peak_in_flight >= GOAL_IN_FLIGHT},
            {"target": "steps/s on one worker >= 400 (2 s a call)",
             "value": f"{ours.rate:,.0f}", "pass": ours.rate >= GOAL_RATE},
            {"target": "worker peak RSS <= 1 GB (1,000 in flight)",
             "value": f"{ours.rss_peak / 2**20:,.0f} MiB", "pass": ours.rss_peak <= GOAL_RSS},
        ]
        if self.ratio is not None:
            out.append({"target": "ours / arq (max_jobs 1,000), 2 s a call >= 1.0x",
                        "value": f"{self.ratio:.2f}x", "pass": self.ratio >= GOAL_VS_ARQ})
        return out

    def lines(self) -> list[str]:
        o = self.ours
        head = (f"{'many steps in flight, one worker':<38} {'slots':>6} {'peak':>6} "
                f"{'steps/s':>8} {'of bound':>8} {'RSS idle':>9} {'RSS peak':>9} "
                f"{'KiB/step':>8} {'CPU ms/step':>11}")
        out = [f"{o.sessions:,} chains x {o.steps} step(s), model call {o.delay_s:g} s "
               f"(scripted delay_s); bound {o.bound:,.0f} steps/s", head, "-" * len(head)]
        for r in (o, self.arq):
            if r is None:
                continue
            label = (f"ours ({self.ours_setting})" if r.name == "ours"
                     else f"arq, the same call (max_jobs {r.concurrency:,})")
            peak = f"{r.peak_in_flight:,}"
            out.append(f"{label:<38} {r.concurrency:>6,} {peak:>6} {r.rate:>8,.0f} "
                       f"{r.rate / r.bound:>8.0%} {r.rss_idle / 2**20:>8,.0f}M "
                       f"{r.rss_peak / 2**20:>8,.0f}M {r.rss_per_step / 1024:>8,.1f} "
                       f"{r.cpu_per_step_ms:>11.2f}")
        out.append(f"ours by its gauges, sampled every {SAMPLE_S * 1000:.0f} ms: steps running "
                   f"peak {o.peak_gauge:,}, mean {o.running_mean:,.0f}; slot limit at its "
                   f"lowest {o.slots_min:,} (durable_worker_step_slots)")
        if self.ratio is not None:
            out.append(f"ours / arq: {self.ratio:.2f}x")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"ours": self.ours.to_dict(), "arq": self.arq.to_dict() if self.arq else None,
                "ratio": round(self.ratio, 3) if self.ratio is not None else None,
                "targets": self.targets()}


async def run_inflight(redis_url: str, port: int, logdir: Path, *, sessions: int, steps: int,
                       delay_s: float, concurrency: int | None, max_jobs: int,
                       timeout_s: float, arq: bool = True, adaptive: bool = True,
                       hold: Path | None = None) -> InflightRow:
    """Ours, then arq; with `hold` (a directory for ours' breakpoints), every chain's
    first step held on both until all are in flight at once (a count, not a timing)."""
    ours = await run_ours(redis_url, logdir, sessions=sessions, steps=steps, delay_s=delay_s,
                          concurrency=concurrency, timeout_s=timeout_s, adaptive=adaptive,
                          hold=hold)
    reference = (await run_arq(port, logdir, sessions=sessions, steps=steps, delay_s=delay_s,
                               max_jobs=max_jobs, timeout_s=timeout_s, hold=hold is not None)
                 if arq else None)
    setting = [f"DURABLE_WORKER_CONCURRENCY={concurrency}"] if concurrency else []
    setting += [] if adaptive else ["adaptive off"]
    return InflightRow(ours, reference, ", ".join(setting) or "worker defaults")


def main(argv: list[str] | None = None) -> int:
    import shutil

    from bench.redis_server import start_redis
    from bench.throughput import BenchError

    p = argparse.ArgumentParser(prog="python -m bench.inflight",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=1000)
    p.add_argument("--steps", type=int, default=5, help="steps per chain (default 5)")
    p.add_argument("--delay-s", type=float, default=2.0, help="each model call (default 2)")
    p.add_argument("--concurrency", type=int, default=None,
                   help="DURABLE_WORKER_CONCURRENCY of our worker (default: not set, the "
                        "worker's default)")
    p.add_argument("--max-jobs", type=int, default=None,
                   help="arq's max_jobs (default: --sessions, at most that many steps at "
                        "once as ours, whose chains run one step at a time)")
    p.add_argument("--skip-arq", action="store_true")
    p.add_argument("--no-adaptive", action="store_true",
                   help="our worker with DURABLE_WORKER_ADAPTIVE_CONCURRENCY=false (a diagnostic)")
    p.add_argument("--timeout", type=float, default=300.0, help="per run, seconds")
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args(argv)
    server = start_redis()
    logdir = Path(tempfile.mkdtemp(prefix="durable-bench-inflight-"))
    load = os.getloadavg()[0]
    ok = False
    try:
        row = asyncio.run(run_inflight(
            server.url, server.port, logdir, sessions=args.sessions, steps=args.steps,
            delay_s=args.delay_s, concurrency=args.concurrency,
            max_jobs=args.max_jobs or args.sessions, timeout_s=args.timeout, arq=not args.skip_arq,
            adaptive=not args.no_adaptive))
        ok = True
    except BenchError as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        return 2
    finally:
        server.stop()
        if ok:
            shutil.rmtree(logdir, ignore_errors=True)
        else:
            print(f"worker logs kept in {logdir}", file=sys.stderr)
    print(f"{os.cpu_count()} CPU(s), load average {load:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end (1 min)")
    print("\n".join(row.lines()))
    for t in row.targets():
        print(f"{t['target']:<52} {t['value']:<12} {'PASS' if t['pass'] else 'MISS'}")
    if args.json:
        Path(args.json).write_text(json.dumps(row.to_dict(), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
