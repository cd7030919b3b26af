"""The bench's tables: throughput with what each step cost Redis, commit latency, what a
session holds, ours / arq, and the targets with PASS/MISS."""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bench.latency import LatencyResult
from bench.report_scale import resume_table, resume_targets, scale_table, scale_targets
from bench.resume import ResumeResult
from bench.scale import ScaleResult
from bench.throughput import ThroughputResult

if TYPE_CHECKING:
    from bench.run import Sizes

COMMIT_P50_MS = 1.0
COMMIT_P99_MS = 5.0
DRIFT_MAX = 1.2  # p50 (or CPU per step) at the last steps / at step 10
NOOP_VS_ARQ = 2.0  # no-op steps/s >= this x arq (best poll_delay), 1 worker
AGENT_VS_ARQ = 1.3  # scripted steps/s >= this x arq making the same call
ROUND_TRIPS_MAX = 1.3  # per no-op step
REDIS_CPU_US_MAX = 120.0  # per no-op step
W = 50  # label column width


@dataclass
class Rows:
    ours: list[ThroughputResult]
    scripted: list[ThroughputResult]
    arq: list[ThroughputResult]
    arq_agent: list[ThroughputResult]


@dataclass
class InProcess:
    """The in-process runs: commit latency (and its diagnostic), sessions at once, resume."""

    latency: LatencyResult | None = None
    diagnostic: LatencyResult | None = None
    fixed: LatencyResult | None = None  # adaptive concurrency off (diagnostic)
    scale: ScaleResult | None = None
    resume: ResumeResult | None = None


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}"


def spread(r: ThroughputResult) -> str:
    rates = r.rates
    if len(rates) < 2:
        return "1 run"
    return f"{len(rates)} runs: {fmt_rate(min(rates))}-{fmt_rate(max(rates))}"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def redis_version() -> str:
    try:
        out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True,
                             timeout=10).stdout
        return next((w.split("=", 1)[1] for w in out.split() if w.startswith("v=")), "?")
    except (OSError, subprocess.SubprocessError):
        return "?"


def throughput_table(out: Any, sizes: Sizes, rows: Rows, concurrency: int) -> None:
    head = (f"{'throughput (median of runs)':<{W}} {'workers':>7} {'units':>6} {'seconds':>7} "
            f"{'per s':>7} {'RT/unit':>7} {'cmd/unit':>8} {'redis us':>8}  runs: min-max /s")
    out(head)
    out("-" * len(head))
    chains = f"{sizes.sessions} x {sizes.steps}-step chains"
    labelled = [(f"no-op steps ({chains})", r) for r in rows.ours]
    labelled += [(f"scripted steps, delay 0 ({chains})", r) for r in rows.scripted]
    labelled += [(f"{r.name} (max_jobs {concurrency})", r) for r in rows.arq + rows.arq_agent]
    for label, r in labelled:
        cost = r.redis
        cells = (f"{cost.round_trips:>7.2f} {cost.commands:>8.1f} {cost.cpu_us:>8.0f}"
                 if cost else f"{'':>7} {'':>8} {'':>8}")
        out(f"{label:<{W}} {r.workers:>7} {r.units:>6} {r.seconds:>7.2f} "
            f"{fmt_rate(r.rate):>7} {cells}  {spread(r)}")
    out("  RT/unit: round trips (redis reads processed) per step or job; cmd/unit: "
        "commands, script-inner ones included; redis us: redis-server CPU per unit")
    for label, r in labelled[:1] + [x for x in labelled if "scripted" in x[0]][:1]:
        if r.redis:
            calls = ", ".join(f"{k} {v:g}" for k, v in r.redis.calls.items())
            out(f"  commands per step, {label}, {r.workers} worker(s): {calls}")


def footprint_table(out: Any, rows: Rows) -> None:
    printed = {(r.name, r.footprint.steps) for r in rows.ours + rows.scripted
               if r.footprint}
    for name, steps in sorted(printed):
        r = next(x for x in rows.ours + rows.scripted
                 if x.name == name and x.footprint and x.footprint.steps == steps)
        fp = r.footprint
        assert fp is not None
        out("")
        out(f"stored per session ({name}, {steps} steps, mean of {fp.sessions}): "
            f"{fp.bytes_per_session:,.0f} bytes, {fp.bytes_per_step:,.0f} bytes per step")
        out("  " + ", ".join(f"{k or 'meta'} {v:,.0f}" for k, v in fp.by_key.items()))


