"""The worker: `arq strands_durable.worker.WorkerSettings` runs a process that hosts the step
consumer.

arq is handed a client built here from DURABLE_REDIS_URL with the same options as the
store's (TLS, ACL user, Sentinel, Redis Cluster: store/cluster_arq.py, timeouts), and
both clients ride out Redis outages (store/outage.py): one line when Redis goes away,
one when it is back, and past DURABLE_REDIS_OUTAGE_S one line and exit 75. A worker
that cannot start (a bad setting, another DURABLE_SHARDS) says why in one line and
exits 2.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from arq.connections import ArqRedis, RedisSettings
from pydantic import ValidationError

from strands_durable.errors import ConfigError, RedisUrlError
from strands_durable.redis_targets import is_cluster_url, redact
from strands_durable.settings import DurableSettings, describe_settings_error
from strands_durable.store.connect import RefusingPool
from strands_durable.store.outage import RedisOutage, outage_client_kwargs
from strands_durable.store.redis_url import arq_redis_settings, async_redis_client
from strands_durable.worker.stop_watchdog import StopWatchdog

if TYPE_CHECKING:
    from arq.worker import Worker

log = logging.getLogger("durable.worker")

EXIT_BAD_CONFIG = 2
EXIT_REDIS_OUTAGE = 75  # EX_TEMPFAIL: a supervisor may start it again later
MEMORY_URL = "memory://"


def _announce(level: int, message: str) -> None:
    # arq touches Redis before our startup hook runs: make sure the line is formatted.
    from strands_durable.logs import configure_logging

    configure_logging()
    log.log(level, message)


def _exit(code: int, reason: str) -> NoReturn:
    """One line, then exit at once: during an outage nothing is left to clean up (the
    running steps' entries stay pending in Redis for another worker), and arq's own
    shutdown would wait on Redis again."""
    _announce(logging.CRITICAL, reason)
    logging.shutdown()
    os._exit(code)


@dataclass
class WorkerProcess:
    """What an `arq worker` process runs with, read from the environment at import (arq
    takes its client from the WorkerSettings class). Never raises: a bad setting is kept
    as `problem` and reported when the worker starts, not when something imports us."""

    settings: DurableSettings | None
    outage: RedisOutage | None
    problem: str = ""

    @classmethod
    def from_env(cls) -> WorkerProcess:
        try:
            settings = DurableSettings()
        except ValidationError as exc:
            return cls(None, None, describe_settings_error(exc))
        if settings.redis_url.startswith(MEMORY_URL):
            return cls(None, None, "DURABLE_REDIS_URL memory:// is `durable run`'s "
                                   "in-process store; a worker needs a real Redis")
        outage = RedisOutage(settings.redis_outage_s, redact(settings.redis_url),
                             announce=_announce,
                             on_give_up=lambda reason: _exit(EXIT_REDIS_OUTAGE, reason))
        return cls(settings, outage)

    def arq_client(self) -> ArqRedis:
        if self.settings is None or self.outage is None:
            # arq's pool when the settings are unusable: its first use reports them, exits.
            problem = self.problem
            return ArqRedis(connection_pool=RefusingPool(
                lambda: _exit(EXIT_BAD_CONFIG, f"worker not started: {problem}")))
        return async_redis_client(self.settings.redis_url, self.settings.redis_timeouts,
                                  redis_class=ArqRedis, health_check_interval=30,
                                  **outage_client_kwargs(self.outage))

    def arq_settings(self) -> RedisSettings:
        """For `arq --check` only (the worker itself uses `arq_client`)."""
        if self.settings is not None:
            try:
                return arq_redis_settings(self.settings.redis_url, self.settings.redis_timeouts)
            except RedisUrlError:
                pass
        return RedisSettings(host="invalid-DURABLE_REDIS_URL", conn_retries=0)


def arq_queue_name(prefix: str, redis_url: str) -> str:
    """arq's (unused) queue: on a Redis Cluster its name is a hash tag, so the queue and
    its `<queue>:health-check` key share a slot (store/cluster_arq.py)."""
    return f"{{{prefix}:arq}}" if is_cluster_url(redis_url) else f"{prefix}:arq"


PROCESS = WorkerProcess.from_env()
_metrics_watched = False


def _stop_riding_on_signal(outage: RedisOutage, watchdog: StopWatchdog) -> None:
    """On SIGTERM/SIGINT stop waiting for Redis, so a worker told to stop during an
    outage exits at once instead of at the outage limit, and bound the whole stop
    (worker/stop_watchdog.py). arq offers `Worker.on_stop` but no way to set it from
    WorkerSettings; `on_startup` runs inside Worker.main."""
    from arq.worker import Worker

    task = asyncio.current_task()
    frame = getattr(task.get_coro(), "cr_frame", None) if task else None
    worker: Worker | None = frame.f_locals.get("self") if frame is not None else None
    if not isinstance(worker, Worker):
        return
    previous = worker.on_stop

    def on_stop(sig: Any) -> None:
        watchdog.signalled(sig)
        outage.stop()
        if previous is not None:
            previous(sig)

    worker.on_stop = on_stop


async def _startup(ctx: dict[str, Any]) -> None:
    from strands_durable import metrics
    from strands_durable.logs import configure_logging
    from strands_durable.store.connect import open_store
    from strands_durable.worker.consumer import StepConsumer
    from strands_durable.worker.heap import freeze_startup_heap

    global _metrics_watched
    configure_logging()
    settings, outage = PROCESS.settings, PROCESS.outage
    if settings is None or outage is None:
        _exit(EXIT_BAD_CONFIG, f"worker not started: {PROCESS.problem}")
    _stop_riding_on_signal(outage, StopWatchdog(settings.shutdown_grace_s))
    consumer = StepConsumer(settings, open_store(settings, **outage_client_kwargs(outage)))
    # What a worker read before an outage is checked before it is planned from.
    consumer.runner.redis_outages = lambda: outage.outages
    try:
        await consumer.start()
    except ConfigError as exc:  # a shard count the keyspace was not set up with
        _exit(EXIT_BAD_CONFIG, f"worker not started: {exc}")
    ctx["durable_consumer"] = consumer
    ctx["durable_metrics"] = metrics.start_worker_metrics(
        settings.metrics_port, consumer, settings.worker_concurrency, settings.metrics_host)
    if not _metrics_watched:  # `arq --watch` runs startup again in the same process
        metrics.watch_redis_outages(outage)
        _metrics_watched = True
    freeze_startup_heap()


async def _shutdown(ctx: dict[str, Any]) -> None:
    from strands_durable.worker.telemetry import TRACING

    settings = PROCESS.settings
    consumer = ctx.get("durable_consumer")
    if consumer is not None:
        await consumer.stop()
        await consumer.store.close()
    # Spans still queued are exported, each endpoint bounded by its export timeout.
    if settings is not None:
        await asyncio.to_thread(TRACING.close, settings.otel_export_timeout_s)
    if "durable_metrics" in ctx:
        from strands_durable import metrics

        metrics.stop_worker_metrics(ctx.pop("durable_metrics"))


async def ping(ctx: dict[str, Any]) -> str:
    """arq needs one function; steps travel on our own streams, not arq's queue."""
    return "pong"


class WorkerSettings:
    functions = [ping]
    on_startup = _startup
    on_shutdown = _shutdown
    # arq's own connection: the store's URL and options, riding out outages too.
    redis_pool = PROCESS.arq_client()
    redis_settings = PROCESS.arq_settings()
    queue_name = arq_queue_name(os.environ.get("DURABLE_KEY_PREFIX", "durable"),
                                os.environ.get("DURABLE_REDIS_URL", ""))
    health_check_interval = 30
