"""Prometheus metrics: what each process measures, and the fleet read from Redis.

Two kinds of metric live here:
- process metrics (counters and histograms in the default registry), observed where
  the work happens: steps and their outcome, step duration, checkpoint commit latency
  and size, reclaims, dead letters, tokens, resume latency, worker and scheduler state;
- fleet gauges (stream lag and pending, timers due, sessions by status, live workers)
  that no single process owns: they are read from Redis when /metrics is scraped, by
  `FleetCollector` (the scheduler) and `render_api_metrics` (the API). Workers do not
  export them, so they are not repeated once per worker; dashboards take `max by
  (shard)` / `max by (status)` to merge the API's and the scheduler replicas' copies.

Labels are bounded: pattern (seven values), agent (the specs' agent ids, capped), outcome,
direction, status, shard. Never a session id.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ParamSpec, Protocol, TypeVar

import prometheus_client
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from strands_durable.models import SessionStatus, StepResult
from strands_durable.store.codec import as_str
from strands_durable.store.fleet import liveness_window_s, seen_recently
from strands_durable.store.fleet_reads import (
    PER_SHARD,
    SyncClient,
    open_sync_client,
    read_fleet_sync,
)
from strands_durable.store.keys import CONSUMER_GROUP, Keys
from strands_durable.store.outage import RedisOutage
from strands_durable.store.redis_url import Timeouts
from strands_durable.store.store import CommitOutcome, CommitRequest, Store

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
    "worker": (WORKER_UP, WORKER_RUNNING, WORKER_SLOTS, WORKER_HEARTBEAT),
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


_agents: set[str] = set()


def agent_label(agent: str) -> str:
    """Agent ids come from specs: bounded in practice, capped here in case they are not."""
    agent = agent[:64] or "unknown"
    with _labels_lock:
        if agent in _agents:
            return agent
        if len(_agents) >= MAX_AGENT_LABELS:
            return "other"
        _agents.add(agent)
        return agent


# -- observation points (one call per site in the worker and scheduler) --------------
async def timed_commit(store: Store, req: CommitRequest) -> CommitOutcome:
    """`store.commit(req)`, timed; a checkpoint that was written is also measured."""
    started = time.perf_counter()
    outcome = await store.commit(req)
    COMMIT_SECONDS.observe(time.perf_counter() - started)
    if outcome.verdict == "ok":
        CHECKPOINT_BYTES.observe(outcome.bytes_written)
    return outcome


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


# -- the fleet, read from Redis at scrape time -------------------------------------------
@dataclass(frozen=True)
class ShardSnapshot:
    shard: int
    pending: int = 0  # delivered to a worker, not yet acknowledged (in flight)
    lag: int = 0  # on the stream, not yet delivered
    timers_due: int = 0  # due timers not yet promoted
    timers: int = 0  # every timer, due or not
    dead: int = 0  # entries on the dead-letter stream


@dataclass(frozen=True)
class FleetSnapshot:
    shards: Sequence[ShardSnapshot]
    sessions: dict[str, int]
    workers_alive: int
    workers_known: int
    ok: bool = True
    read_seconds: float = 0.0
    taken_at: float = field(default_factory=time.monotonic)




def parse_fleet(replies: Sequence[Any], keys: Keys, now_ms: int,
                heartbeat_s: float) -> FleetSnapshot:
    """Pure: the snapshot from the pipeline's replies (errors come back as exceptions)."""
    shards: list[ShardSnapshot] = []
    sessions = {s.value: 0 for s in SessionStatus}
    for shard in range(keys.shards):
        groups, length, due, timers, dead, *counts = replies[shard * PER_SHARD:
                                                              (shard + 1) * PER_SHARD]
        pending, lag = _group_backlog(groups, _int(length))
        shards.append(ShardSnapshot(shard, pending, lag, _int(due), _int(timers), _int(dead)))
        for status, count in zip(SessionStatus, counts, strict=True):
            sessions[status.value] += _int(count)
    beats = replies[keys.shards * PER_SHARD]
    alive, known = _workers(beats if isinstance(beats, list) else [], now_ms, heartbeat_s)
    return FleetSnapshot(shards, sessions, alive, known)


def _group_backlog(groups: Any, length: int) -> tuple[int, int]:
    """(pending, lag) of the workers' group. Acknowledged entries are deleted, so what
    the stream holds is pending plus undelivered: that is the lag when Redis cannot
    tell it (XINFO's lag is nil after some deletions)."""
    if not isinstance(groups, list):
        return 0, length  # no stream or no group yet: nothing was ever delivered
    for group in groups:
        info = {as_str(k): v for k, v in group.items()}
        if as_str(info.get("name")) != CONSUMER_GROUP:
            continue
        pending = _int(info.get("pending"))
        lag = info.get("lag")
        return pending, _int(lag) if lag is not None else max(0, length - pending)
    return 0, length