def long_footprints(out: Any, runs: InProcess) -> None:
    """What a long chain holds: the latency run's sessions and the resumed ones."""
    for what, fp in (("no-op chain, latency run", runs.latency and runs.latency.footprint),
                     ("no-op chain, resumed once", runs.resume and runs.resume.footprint)):
        if not fp:
            continue
        out("")
        out(f"stored per session ({what}, {fp.steps:,} steps, mean of {fp.sessions}): "
            f"{fp.bytes_per_session:,.0f} bytes, {fp.bytes_per_step:,.0f} bytes per step")
        out("  " + ", ".join(f"{k or 'meta'} {v:,.0f}" for k, v in fp.by_key.items()))


def latency_table(out: Any, latency: LatencyResult | None, *diagnostics: LatencyResult | None
                  ) -> None:
    runs = [r for r in (latency, *diagnostics) if r is not None]
    if not runs:
        return
    out("")
    head = (f"{'commit latency (Store.commit, in-process)':<{W}} {'steps':>11} {'n':>6} "
            f"{'p50 ms':>7} {'p99 ms':>7}")
    out(head)
    out("-" * len(head))
    for run in runs:
        tag = (f"conc {run.concurrency}" + ("" if run.adaptive else ", fixed")
               + ("" if run is latency else ", diagnostic"))
        for w in (run.low, run.high):
            label = f"around {w.label} ({tag})"
            out(f"{label:<{W}} {w.first:>5}-{w.last:<5} {len(w.samples):>6} {w.p50:>7.3f} "
                f"{w.p99:>7.3f}")
        label = f"all steps ({tag})"
        out(f"{label:<{W}} {'1-' + str(run.steps):>11} {run.sessions * run.steps:>6} "
            f"{run.all_p50_ms:>7.3f} {run.all_p99_ms:>7.3f}")
        if run.plan_low and run.plan_high:
            for w in (run.plan_low, run.plan_high):
                label = f"planning, around {w.label} ({tag})"
                out(f"{label:<{W}} {w.first:>5}-{w.last:<5} {len(w.samples):>6} "
                    f"{w.p50:>7.3f} {w.p99:>7.3f}")
        for w, cpu in ((run.low, run.cpu_low_us), (run.high, run.cpu_high_us)):
            label = f"worker CPU us per step, around {w.label} ({tag})"
            out(f"{label:<{W}} {w.first:>5}-{w.last:<5} {'':>6} {cpu:>7.0f}")
        label = f"event-loop lag ({tag})"
        out(f"{label:<{W}} {'':>11} {'':>6} {run.lag_p50_ms:>7.3f} {run.lag_p99_ms:>7.3f}")
        out(f"  {run.sessions} x {run.steps}-step chains, one StepConsumer at concurrency "
            f"{run.concurrency} ({run.running_mean:.1f} steps running on average): "
            f"{run.sessions * run.steps / run.seconds:,.0f} steps/s, "
            f"{run.conflicts} conflicts, p50 step-{run.steps}/step-10 = {run.ratio:.2f}x, "
            f"CPU per step {run.cpu_ratio:.2f}x")
        out(f"  steps running as a commit returned: {run.low.in_flight_mean:.1f} around "
            f"{run.low.label}, {run.high.in_flight_mean:.1f} around {run.high.label}")


def latency_targets(latency: LatencyResult | None) -> list[dict[str, Any]]:
    if latency is None:
        return []
    targets = [{"target": f"commit p50 <= {COMMIT_P50_MS:g} ms ({w.label})",
                "value": f"{w.p50:.3f} ms", "pass": w.p50 <= COMMIT_P50_MS}
               for w in (latency.low, latency.high)]
    targets += [{"target": f"commit p99 <= {COMMIT_P99_MS:g} ms ({w.label})",
                 "value": f"{w.p99:.3f} ms", "pass": w.p99 <= COMMIT_P99_MS}
                for w in (latency.low, latency.high)]
    targets.append({"target": f"p50 step-{latency.steps} <= {DRIFT_MAX:g} x step-10",
                    "value": f"{latency.ratio:.2f}x", "pass": latency.ratio <= DRIFT_MAX})
    if latency.plan_low is not None:
        targets.append({"target": f"planning p50 step-{latency.steps} <= {DRIFT_MAX:g} x "
                                  "step-10",
                        "value": f"{latency.plan_ratio:.2f}x",
                        "pass": latency.plan_ratio <= DRIFT_MAX})
    targets.append({"target": f"worker CPU per step, step-{latency.steps} <= {DRIFT_MAX:g} x "
                              "step-10",
                    "value": f"{latency.cpu_high_us:.0f} / {latency.cpu_low_us:.0f} us = "
                             f"{latency.cpu_ratio:.2f}x",
                    "pass": latency.cpu_ratio <= DRIFT_MAX})
    return targets


