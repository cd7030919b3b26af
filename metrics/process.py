"""Process metrics: counters and histograms in the default registry, observed where the
work happens (one call per site in the worker and scheduler), and the role gauges."""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

import prometheus_client
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    Counter,
    Gauge,
    Histogram,
)

from strands_durable.models import StepResult

log = logging.getLogger("durable.metrics")

# `*_created` series double every counter for nothing a dashboard uses.
prometheus_client.disable_created_metrics()

CONTENT_TYPE = CONTENT_TYPE_LATEST
MAX_AGENT_LABELS = 200  # distinct agent ids per process before the rest become "other"

# LLM calls take seconds to minutes; no-op steps take milliseconds.
STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
COMMIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
BYTES_BUCKETS = (256, 1024, 4096, 16_384, 65_536, 262_144, 1_048_576, 4_194_304, 16_777_216)
RESUME_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

# -- process metrics -----------------------------------------------------------------
STEPS = Counter("durable_steps", "Steps that ended in this process, by outcome: completed "
                "(committed), retried, failed (session failed), lease_lost, discarded "
                "(commit refused: stale, duplicate or session gone)",
                ["pattern", "agent", "outcome"])
STEP_SECONDS = Histogram("durable_step_duration_seconds", "Time of a step's agent call, for "
                         "steps that completed", ["pattern", "agent"], buckets=STEP_BUCKETS)
COMMIT_SECONDS = Histogram("durable_checkpoint_commit_seconds", "Latency of the atomic "
                           "checkpoint commit (one Lua script)", buckets=COMMIT_BUCKETS)
CHECKPOINT_BYTES = Histogram("durable_checkpoint_bytes", "Bytes a committed checkpoint "
                             "writes: result, pattern_state, messages, next steps, artifacts",
                             buckets=BYTES_BUCKETS)
RECLAIMED = Counter("durable_steps_reclaimed", "Stream entries re-claimed from a worker that "
                    "left them idle past claim_idle_ms")
DEAD_LETTERS = Counter("durable_dead_letters", "Stream entries moved to the dead-letter "
                       "stream")
TOKENS = Counter("durable_tokens", "Model tokens of committed steps", ["agent", "direction"])
RESUME_SECONDS = Histogram("durable_resume_seconds", "Time to resume a session (operator or "
                           "API resume, lock to commit)", buckets=RESUME_BUCKETS)
# Role gauges join the registry only in a process of that role (see `register_role`),
# so an API process does not report `durable_worker_up 0`.
WORKER_UP = Gauge("durable_worker_up", "1 while this process runs a step consumer",
                  registry=None)
WORKER_RUNNING = Gauge("durable_worker_running_steps", "Steps this worker is running now",
                       registry=None)
WORKER_SLOTS = Gauge("durable_worker_concurrency", "Steps this worker may run at once",
                     registry=None)
WORKER_STEP_SLOTS = Gauge("durable_worker_step_slots", "Steps this worker takes at once now: "
                          "DURABLE_WORKER_CONCURRENCY, or fewer while its event loop is "
                          "saturated", registry=None)
WORKER_LOOP_BUSY = Gauge("durable_worker_loop_busy_ratio", "Share of the last pacing period "
                         "(20 ms) this worker's event loop was busy", registry=None)
WORKER_HEARTBEAT = Gauge("durable_worker_heartbeat_timestamp_seconds", "When this worker "
                         "last wrote its heartbeat (stale: its event loop is stuck)",
                         registry=None)
SCHEDULER_LEADER = Gauge("durable_scheduler_leader", "1 while this scheduler replica holds "
                         "the leader lock", registry=None)
TIMERS_PROMOTED = Counter("durable_timers_promoted", "Due timers (retry backoff, HITL "
                          "timeouts) this scheduler moved onto the step streams")
STUCK = Gauge("durable_sessions_stuck", "Running sessions with no commit for stuck_after_s "
              "and no step queued, running or on a timer (leader's last check)",
              registry=None)
