"""Open the store named by the settings: a real Redis, or in-process (`memory://`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from redis.asyncio import Redis
from redis.asyncio.connection import ConnectionPool

from strands_durable.settings import DurableSettings
from strands_durable.store.keys import Keys
from strands_durable.store.redis_url import async_redis_client
from strands_durable.store.store import Store

MEMORY_URL = "memory://"


def session_settings(settings: DurableSettings) -> DurableSettings:
    """Where the commands that run, read and control sessions keep them: the Redis of
    DURABLE_REDIS_URL when set, else the user's local store (store/local_server.py,
    started on demand), unless DURABLE_EPHEMERAL keeps today's default URL."""
    if "redis_url" in settings.model_fields_set or settings.ephemeral:
        return settings
    from strands_durable.store.local_server import ensure_local_store

    return settings.model_copy(update={"redis_url": ensure_local_store(settings)})


def is_local(settings: DurableSettings) -> bool:
    """The settings name the user's local store (no fleet behind it)."""
    from strands_durable.store.local_server import local_url, state_dir

    return settings.redis_url == local_url(state_dir(settings))


def redis_client(settings: DurableSettings, **extra: Any) -> Redis:
    """The client of every role, with the settings' timeouts; `extra` goes to each
    connection (a worker passes its outage retry here)."""
    url = settings.redis_url
    if url.startswith(MEMORY_URL):
        # The embedded default of `durable run`: nothing here claims durability.
        from fakeredis import FakeAsyncRedis

        return FakeAsyncRedis(decode_responses=True)
    return async_redis_client(url, settings.redis_timeouts, decode_responses=True,
                              health_check_interval=30, **extra)


def open_store(settings: DurableSettings, redis: Redis | None = None, **extra: Any) -> Store:
    keys = Keys(prefix=settings.key_prefix, shards=settings.shards)
    return Store(redis or redis_client(settings, **extra), keys,
                 events_max=settings.events_max, heartbeat_s=settings.heartbeat_s)


class RefusingPool(ConnectionPool):
    """A client's pool that must never connect (a worker whose settings are unusable):
    its first use calls `refuse`, which reports why and exits."""

    def __init__(self, refuse: Callable[[], NoReturn]) -> None:
        super().__init__()
        self.refuse = refuse

    async def get_connection(self, *args: Any, **kwargs: Any) -> NoReturn:
        self.refuse()
