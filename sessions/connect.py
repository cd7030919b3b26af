"""Open the store named by the settings: a real Redis, or in-process (`memory://`)."""

from __future__ import annotations

from redis.asyncio import Redis

from sessions.keys import Keys
from sessions.redis_url import is_sentinel_url, sentinel_client
from sessions.settings import DurableSettings
from sessions.store import Store

MEMORY_URL = "memory://"


def redis_client(url: str) -> Redis:
    if url.startswith(MEMORY_URL):
        # The embedded default of `durable run`: nothing here claims durability.
        from fakeredis import FakeAsyncRedis

        return FakeAsyncRedis(decode_responses=True)
    if is_sentinel_url(url):  # redis+sentinel://h1:26379,h2:26379/master/db
        return sentinel_client(url, decode_responses=True, health_check_interval=30,
                               socket_keepalive=True)
    return Redis.from_url(url, decode_responses=True, health_check_interval=30,
                          socket_keepalive=True)


def open_store(settings: DurableSettings, redis: Redis | None = None) -> Store:
    keys = Keys(prefix=settings.key_prefix, shards=settings.shards)
    return Store(redis or redis_client(settings.redis_url), keys,
                 events_max=settings.events_max)