def ratio_rows(rows: Rows) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(ours / arq per worker count, the targets on them)."""
    ratios: list[dict[str, Any]] = []
    targets: list[dict[str, Any]] = []
    for what, mine, refs_all, goal in (("no-op steps", rows.ours, rows.arq, NOOP_VS_ARQ),
                                       ("scripted steps", rows.scripted, rows.arq_agent,
                                        AGENT_VS_ARQ)):
        for r in mine:
            refs = [a for a in refs_all if a.workers == r.workers]
            if not refs:
                continue
            best = max(refs, key=lambda a: a.rate)
            for a in refs:
                ratios.append({"what": what, "workers": r.workers, "arq": a.name,
                               "ours": round(r.rate, 1), "arq_rate": round(a.rate, 1),
                               "ratio": round(r.rate / a.rate, 3)})
            if what == "no-op steps" and r.workers > 1:
                continue  # the 2x goal is for one worker; more workers are shown
            targets.append({"target": f"{what}/s >= {goal:g} x best arq ({r.workers} w)",
                            "value": f"{fmt_rate(r.rate)} vs {fmt_rate(best.rate)} "
                                     f"= {r.rate / best.rate:.2f}x",
                            "pass": r.rate >= goal * best.rate})
    return ratios, targets


def cost_targets(rows: Rows) -> list[dict[str, Any]]:
    one = next((r for r in rows.ours if r.workers == 1 and r.redis), None)
    if one is None or one.redis is None:
        return []
    return [{"target": f"round trips per no-op step <= {ROUND_TRIPS_MAX:g} (1 w)",
             "value": f"{one.redis.round_trips:.2f}",
             "pass": one.redis.round_trips <= ROUND_TRIPS_MAX},
            {"target": f"redis CPU per no-op step <= {REDIS_CPU_US_MAX:g} us (1 w)",
             "value": f"{one.redis.cpu_us:.0f} us",
             "pass": one.redis.cpu_us <= REDIS_CPU_US_MAX}]


def report(args: argparse.Namespace, sizes: Sizes, rows: Rows, runs: InProcess,
           seconds: float, port: int, load: str = "") -> dict[str, Any]:
    latency, diagnostic = runs.latency, runs.diagnostic
    lines: list[str] = []

    def out(line: str) -> None:
        lines.append(line.rstrip())

    out(f"strands-durable benchmark{' (--quick)' if args.quick else ''}: redis-server "
        f"{redis_version()} (private, port {port}), {os.cpu_count()} CPU(s), "
        f"Python {platform.python_version()}, worker concurrency {args.concurrency}"
        + (f", load average {load}" if load else ""))
    out("")
    throughput_table(out, sizes, rows, args.concurrency)
    footprint_table(out, rows)
    long_footprints(out, runs)
    latency_table(out, latency, diagnostic, runs.fixed)
    scale_table(out, runs.scale)
    resume_table(out, runs.resume)
    ratios, ratio_targets = ratio_rows(rows)
    targets = (latency_targets(latency) + scale_targets(runs.scale)
               + resume_targets(runs.resume) + ratio_targets + cost_targets(rows))
    if ratios:
        out("")
        head = f"{'ours / arq':<{W + 14}} {'workers':>7} {'ours/s':>8} {'arq/s':>8} {'ratio':>7}"
        out(head)
        out("-" * len(head))
        for x in ratios:
            out(f"{x['what'] + ' vs ' + x['arq']:<{W + 14}} {x['workers']:>7} "
                f"{fmt_rate(x['ours']):>8} {fmt_rate(x['arq_rate']):>8} {x['ratio']:>7.2f}")
    if targets:
        out("")
        head = f"{'target':<{W + 14}} {'value':<26} result"
        out(head)
        out("-" * len(head))
        for t in targets:
            out(f"{t['target']:<{W + 14}} {t['value']:<26} {verdict(t['pass'])}")
    out("")
    out(f"total {seconds:.0f}s")
    print("\n".join(lines), flush=True)
    return {
        "quick": args.quick, "concurrency": args.concurrency, "cpus": os.cpu_count(),
        "python": platform.python_version(), "redis": redis_version(),
        "sizes": sizes.__dict__,
        "noop": [r.to_dict() for r in rows.ours],
        "scripted": [r.to_dict() for r in rows.scripted],
        "arq": [r.to_dict() for r in rows.arq],
        "arq_agent": [r.to_dict() for r in rows.arq_agent],
        "latency": latency.to_dict() if latency else None,
        "latency_concurrency_1": diagnostic.to_dict() if diagnostic else None,
        "latency_fixed_concurrency": runs.fixed.to_dict() if runs.fixed else None,
        "sessions_at_once": runs.scale.to_dict() if runs.scale else None,
        "resume": runs.resume.to_dict() if runs.resume else None, "load": load,
        "ours_vs_arq": ratios, "targets": targets, "seconds": round(seconds, 1),
    }
