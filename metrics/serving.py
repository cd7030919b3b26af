"""Serving /metrics: the worker's and the scheduler's own HTTP server, the API's body."""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import prometheus_client
from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from strands_durable.metrics.fleet import (
    FleetCollector,
    FleetReader,
    SnapshotCollector,
    combined_registry,
)
from strands_durable.metrics.process import (
    WORKER_RUNNING,
    WORKER_SLOTS,
    WORKER_STEP_SLOTS,
    WORKER_UP,
    register_role,
)
from strands_durable.redis_targets import Timeouts
from strands_durable.store.fleet_reads import (
    open_sync_client,
)
from strands_durable.store.keys import Keys
from strands_durable.store.outage import RedisOutage
from strands_durable.store.store import Store

log = logging.getLogger("durable.metrics")

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
    return generate_latest(combined_registry(SnapshotCollector(snap)))


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

    @property
    def slot_limit(self) -> int: ...


def start_worker_metrics(port: int, consumer: RunningCount, concurrency: int,
                         host: str = DEFAULT_METRICS_HOST) -> MetricsServer | None:
    """A worker's metrics; served on `port` unless it is 0. A port already taken (two
    workers on one host with the default) is logged, never fatal: steps matter more."""
    register_role("worker")
    WORKER_UP.set(1)
    WORKER_SLOTS.set(concurrency)
    WORKER_RUNNING.set_function(lambda: consumer.running)
    WORKER_STEP_SLOTS.set_function(lambda: consumer.slot_limit)
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
