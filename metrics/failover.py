"""Fast failover's metrics (worker/failover.py, scheduler/failover.py): who declared
workers dead, how long their steps waited, and workers that found themselves declared
dead (their beats stopped reaching Redis while they lived)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

# A dead worker's steps run again a few seconds after its last beat (the silence the
# rule waits out, then a re-claim); the claim_idle_ms backstop is 15 s.
FAILOVER_BUCKETS = (0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 5, 6, 8, 10, 15, 20, 30, 60)

DECLARED_DEAD = Counter("durable_workers_declared_dead", "Step consumers this process "
                        "declared dead after DURABLE_FAILOVER_MISSED_BEATS missed beats "
                        "(one per shard), by what declared them: worker, run (durable "
                        "run) or scheduler", ["by"])
FAILOVER_SECONDS = Histogram("durable_failover_rerun_seconds", "From a dead worker's last "
                             "beat to the re-run of one of its steps on this worker",
                             buckets=FAILOVER_BUCKETS)
FOUND_DEAD = Counter("durable_worker_found_declared_dead", "Times this worker found that it "
                     "had been declared dead (its beats did not reach Redis for too long): "
                     "the steps it ran then run elsewhere, its own results are dropped")


def declared_dead(by: str) -> None:
    DECLARED_DEAD.labels(by).inc()


def failover_rerun(seconds: float) -> None:
    FAILOVER_SECONDS.observe(seconds)


def found_declared_dead() -> None:
    FOUND_DEAD.inc()
