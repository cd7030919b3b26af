"""`python -m bench`: throughput, commit latency and the arq reference, in one run
against one private redis-server; prints a table with PASS/MISS per target."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import fairness
from bench.inflight import InflightRow, run_inflight
from bench.latency import run_latency
from bench.redis_server import start_redis
from bench.report import InProcess, Rows, report
from bench.resume import run_resume
from bench.scale import run_scale
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
    scale: tuple[int, int]  # sessions at once on one worker: few, many
    scale_steps: tuple[int, int]  # steps per chain in those runs
    resume_sessions: int  # sessions paused and resumed, one at a time
    resume_committed: int  # steps each has committed when paused
    inflight: tuple[int, int, float] = (1000, 5, 2.0)  # chains, steps, model call (s)


DEFAULT = Sizes(sessions=50, steps=40, latency_sessions=12, latency_steps=5000,
                low=(5, 55), high=(4950, 5000), diag_sessions=2, scale=(100, 10_000),
                scale_steps=(30, 3), resume_sessions=5, resume_committed=1000,
                inflight=(1000, 5, 2.0))
QUICK = Sizes(sessions=10, steps=20, latency_sessions=4, latency_steps=1000,
              low=(5, 55), high=(950, 1000), diag_sessions=2, scale=(100, 1000),
              scale_steps=(5, 2), resume_sessions=1, resume_committed=1000,
              inflight=(200, 2, 1.0))
SKIPPABLE = ("noop,scripted,arq,arq-agent,latency,diagnostic,scale,resume,inflight,"
             "inflight-arq,fairness")


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
                   help=f"comma list of: {SKIPPABLE}")
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
    try:
        server = start_redis()
    except RuntimeError as exc:
        raise SystemExit(f"bench: {exc}") from None
    logdir = Path(tempfile.mkdtemp(prefix="durable-bench-"))
    load = [os.getloadavg()[0]]  # the machine may be shared: say how busy it was
    started = time.perf_counter()
    ok = False
    try:
        rows = await throughput(args, sizes, skip, server.url, server.port, logdir)
        inflight = await many_in_flight(args, sizes, skip, server.url, server.port, logdir)
        runs = await in_process(args, sizes, skip, server.url)
        fair = None
        if "fairness" not in skip:
            log("fair dispatch: namespace B's chains beside namespace A's backlog ...")
            fair_args = fairness.parse_args(["--backlog", "1000" if args.quick else "5000"])
            fair = (fair_args, await fairness.run_fairness(server.url, fair_args))
        ok = True
    finally:
        server.stop()
        if ok:
            shutil.rmtree(logdir, ignore_errors=True)
        else:
            log(f"worker logs kept in {logdir}")
    load.append(os.getloadavg()[0])
    data = report(args, sizes, rows, runs, time.perf_counter() - started, server.port,
                  load=f"{load[0]:.1f} at the start, {load[1]:.1f} at the end (1 min)")
    if inflight is not None:
        print("\n" + "\n".join(inflight.lines()))
        for t in inflight.targets():
            print(f"{t['target']:<64} {t['value']:<26} {'PASS' if t['pass'] else 'MISS'}")
        data["inflight"] = inflight.to_dict()
    if fair is not None:
        print("\n" + "\n".join(fairness.table(*fair)))
        data["fairness"] = [asdict(r) for r in fair[1]]
    return data


async def many_in_flight(args: argparse.Namespace, sizes: Sizes, skip: set[str], url: str,
                         port: int, logdir: Path) -> InflightRow | None:
    """One worker with its defaults (DURABLE_WORKER_CONCURRENCY not set: --concurrency is
    the other rows'), chains whose model call waits; then arq making the same call with
    max_jobs = the chains (bench/inflight.py)."""
    if "inflight" in skip:
        return None
    sessions, steps, delay_s = sizes.inflight
    log(f"many steps in flight: {sessions:,} x {steps}-step chains, {delay_s:g} s a model "
        "call, one worker with its defaults, then arq ...")
    return await run_inflight(url, port, logdir, sessions=sessions, steps=steps,
                              delay_s=delay_s, concurrency=None, max_jobs=sessions,
                              timeout_s=args.timeout, arq="inflight-arq" not in skip)


async def throughput(args: argparse.Namespace, sizes: Sizes, skip: set[str], url: str,
                     port: int, logdir: Path) -> Rows:
    """Our workers (no-op and scripted) and arq's, as separate processes."""
    counts = [int(x) for x in args.workers.split(",") if x.strip()]
    polls = [float(x) for x in args.arq_poll_delay.split(",") if x.strip()]
    steps = sizes.sessions * sizes.steps
    runs: dict[tuple[str, int, float], list[ThroughputResult]] = defaultdict(list)
    # Repeats are interleaved (ours, then arq, then ours again ...) so that both see
    # the same background load; each row reports the median run.
    for rep in range(args.repeat):
        for n in counts:
            if "noop" not in skip:
                log(f"no-op steps, {n} worker(s), run {rep + 1}/{args.repeat} ...")
                runs["noop", n, 0].append(await run_ours(
                    url, logdir, workers=n, noop=True, sessions=sizes.sessions,
                    steps=sizes.steps, concurrency=args.concurrency, timeout_s=args.timeout))
        for poll in polls:
            # arq at its default poll_delay is poll-bound (~200 jobs/s): run once.
            if "arq" in skip or (rep > 0 and poll >= ARQ_POLL_BOUND_S):
                continue
            for n in counts:
                log(f"arq reference, poll_delay {poll:g}s, {n} worker(s), "
                    f"run {rep + 1}/{args.repeat} ...")
                runs["arq", n, poll].append(await run_arq(
                    port, logdir, workers=n, jobs=steps, max_jobs=args.concurrency,
                    poll_delay=poll, timeout_s=args.timeout))
    for n in counts:
        if "scripted" not in skip:
            log(f"scripted steps, {n} worker(s) ...")
            runs["scripted", n, 0].append(await run_ours(
                url, logdir, workers=n, noop=False, sessions=sizes.sessions,
                steps=sizes.steps, concurrency=args.concurrency, timeout_s=args.timeout))
        if "arq-agent" not in skip:
            # arq at its best poll_delay, making our step's Strands call with its
            # history: the reference for a step that calls a model.
            log(f"arq reference, the same agent call and history, {n} worker(s) ...")
            runs["arq-agent", n, 0].append(await run_arq(
                port, logdir, workers=n, jobs=steps, max_jobs=args.concurrency,
                poll_delay=min(polls or [0.01]), timeout_s=args.timeout,
                agent_chains=(sizes.sessions, sizes.steps)))

    def rows(kind: str, polled: list[float]) -> list[ThroughputResult]:
        return [median_of(runs[kind, n, poll]) for poll in polled for n in counts
                if runs[kind, n, poll]]

    return Rows(rows("noop", [0]), rows("scripted", [0]), rows("arq", polls),
                rows("arq-agent", [0]))


async def in_process(args: argparse.Namespace, sizes: Sizes, skip: set[str],
                     url: str) -> InProcess:
    """Commit latency (and its concurrency-1 diagnostic), sessions at once, resume."""
    runs = InProcess()
    timeout = args.timeout
    if "latency" not in skip:
        log(f"commit latency, {sizes.latency_sessions} x {sizes.latency_steps}-step "
            "chains in-process ...")
        runs.latency = await run_latency(url, sessions=sizes.latency_sessions,
                                         steps=sizes.latency_steps, low=sizes.low,
                                         high=sizes.high, concurrency=args.concurrency,
                                         timeout_s=timeout)
    if "diagnostic" not in skip and sizes.diag_sessions:
        log(f"commit latency at concurrency 1 (diagnostic), {sizes.diag_sessions} x "
            f"{sizes.latency_steps}-step chains in-process ...")
        runs.diagnostic = await run_latency(url, sessions=sizes.diag_sessions,
                                            steps=sizes.latency_steps, low=sizes.low,
                                            high=sizes.high, concurrency=1,
                                            timeout_s=timeout, footprint_sample=0)
        log(f"commit latency at fixed concurrency {args.concurrency} (diagnostic, adaptive "
            f"concurrency off), {sizes.latency_sessions} x {sizes.latency_steps}-step chains "
            "in-process ...")
        runs.fixed = await run_latency(url, sessions=sizes.latency_sessions,
                                       steps=sizes.latency_steps, low=sizes.low,
                                       high=sizes.high, concurrency=args.concurrency,
                                       timeout_s=timeout, footprint_sample=0, adaptive=False)
    if "scale" not in skip:
        (few, many), (few_steps, many_steps) = sizes.scale, sizes.scale_steps
        log(f"{few:,} x {few_steps}-step then {many:,} x {many_steps}-step chains at once on "
            "one worker, in-process ...")
        runs.scale = await run_scale(url, sessions=sizes.scale, steps=sizes.scale_steps,
                                     concurrency=args.concurrency, timeout_s=timeout)
    if "resume" not in skip and sizes.resume_sessions:
        log(f"resume of {sizes.resume_sessions} paused session(s) with "
            f"{sizes.resume_committed:,} committed steps, in-process ...")
        runs.resume = await run_resume(url, sessions=sizes.resume_sessions,
                                       committed=sizes.resume_committed, timeout_s=timeout)
    return runs


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
