"""`python -m bench`: throughput, commit latency and the arq reference, in one run
against one private redis-server; prints a table with PASS/MISS per target."""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.latency import LatencyResult, run_latency
from bench.redis_server import start_redis
from bench.report import Rows, report
from bench.throughput import BenchError, ThroughputResult, median_of, run_arq, run_ours

ARQ_POLL_BOUND_S = 0.1  # arq rows with a poll_delay this long are poll-bound: run once


@dataclass(frozen=True)
class Sizes:
    sessions: int  # chains per throughput run
    steps: int  # steps per chain in throughput runs
    latency_sessions: int
    latency_steps: int
    low: tuple[int, int]  # 1-based step window "around step 10"
    high: tuple[int, int]  # window "around step 1000" (the last steps)
    diag_sessions: int  # the same at concurrency 1 (diagnostic, no target)


DEFAULT = Sizes(sessions=50, steps=40, latency_sessions=30, latency_steps=1000,
                low=(5, 15), high=(990, 1000), diag_sessions=10)
QUICK = Sizes(sessions=10, steps=20, latency_sessions=4, latency_steps=1000,
              low=(5, 15), high=(990, 1000), diag_sessions=2)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--quick", action="store_true",
                   help="small sizes: a smoke run (< 60 s), numbers are indicative only")
    p.add_argument("--json", metavar="FILE", help="also write every number to FILE")
    p.add_argument("--concurrency", type=int, default=8,
                   help="DURABLE_WORKER_CONCURRENCY of our workers = arq max_jobs (default 8)")
    p.add_argument("--workers", default=None,
                   help="worker process counts (default 1,2,4; 1,2 with --quick)")
    p.add_argument("--arq-poll-delay", default="0.5,0.01",
                   help="arq poll_delay values to run the reference with; 0.5 is arq's "
                        "default (default: 0.5,0.01)")
    p.add_argument("--skip", default="",
                   help="comma list of: noop,scripted,arq,arq-agent,latency,diagnostic")
    p.add_argument("--repeat", type=int, default=None,
                   help="runs per no-op / arq row, median reported (default 3; 1 with --quick)")
    p.add_argument("--timeout", type=float, default=240.0, help="per-run timeout, seconds")
    args = p.parse_args(argv)
    if args.repeat is None:
        args.repeat = 1 if args.quick else 3
    if args.workers is None:
        args.workers = "1,2" if args.quick else "1,2,4"
    return args


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    sizes = QUICK if args.quick else DEFAULT
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    counts = [int(x) for x in args.workers.split(",") if x.strip()]
    polls = [float(x) for x in args.arq_poll_delay.split(",") if x.strip()]
    try:
        server = start_redis()
    except RuntimeError as exc:
        raise SystemExit(f"bench: {exc}") from None
    logdir = Path(tempfile.mkdtemp(prefix="durable-bench-"))
    ours: list[ThroughputResult] = []
    scripted: list[ThroughputResult] = []
    arq: list[ThroughputResult] = []
    latency: LatencyResult | None = None
    diagnostic: LatencyResult | None = None
    started = time.perf_counter()
    ok = False
    try:
        steps = sizes.sessions * sizes.steps
        runs: dict[tuple[str, int, float], list[ThroughputResult]] = defaultdict(list)
        # Repeats are interleaved (ours, then arq, then ours again ...) so that both see
        # the same background load; each row reports the median run.
        for rep in range(args.repeat):
            for n in counts:
                if "noop" not in skip:
                    log(f"no-op steps, {n} worker(s), run {rep + 1}/{args.repeat} ...")
                    runs["noop", n, 0].append(await run_ours(
                        server.url, logdir, workers=n, noop=True, sessions=sizes.sessions,
                        steps=sizes.steps, concurrency=args.concurrency,
                        timeout_s=args.timeout))
            for poll in polls:
                # arq at its default poll_delay is poll-bound (~200 jobs/s): run once.
                if "arq" in skip or (rep > 0 and poll >= ARQ_POLL_BOUND_S):
                    continue
                for n in counts:
                    log(f"arq reference, poll_delay {poll:g}s, {n} worker(s), "
                        f"run {rep + 1}/{args.repeat} ...")
                    runs["arq", n, poll].append(await run_arq(
                        server.port, logdir, workers=n, jobs=steps,
                        max_jobs=args.concurrency, poll_delay=poll, timeout_s=args.timeout))
        for n in counts:
            if "scripted" not in skip:
                log(f"scripted steps, {n} worker(s) ...")
                runs["scripted", n, 0].append(await run_ours(
                    server.url, logdir, workers=n, noop=False, sessions=sizes.sessions,
                    steps=sizes.steps, concurrency=args.concurrency, timeout_s=args.timeout))
            if "arq-agent" not in skip:
                # arq at its best poll_delay, making our step's Strands call with its
                # history: the reference for a step that calls a model.
                log(f"arq reference, the same agent call and history, {n} worker(s) ...")
                runs["arq-agent", n, 0].append(await run_arq(
                    server.port, logdir, workers=n, jobs=steps, max_jobs=args.concurrency,
                    poll_delay=min(polls or [0.01]), timeout_s=args.timeout,
                    agent_chains=(sizes.sessions, sizes.steps)))
        ours = [median_of(runs["noop", n, 0]) for n in counts if runs["noop", n, 0]]
        scripted = [median_of(runs["scripted", n, 0]) for n in counts
                    if runs["scripted", n, 0]]
        arq = [median_of(runs["arq", n, poll]) for poll in polls for n in counts
               if runs["arq", n, poll]]
        arq_agent = [median_of(runs["arq-agent", n, 0]) for n in counts
                     if runs["arq-agent", n, 0]]
        if "latency" not in skip:
            log(f"commit latency, {sizes.latency_sessions} x {sizes.latency_steps}-step "
                "chains in-process ...")
            latency = await run_latency(server.url, sessions=sizes.latency_sessions,
                                        steps=sizes.latency_steps, low=sizes.low,
                                        high=sizes.high, concurrency=args.concurrency,
                                        timeout_s=args.timeout)
        if "diagnostic" not in skip and sizes.diag_sessions:
            log(f"commit latency at concurrency 1 (diagnostic), {sizes.diag_sessions} x "
                f"{sizes.latency_steps}-step chains in-process ...")
            diagnostic = await run_latency(server.url, sessions=sizes.diag_sessions,
                                           steps=sizes.latency_steps, low=sizes.low,
                                           high=sizes.high, concurrency=1,
                                           timeout_s=args.timeout)
        ok = True
    finally:
        server.stop()
        if ok:
            shutil.rmtree(logdir, ignore_errors=True)
        else:
            log(f"worker logs kept in {logdir}")
    return report(args, sizes, Rows(ours, scripted, arq, arq_agent), latency, diagnostic,
                  time.perf_counter() - started, server.port)


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        data = asyncio.run(bench(args))
    except BenchError as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        return 2
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=2) + "\n")
    return 0