STUCK_FLAGGED = Counter("durable_sessions_stuck_flagged", "session_stuck events written")
SESSIONS_EXPIRED = Counter("durable_sessions_expired", "Ended sessions the scheduler deleted "
                           "past DURABLE_RETENTION_DAYS")
DURATION_PAUSES = Counter("durable_duration_budget_pauses", "Sessions the scheduler paused "
                          "for exceeding runtime.budgets.max_duration_s")

ROLE_GAUGES: dict[str, tuple[Gauge, ...]] = {
    "worker": (WORKER_UP, WORKER_RUNNING, WORKER_SLOTS, WORKER_STEP_SLOTS, WORKER_LOOP_BUSY,
               WORKER_HEARTBEAT),
    "scheduler": (SCHEDULER_LEADER, STUCK),
}
_roles: set[str] = set()
_labels_lock = threading.Lock()


def register_role(role: str) -> None:
    """Add the role's gauges to the default registry (once per process)."""
    with _labels_lock:
        if role in _roles:
            return
        _roles.add(role)
    for gauge in ROLE_GAUGES[role]:
        REGISTRY.register(gauge)


class CappedLabels:
    """Label values that come from specs (agent ids, tool names): bounded in practice,
    capped here in case they are not; past the cap every new value is "other"."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._seen: set[str] = set()

    def __call__(self, value: str) -> str:
        value = value[:64] or "unknown"
        with _labels_lock:
            if value in self._seen:
                return value
            if len(self._seen) >= self.cap:
                return "other"
            self._seen.add(value)
            return value


agent_label = CappedLabels(MAX_AGENT_LABELS)


# -- observation points (one call per site in the worker and scheduler) --------------
def commit_timed(started: float, verdict: str, bytes_written: int) -> None:
    """A step's commit, sent at `started` (time.perf_counter), came back (the worker
    times it: metrics never stand on the commit path); a written checkpoint is measured."""
    COMMIT_SECONDS.observe(time.perf_counter() - started)
    if verdict == "ok":
        CHECKPOINT_BYTES.observe(bytes_written)


@functools.lru_cache(maxsize=1024)
def _completed(pattern: str, agent: str) -> tuple[Any, Any, Any, Any]:
    """The children a completed step touches, looked up once per (pattern, agent)."""
    return (STEPS.labels(pattern, agent, "completed"), STEP_SECONDS.labels(pattern, agent),
            TOKENS.labels(agent, "input"), TOKENS.labels(agent, "output"))


def step_committed(pattern: str, verdict: str, result: StepResult) -> None:
    """A step's commit came back (any verdict but a retried conflict)."""
    agent = agent_label(result.agent)
    if verdict != "ok":
        STEPS.labels(pattern, agent, "discarded").inc()
        return
    steps, seconds, tokens_in, tokens_out = _completed(pattern, agent)
    steps.inc()
    seconds.observe(result.duration_ms / 1000)
    tokens_in.inc(result.input_tokens)
    tokens_out.inc(result.output_tokens)


def step_failed(pattern: str, agent: str, retried: bool) -> None:
    STEPS.labels(pattern, agent_label(agent), "retried" if retried else "failed").inc()


def step_lost(pattern: str, agent: str) -> None:
    STEPS.labels(pattern, agent_label(agent), "lease_lost").inc()


def step_reclaimed() -> None:
    RECLAIMED.inc()


def dead_lettered() -> None:
    DEAD_LETTERS.inc()


def heartbeat() -> None:
    WORKER_HEARTBEAT.set_to_current_time()


def worker_paced(busy: float) -> None:
    """The worker revised its step slots (worker/slots.py) after a period this busy."""
    WORKER_LOOP_BUSY.set(busy)


P = ParamSpec("P")
R = TypeVar("R")


def timed_resume(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Decorates `resume`: a resume that went through is observed; a refused one is not."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        started = time.perf_counter()
        result = await fn(*args, **kwargs)
        RESUME_SECONDS.observe(time.perf_counter() - started)
        return result

    return wrapper
