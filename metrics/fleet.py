"""The fleet gauges (stream lag and pending, timers, sessions by status, live workers),
read from Redis when /metrics is scraped: no single process owns them."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from strands_durable.models import SessionStatus
from strands_durable.store.codec import as_str
from strands_durable.store.fleet import liveness_window_s, seen_recently
from strands_durable.store.fleet_reads import (
    PER_SHARD,
    SyncClient,
    read_fleet_sync,
)
from strands_durable.store.keys import CONSUMER_GROUP, Keys
from strands_durable.store.store import Store

log = logging.getLogger("durable.metrics")


@dataclass(frozen=True)
class ShardSnapshot:
    shard: int
    pending: int = 0  # delivered to a worker, not yet acknowledged (in flight)
    lag: int = 0  # on the stream, not yet delivered
    timers_due: int = 0  # due timers not yet promoted
    timers: int = 0  # every timer, due or not
    dead: int = 0  # entries on the dead-letter stream
    deferred: int = 0  # off the stream, waiting on their namespaces' lists (fair dispatch)


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
        groups, length, due, timers, dead, deferred, *counts = replies[
            shard * PER_SHARD:(shard + 1) * PER_SHARD]
        pending, lag = _group_backlog(groups, _int(length))
        shards.append(ShardSnapshot(shard, pending, lag, _int(due), _int(timers), _int(dead),
                                    _int(deferred)))
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
        ("durable_stream_deferred", "Steps off the stream waiting for their namespace's "
         "turn (fair dispatch)", "deferred"),
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


class SnapshotCollector(Collector):
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