def _workers(beats: Iterable[Any], now_ms: int, heartbeat_s: float) -> tuple[int, int]:
    within_s = liveness_window_s(heartbeat_s)
    alive = known = 0
    for raw in beats:
        known += 1
        try:
            seen_ms = int(json.loads(raw).get("last_seen_ms", 0))
            if seen_recently((now_ms - seen_ms) / 1000, within_s):
                alive += 1
        except (ValueError, TypeError, AttributeError):
            continue
    return alive, known


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def fleet_families(snap: FleetSnapshot) -> Iterator[Metric]:
    up = GaugeMetricFamily("durable_redis_up", "1 if the last read of the fleet's state "
                           "from Redis succeeded")
    up.add_metric([], 1 if snap.ok else 0)
    yield up
    if not snap.ok:
        return
    per_shard = (
        ("durable_stream_pending", "Steps delivered to a worker and not yet acknowledged",
         "pending"),
        ("durable_stream_lag", "Steps on the stream not yet delivered to any worker", "lag"),
        ("durable_timers_due", "Timers (retry backoff, HITL timeouts) due and not yet "
         "promoted", "timers_due"),
        ("durable_timers_scheduled", "Timers waiting, due or not", "timers"),
        ("durable_dead_letter_entries", "Entries on the dead-letter stream (see `durable "
         "requeue`)", "dead"),
    )
    for name, doc, attr in per_shard:
        family = GaugeMetricFamily(name, doc, labels=["shard"])
        for s in snap.shards:
            family.add_metric([str(s.shard)], getattr(s, attr))
        yield family
    sessions = GaugeMetricFamily("durable_sessions", "Sessions by status", labels=["status"])
    for status, count in snap.sessions.items():
        sessions.add_metric([status], count)
    yield sessions
    alive = GaugeMetricFamily("durable_workers_alive", "Workers whose heartbeat is fresh")
    alive.add_metric([], snap.workers_alive)
    yield alive
    known = GaugeMetricFamily("durable_workers_registered", "Worker heartbeats in Redis, "
                              "fresh or stale")
    known.add_metric([], snap.workers_known)
    yield known
    took = GaugeMetricFamily("durable_fleet_read_seconds", "Time the last fleet read took")
    took.add_metric([], snap.read_seconds)
    yield took


class FleetReader:
    """Reads the fleet snapshot, at most once per `max_age_s` however often it is asked."""

    def __init__(self, keys: Keys, heartbeat_s: float, max_age_s: float = 1.0) -> None:
        self.keys = keys
        self.heartbeat_s = heartbeat_s
        self.max_age_s = max_age_s
        self._last: FleetSnapshot | None = None
        self._lock = threading.Lock()

    def _fresh(self) -> FleetSnapshot | None:
        last = self._last
        if last is not None and time.monotonic() - last.taken_at < self.max_age_s:
            return last
        return None

    def _parse(self, replies: Sequence[Any], now_ms: int, started: float) -> FleetSnapshot:
        snap = parse_fleet(replies, self.keys, now_ms, self.heartbeat_s)
        snap = FleetSnapshot(snap.shards, snap.sessions, snap.workers_alive,
                             snap.workers_known, True, time.perf_counter() - started)
        self._last = snap
        return snap

    def read_sync(self, redis: SyncClient) -> FleetSnapshot:
        with self._lock:
            cached = self._fresh()
            if cached is not None:
                return cached
            started, now_ms = time.perf_counter(), int(time.time() * 1000)
            try:
                replies = read_fleet_sync(redis, self.keys, now_ms)
            except Exception as exc:  # a scrape must answer even with Redis down
                log.warning("fleet metrics: cannot read Redis (%s)", exc)
                return FleetSnapshot((), {}, 0, 0, ok=False)
            return self._parse(replies, now_ms, started)

    async def read(self, store: Store) -> FleetSnapshot:
        cached = self._fresh()
        if cached is not None:
            return cached
        started, now_ms = time.perf_counter(), int(time.time() * 1000)
        try:
            replies = await store.fleet_replies(now_ms)
        except Exception as exc:  # a scrape must answer even with Redis down
            log.warning("fleet metrics: cannot read Redis (%s)", exc)
            return FleetSnapshot((), {}, 0, 0, ok=False)
        return self._parse(replies, now_ms, started)


class FleetCollector(Collector):
    """The fleet gauges, read from Redis (sync client) each time the registry is
    collected: for processes that serve /metrics from prometheus-client's own thread."""

    def __init__(self, client: SyncClient, reader: FleetReader) -> None:
        self.client = client
        self.reader = reader

    def collect(self) -> Iterator[Metric]:
        yield from fleet_families(self.reader.read_sync(self.client))


class _Forward(Collector):
    """Everything in another registry (the process metrics), inside this one."""

    def __init__(self, source: CollectorRegistry) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        yield from self.source.collect()


