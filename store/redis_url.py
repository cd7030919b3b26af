"""The same Redis connection for every role, built from a parsed DURABLE_REDIS_URL
(core/redis_targets.py reads and checks the URL's forms and options).

The store, arq's own connection, the metrics readers and the CLI all build their clients
here (`async_redis_client`, `sync_redis_client`), with the connect and socket timeouts of the
settings. Every error names the URL with its password replaced by `***`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar, cast

from redis import Redis as SyncRedis
from redis.asyncio import Redis

from strands_durable.redis_targets import (
    ClusterTarget,
    RedisTarget,
    SentinelTarget,
    ServerTarget,
    Timeouts,
    parse_redis_url,
)

if TYPE_CHECKING:
    from arq.connections import RedisSettings

AsyncClient = TypeVar("AsyncClient", bound=Redis)


def _connection_kwargs(target: RedisTarget, timeouts: Timeouts, **extra: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "db": target.db, "username": target.username, "password": target.password,
        "socket_connect_timeout": timeouts.connect_s, "socket_timeout": timeouts.socket_s,
    }
    if getattr(target, "unix_path", None) is None:  # a unix socket takes no TCP keepalive
        kwargs["socket_keepalive"] = True
    if target.ssl:
        kwargs.update(target.tls.kwargs())
        if isinstance(target, ClusterTarget):
            kwargs["ssl"] = True  # RedisCluster picks its connection class from this
    kwargs.update(extra)
    return kwargs


def _sentinel_kwargs(target: SentinelTarget, timeouts: Timeouts) -> dict[str, Any]:
    """How to reach the Sentinels themselves: same TLS, no auth, the same timeouts."""
    kwargs: dict[str, Any] = {"socket_connect_timeout": timeouts.connect_s,
                              "socket_timeout": timeouts.socket_s}
    if target.ssl:
        kwargs.update(ssl=True, **target.tls.kwargs())
    return kwargs


def async_redis_client(url: str, timeouts: Timeouts | None = None, *,
                       redis_class: type[AsyncClient] = Redis,  # type: ignore[assignment]
                       **extra: Any) -> AsyncClient:
    """An asyncio client of `url` (Sentinel, cluster or not). `extra` goes to every connection
    (decode_responses, retry, health_check_interval...), but `pool_class` and
    `sentinel_pool_class`, the pools to use. No I/O until first used."""
    from redis.asyncio import connection, sentinel

    from strands_durable.store import resp
    from strands_durable.store.pool import QuickConnectionPool, QuickSentinelConnectionPool

    resp.install()  # hiredis packs the commands, as on redis-py's blocking connections
    target = parse_redis_url(url)
    timeouts = timeouts or Timeouts()
    if isinstance(target, ClusterTarget):
        from strands_durable.store.cluster_client import async_cluster_for

        kwargs = _connection_kwargs(target, timeouts, **extra)
        return cast(AsyncClient, async_cluster_for(target.seeds, kwargs, redis_class))
    pool_class = extra.pop("pool_class", QuickConnectionPool)
    sentinel_pool_class = extra.pop("sentinel_pool_class", QuickSentinelConnectionPool)
    kwargs = _connection_kwargs(target, timeouts, **extra)
    if isinstance(target, SentinelTarget):
        sentinels = sentinel.Sentinel(list(target.sentinels), ssl=target.ssl,
                                      sentinel_kwargs=_sentinel_kwargs(target, timeouts),
                                      **kwargs)
        return sentinels.master_for(target.master, redis_class=redis_class,
                                    connection_pool_class=sentinel_pool_class)
    pool = pool_class(**_server(target, connection), **kwargs)
    return cast(AsyncClient, redis_class.from_pool(pool))


def sync_redis_client(url: str, timeouts: Timeouts | None = None, **extra: Any) -> SyncRedis:
    """A blocking client of the same URL, Sentinel, cluster or not (metrics collectors)."""
    from redis import connection, sentinel

    target = parse_redis_url(url)
    timeouts = timeouts or Timeouts()
    kwargs = _connection_kwargs(target, timeouts, **extra)
    if isinstance(target, ClusterTarget):
        from strands_durable.store.cluster_client import sync_cluster_client

        # The same commands as a Redis for what the metrics read (routed per key).
        return cast(SyncRedis, sync_cluster_client(target.seeds, kwargs))
    if isinstance(target, SentinelTarget):
        sentinels = sentinel.Sentinel(list(target.sentinels), ssl=target.ssl,
                                      sentinel_kwargs=_sentinel_kwargs(target, timeouts),
                                      **kwargs)
        return sentinels.master_for(target.master)
    return SyncRedis.from_pool(connection.ConnectionPool(**_server(target, connection),
                                                         **kwargs))


def _server(target: ServerTarget, connection: Any) -> dict[str, Any]:
    """Where one Redis is, for `connection` (redis.connection or redis.asyncio's)."""
    if target.unix_path is not None:
        return {"connection_class": connection.UnixDomainSocketConnection,
                "path": target.unix_path}
    return {"connection_class": connection.SSLConnection if target.ssl
            else connection.Connection, "host": target.host, "port": target.port}


def arq_redis_settings(url: str, timeouts: Timeouts | None = None) -> RedisSettings:
    """arq's RedisSettings for the same URL (what `arq --check` connects with; the worker
    itself hands arq a client built by `async_redis_client`)."""
    from arq.connections import RedisSettings

    target = parse_redis_url(url)
    timeouts = timeouts or Timeouts()
    tls: dict[str, Any] = {}
    if target.ssl:
        tls = {"ssl_ca_certs": target.tls.ca_certs, "ssl_certfile": target.tls.certfile,
               "ssl_keyfile": target.tls.keyfile, "ssl_cert_reqs": target.tls.cert_reqs,
               "ssl_check_hostname": target.tls.check_hostname}
    common: dict[str, Any] = {
        "database": target.db, "username": target.username, "password": target.password,
        "ssl": target.ssl, "conn_timeout": max(1, round(timeouts.connect_s)), **tls}
    if isinstance(target, ClusterTarget):
        # arq --check has no cluster client: it reads the health key from the first seed.
        return RedisSettings(host=target.seeds[0][0], port=target.seeds[0][1], **common)
    if isinstance(target, SentinelTarget):
        return RedisSettings(host=list(target.sentinels), sentinel=True,
                             sentinel_master=target.master, **common)
    if target.unix_path is not None:
        return RedisSettings(unix_socket_path=target.unix_path, **common)
    return RedisSettings(host=target.host, port=target.port, **common)
