"""`python -m bench`: throughput, commit latency and the arq reference, in one run
against one private redis-server; prints a table with PASS/MISS per target."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.latency import LatencyResult, run_latency
from bench.redis_server import start_redis
from bench.throughput import BenchError, ThroughputResult, median_of, run_arq, run_ours

# Targets.
COMMIT_P50_MS = 1.0
COMMIT_P99_MS = 5.0
DRIFT_MAX = 1.2  # p50 at step 1000 / p50 at step 10
W = 58  # label column width
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
    p.add_argument("--workers", default="1,2", help="worker process counts (default 1,2)")
    p.add_argument("--arq-poll-delay", default="0.5,0.01",
                   help="arq poll_delay values to run the reference with; 0.5 is arq's "
                        "default (default: 0.5,0.01)")
    p.add_argument("--skip", default="",
                   help="comma list of: noop,scripted,arq,latency,diagnostic")
    p.add_argument("--repeat", type=int, default=None,
                   help="runs per no-op / arq row, median reported (default 3; 1 with --quick)")
    p.add_argument("--timeout", type=float, default=240.0, help="per-run timeout, seconds")
    args = p.parse_args(argv)
    if args.repeat is None:
        args.repeat = 1 if args.quick else 3
    return args


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}"


def spread(r: ThroughputResult) -> str:
    rates = r.rates
    if len(rates) < 2:
        return "1 run"
    return f"{len(rates)} runs: {fmt_rate(min(rates))}-{fmt_rate(max(rates))}"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


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
        ours = [median_of(runs["noop", n, 0]) for n in counts if runs["noop", n, 0]]
        scripted = [median_of(runs["scripted", n, 0]) for n in counts
                    if runs["scripted", n, 0]]
        arq = [median_of(runs["arq", n, poll]) for poll in polls for n in counts
               if runs["arq", n, poll]]
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
    return report(args, sizes, ours, scripted, arq, latency, diagnostic,
                  time.perf_counter() - started, server.port)


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def redis_version() -> str:
    try:
        out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True,
                             timeout=10).stdout
        return next((w.split("=", 1)[1] for w in out.split() if w.startswith("v=")), "?")
    except (OSError, subprocess.SubprocessError):
        return "?"


def report(args: argparse.Namespace, sizes: Sizes, ours: list[ThroughputResult],
           scripted: list[ThroughputResult], arq: list[ThroughputResult],
           latency: LatencyResult | None, diagnostic: LatencyResult | None, seconds: float,
           port: int) -> dict[str, Any]:
    lines: list[str] = []
    def out(line: str) -> None:
        lines.append(line.rstrip())
    out(f"strands-durable benchmark{' (--quick)' if args.quick else ''}: redis-server "
        f"{redis_version()} (private, port {port}), {os.cpu_count()} CPU(s), "
        f"Python {platform.python_version()}, worker concurrency {args.concurrency}")
    out("")
    head = (f"{'throughput (median of runs)':<{W}} {'workers':>7} {'units':>7} {'seconds':>8} "
            f"{'per second':>11}  {'runs: min-max /s':<18}")
    out(head)
    out("-" * len(head))
    chains = f"{sizes.sessions} x {sizes.steps}-step chains"
    for label, rows in ((f"no-op steps ({chains})", ours),
                        (f"scripted steps, delay 0 ({chains})", scripted)):
        for r in rows:
            out(f"{label:<{W}} {r.workers:>7} {r.units:>7} {r.seconds:>8.2f} "
                f"{fmt_rate(r.rate):>11}  {spread(r)}")
    for r in arq:
        label = f"{r.name} (max_jobs {args.concurrency})"
        out(f"{label:<{W}} {r.workers:>7} {r.units:>7} {r.seconds:>8.2f} {fmt_rate(r.rate):>11}"
            f"  {spread(r)}")
    targets: list[dict[str, Any]] = []
    runs = [r for r in (latency, diagnostic) if r is not None]
    if runs:
        out("")
        head = (f"{'commit latency (Store.commit, in-process)':<{W}} {'steps':>11} {'n':>6} "
                f"{'p50 ms':>7} {'p99 ms':>7}")
        out(head)
        out("-" * len(head))
    for run in runs:
        tag = f"conc {run.concurrency}" + (", diagnostic" if run is diagnostic else "")
        for w in (run.low, run.high):
            label = f"around {w.label} ({tag})"
            out(f"{label:<{W}} {w.first:>5}-{w.last:<5} {len(w.samples):>6} {w.p50:>7.3f} "
                f"{w.p99:>7.3f}")
        label = f"all steps ({tag})"
        out(f"{label:<{W}} {'1-' + str(run.steps):>11} {run.sessions * run.steps:>6} "
            f"{run.all_p50_ms:>7.3f} {run.all_p99_ms:>7.3f}")
        label = f"event-loop lag ({tag})"
        out(f"{label:<{W}} {'':>11} {'':>6} {run.lag_p50_ms:>7.3f} {run.lag_p99_ms:>7.3f}")
        out(f"  {run.sessions} x {run.steps}-step chains, one StepConsumer at concurrency "
            f"{run.concurrency}: {run.sessions * run.steps / run.seconds:,.0f} steps/s, "
            f"{run.conflicts} conflicts, p50 step-{run.steps}/step-10 = {run.ratio:.2f}x")
    if latency is not None:
        for w in (latency.low, latency.high):
            targets.append({"target": f"commit p50 <= {COMMIT_P50_MS:g} ms ({w.label})",
                            "value": f"{w.p50:.3f} ms", "pass": w.p50 <= COMMIT_P50_MS})
        for w in (latency.low, latency.high):
            targets.append({"target": f"commit p99 <= {COMMIT_P99_MS:g} ms ({w.label})",
                            "value": f"{w.p99:.3f} ms", "pass": w.p99 <= COMMIT_P99_MS})
        targets.append({"target": f"p50 step-{latency.steps} <= {DRIFT_MAX:g} x step-10",
                        "value": f"{latency.ratio:.2f}x", "pass": latency.ratio <= DRIFT_MAX})
    ratios: list[dict[str, Any]] = []
    for r in ours:
        refs = [a for a in arq if a.workers == r.workers]
        if not refs:
            continue
        best = max(refs, key=lambda a: a.rate)
        for a in refs:
            ratios.append({"workers": r.workers, "arq": a.name, "ours": round(r.rate, 1),
                           "arq_rate": round(a.rate, 1), "ratio": round(r.rate / a.rate, 3)})
        targets.append({"target": f"no-op steps/s >= arq jobs/s ({r.workers} worker"
                                  f"{'s' if r.workers > 1 else ''}, best arq)",
                        "value": f"{fmt_rate(r.rate)} vs {fmt_rate(best.rate)} "
                                 f"= {r.rate / best.rate:.2f}x",
                        "pass": r.rate >= best.rate})
    if ratios:
        out("")
        head = f"{'ours / arq':<{W}} {'workers':>7} {'ours/s':>8} {'arq/s':>8} {'ratio':>7}"
        out(head)
        out("-" * len(head))
        for x in ratios:
            out(f"{'no-op steps vs ' + x['arq']:<{W}} {x['workers']:>7} "
                f"{fmt_rate(x['ours']):>8} {fmt_rate(x['arq_rate']):>8} {x['ratio']:>7.2f}")
    if targets:
        out("")
        head = f"{'target':<{W}} {'value':<26} result"
        out(head)
        out("-" * len(head))
        for t in targets:
            out(f"{t['target']:<{W}} {t['value']:<26} {verdict(t['pass'])}")
    out("")
    out(f"total {seconds:.0f}s")
    print("\n".join(lines), flush=True)
    return {
        "quick": args.quick, "concurrency": args.concurrency, "cpus": os.cpu_count(),
        "python": platform.python_version(), "redis": redis_version(),
        "sizes": sizes.__dict__,
        "noop": [r.to_dict() for r in ours], "scripted": [r.to_dict() for r in scripted],
        "arq": [r.to_dict() for r in arq],
        "latency": latency.to_dict() if latency else None,
        "latency_concurrency_1": diagnostic.to_dict() if diagnostic else None,
        "ours_vs_arq": ratios, "targets": targets, "seconds": round(seconds, 1),
    }


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
