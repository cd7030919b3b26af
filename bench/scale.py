"""Many sessions at once on one worker: commit latency, planning time and worker CPU per
step with `big` concurrent sessions against the same with `small` ones.

Each run creates its sessions (chains) before one in-process StepConsumer starts
(bench/latency.py's run, every step in its window), so every session is live for the
whole run: the stream hands the worker one step of each session in turn. The few
sessions run longer chains, so that their run lasts long enough to measure (a step's
cost does not depend on its index: see the step-5000 / step-10 rows). The ratios
many / few are the targets (<= 1.2x).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.latency import LatencyResult, ratio, run_latency


@dataclass
class ScaleResult:
    small: LatencyResult
    big: LatencyResult

    @property
    def commit_ratio(self) -> float:
        return ratio(self.big.all_p50_ms, self.small.all_p50_ms)

    @property
    def plan_ratio(self) -> float:
        return ratio(plan_p50(self.big), plan_p50(self.small))

    @property
    def cpu_ratio(self) -> float:
        return ratio(self.big.cpu_low_us, self.small.cpu_low_us)

    def to_dict(self) -> dict[str, Any]:
        return {"small": self.small.to_dict(), "big": self.big.to_dict(),
                "commit_p50_ratio": round(self.commit_ratio, 3),
                "planning_p50_ratio": round(self.plan_ratio, 3),
                "cpu_per_step_ratio": round(self.cpu_ratio, 3)}


def plan_p50(run: LatencyResult) -> float:
    return run.plan_low.p50 if run.plan_low is not None else float("nan")


async def run_scale(redis_url: str, *, sessions: tuple[int, int], steps: tuple[int, int],
                    concurrency: int, timeout_s: float) -> ScaleResult:
    """`sessions[i]` chains of `steps[i]` steps at once, for the few (0) and many (1)."""
    runs = [await run_latency(redis_url, sessions=n, steps=k, low=(1, k), high=(1, k),
                              concurrency=concurrency, timeout_s=timeout_s,
                              footprint_sample=0)
            for n, k in zip(sessions, steps, strict=True)]
    return ScaleResult(*runs)