class _Snapshot(Collector):
    def __init__(self, snap: FleetSnapshot) -> None:
        self.snap = snap

    def collect(self) -> Iterator[Metric]:
        yield from fleet_families(self.snap)


def combined_registry(*extra: Collector) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Forward(REGISTRY))
    for collector in extra:
        registry.register(collector)
    return registry


# -- serving -------------------------------------------------------------------------
_api_readers: weakref.WeakKeyDictionary[Store, FleetReader] = weakref.WeakKeyDictionary()


async def render_api_metrics(store: Store, heartbeat_s: float | None = None) -> bytes:
    """The API's GET /metrics body (serve it with `CONTENT_TYPE`): this process's metrics
    and the fleet gauges, read from `store`'s Redis now (or within the last second)."""
    reader = _api_readers.get(store)
    if reader is None:
        if heartbeat_s is None:
            from strands_durable.settings import DurableSettings

            heartbeat_s = DurableSettings().heartbeat_s
        reader = _api_readers[store] = FleetReader(store.keys, heartbeat_s)
    snap = await reader.read(store)
    return generate_latest(combined_registry(_Snapshot(snap)))


@dataclass
class MetricsServer:
    """prometheus-client's HTTP server (a daemon thread) and how to stop it."""

    port: int
    _server: Any
    _thread: threading.Thread
    _closers: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        for closer in self._closers:
            closer()


DEFAULT_METRICS_HOST = "127.0.0.1"  # DURABLE_METRICS_HOST: loopback unless told


def serve(port: int, registry: CollectorRegistry | Collector = REGISTRY,
          addr: str = DEFAULT_METRICS_HOST) -> MetricsServer:
    """Serve `registry` on http://addr:port/metrics; OSError if the port is taken."""
    server, thread = prometheus_client.start_http_server(port, addr, registry=registry)
    return MetricsServer(int(server.server_address[1]), server, thread)


class RunningCount(Protocol):
    @property
    def running(self) -> int: ...


def start_worker_metrics(port: int, consumer: RunningCount, concurrency: int,
                         host: str = DEFAULT_METRICS_HOST) -> MetricsServer | None:
    """A worker's metrics; served on `port` unless it is 0. A port already taken (two
    workers on one host with the default) is logged, never fatal: steps matter more."""
    register_role("worker")
    WORKER_UP.set(1)
    WORKER_SLOTS.set(concurrency)
    WORKER_RUNNING.set_function(lambda: consumer.running)
    if not port:
        return None
    try:
        server = serve(port, addr=host)
    except OSError as exc:
        log.warning("metrics: cannot listen on port %d of %s (%s); this worker serves no "
                    "/metrics (set DURABLE_METRICS_PORT to a free port, or 0, and "
                    "DURABLE_METRICS_HOST to an address of this host)", port, host, exc)
        return None
    log.info("metrics on http://%s:%d/metrics", host, server.port)
    return server


class RedisOutageCollector(Collector):
    """A worker's own view of Redis (the fleet's `durable_redis_up` is the api's and the
    scheduler's): whether it reaches Redis now, how many outages it rode out, how long."""

    def __init__(self, outage: RedisOutage) -> None:
        self.outage = outage

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("durable_worker_redis_up", "1 while this worker reaches "
                               "Redis; 0 during an outage it is riding out")
        up.add_metric([], 1 if self.outage.up else 0)
        now = GaugeMetricFamily("durable_worker_redis_outage_seconds", "How long the "
                                "current Redis outage has lasted (0 when Redis is up)")
        now.add_metric([], self.outage.current_down_s)
        count = CounterMetricFamily("durable_worker_redis_outages", "Redis outages this "
                                    "worker rode out (or is riding out)")
        count.add_metric([], self.outage.outages)
        total = CounterMetricFamily("durable_worker_redis_down_seconds", "Seconds this "
                                    "worker spent waiting for Redis, all outages")
        total.add_metric([], self.outage.total_down_s)
        yield from (up, now, count, total)


def watch_redis_outages(outage: RedisOutage) -> RedisOutageCollector:
    """Export a worker's outage state on the default registry (once per process)."""
    collector = RedisOutageCollector(outage)
    REGISTRY.register(collector)
    return collector


def stop_worker_metrics(server: MetricsServer | None) -> None:
    WORKER_UP.set(0)
    if server is not None:
        server.close()


def start_fleet_metrics(port: int, redis_url: str, keys: Keys, heartbeat_s: float,
                        host: str = DEFAULT_METRICS_HOST,
                        timeouts: Timeouts | None = None) -> MetricsServer:
    """Process metrics plus the fleet gauges (the scheduler's /metrics)."""
    client = open_sync_client(redis_url, timeouts)  # Sentinel and TLS URLs too
    registry = combined_registry(FleetCollector(client, FleetReader(keys, heartbeat_s)))
    try:
        server = serve(port, registry, addr=host)
    except OSError:
        client.close()
        raise
    server._closers.append(client.close)
    return server
