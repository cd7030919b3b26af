"""The worker: `arq worker.WorkerSettings` runs a process that hosts the step consumer."""

from __future__ import annotations

import os
from typing import Any

from arq.connections import RedisSettings

from sessions.errors import ConfigError
from sessions.redis_url import arq_redis_settings
from sessions.settings import DEFAULT_REDIS_URL


async def _startup(ctx: dict[str, Any]) -> None:
    from sessions.connect import open_store
    from sessions.logs import configure_logging
    from sessions.settings import DurableSettings
    from worker.consumer import StepConsumer

    configure_logging()
    settings = DurableSettings()
    consumer = StepConsumer(settings, open_store(settings))
    await consumer.start()
    ctx["durable_consumer"] = consumer
    from sessions import metrics

    ctx["durable_metrics"] = metrics.start_worker_metrics(
        settings.metrics_port, consumer, settings.worker_concurrency)


async def _shutdown(ctx: dict[str, Any]) -> None:
    consumer = ctx.get("durable_consumer")
    if consumer is not None:
        await consumer.stop()
        await consumer.store.redis.aclose()
    if "durable_metrics" in ctx:
        from sessions import metrics

        metrics.stop_worker_metrics(ctx.pop("durable_metrics"))


def _arq_redis_settings() -> RedisSettings:
    try:
        return arq_redis_settings(os.environ.get("DURABLE_REDIS_URL", DEFAULT_REDIS_URL))
    except (RuntimeError, ValueError, ConfigError):
        # Importing this module must not fail (`durable run` imports it and reports a bad
        # URL itself); `arq worker` then fails to connect, naming the variable.
        return RedisSettings(host="invalid-DURABLE_REDIS_URL", conn_retries=0)


async def ping(ctx: dict[str, Any]) -> str:
    """arq needs one function; steps travel on our own streams, not arq's queue."""
    return "pong"


class WorkerSettings:
    functions = [ping]
    on_startup = _startup
    on_shutdown = _shutdown
    # The same URL as the steps' store, Sentinel included (arq's from_dsn knows no Sentinel).
    redis_settings = _arq_redis_settings()
    queue_name = os.environ.get("DURABLE_KEY_PREFIX", "durable") + ":arq"
    health_check_interval = 30
