"""The bench's tables for many sessions at once and for resume, with their targets."""

from __future__ import annotations

import math
from typing import Any

from bench.resume import ResumeResult
from bench.scale import ScaleResult, plan_p50

DRIFT_MAX = 1.2  # 10,000 sessions / 100 sessions, per measure
RESUME_MS_MAX = 50.0  # resume() -> the next step starting on a worker, p50
W = 50


def _x(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}x"


def scale_table(out: Any, scale: ScaleResult | None) -> None:
    if scale is None:
        return
    out("")
    head = (f"{'sessions at once on one worker (in-process)':<{W}} {'sessions':>8} "
            f"{'steps/s':>8} {'commit p50':>10} {'plan p50':>8} {'CPU/step':>8}")
    out(head)
    out("-" * len(head))
    for run in (scale.small, scale.big):
        label = f"{run.sessions:,} x {run.steps}-step chains, conc {run.concurrency}"
        out(f"{label:<{W}} {run.sessions:>8,} {run.sessions * run.steps / run.seconds:>8,.0f} "
            f"{run.all_p50_ms:>7.3f} ms {plan_p50(run):>5.3f} ms {run.cpu_low_us:>5.0f} us")
    out(f"  {scale.big.sessions:,} / {scale.small.sessions:,} sessions: commit p50 "
        f"{_x(scale.commit_ratio)}, planning p50 {_x(scale.plan_ratio)}, worker CPU per step "
        f"{_x(scale.cpu_ratio)} (CPU/step: this process's CPU time per commit)")


def resume_table(out: Any, resume: ResumeResult | None) -> None:
    if resume is None:
        return
    out("")
    head = f"{'resume of a paused session (in-process)':<{W}} {'n':>6} {'p50 ms':>7} {'max ms':>7}"
    out(head)
    out("-" * len(head))
    label = f"resume() -> next step starts ({resume.committed:,} committed)"
    out(f"{label:<{W}} {len(resume.to_next_step_ms):>6} {resume.p50_ms:>7.3f} "
        f"{resume.max_ms:>7.3f}")
    label = "the resume() call alone"
    out(f"{label:<{W}} {len(resume.call_ms):>6} {resume.call_p50_ms:>7.3f} "
        f"{max(resume.call_ms, default=float('nan')):>7.3f}")


def scale_targets(scale: ScaleResult | None) -> list[dict[str, Any]]:
    if scale is None:
        return []
    n, m = f"{scale.big.sessions:,}", f"{scale.small.sessions:,}"
    return [{"target": f"{what} at {n} sessions <= {DRIFT_MAX:g} x at {m}",
             "value": _x(value), "pass": value <= DRIFT_MAX}
            for what, value in (("commit p50", scale.commit_ratio),
                                ("planning p50", scale.plan_ratio),
                                ("worker CPU per step", scale.cpu_ratio))]


def resume_targets(resume: ResumeResult | None) -> list[dict[str, Any]]:
    if resume is None:
        return []
    return [{"target": f"resume -> next step p50 <= {RESUME_MS_MAX:g} ms "
                       f"({resume.committed:,} steps)",
             "value": f"{resume.p50_ms:.1f} ms (max {resume.max_ms:.1f})",
             "pass": resume.p50_ms <= RESUME_MS_MAX}]
