"""Redis Sentinel in DURABLE_REDIS_URL: `redis+sentinel://[user:password@]h1:p1,h2:p2/master[/db]`.

A plain `redis://` or `rediss://` URL names one Redis; a `redis+sentinel://` (or
`rediss+sentinel://` for TLS) URL names the Sentinels and the master's service name,
and every connection asks the Sentinels where the master is, so clients follow a
failover. The user and password are the master's (URL-encoded); Sentinels without
auth are the common case.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from redis import Redis as SyncRedis
from redis.asyncio import Redis

from sessions.errors import ConfigError

if TYPE_CHECKING:
    from arq.connections import RedisSettings

SENTINEL_SCHEMES = {"redis+sentinel": False, "rediss+sentinel": True}
SENTINEL_DEFAULT_PORT = 26379
FORM = "redis+sentinel://[user:password@]host[:port][,host[:port]...]/master[/db]"


@dataclass(frozen=True)
class SentinelTarget:
    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    ssl: bool = False


def is_sentinel_url(url: str) -> bool:
    return url.split("://", 1)[0].lower() in SENTINEL_SCHEMES


def _host_port(item: str, url: str) -> tuple[str, int]:
    default = str(SENTINEL_DEFAULT_PORT)
    if item.startswith("["):  # [IPv6]:port
        host, _, tail = item[1:].partition("]")
        port = tail.removeprefix(":") or default
    elif ":" in item:
        host, _, port = item.rpartition(":")
    else:
        host, port = item, default
    if not host:
        raise ConfigError(f"DURABLE_REDIS_URL {_redact(url)}: empty sentinel host in {item!r}")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"DURABLE_REDIS_URL {_redact(url)}: bad sentinel port in {item!r}")
    return host, int(port)


def _redact(url: str) -> str:
    scheme, _, rest = url.partition("://")
    creds, at, hosts = rest.rpartition("@")
    return f"{scheme}://***@{hosts}" if at and creds else url


def parse_sentinel_url(url: str) -> SentinelTarget:
    """The Sentinel target of `url`; ConfigError naming the problem (never the password)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in SENTINEL_SCHEMES:
        raise ConfigError(f"DURABLE_REDIS_URL {_redact(url)}: not a Sentinel URL ({FORM})")
    rest = rest.split("?", 1)[0].split("#", 1)[0]
    netloc, _, path = rest.partition("/")
    creds, at, hosts = netloc.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = creds.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    items = [h for h in hosts.split(",") if h.strip()]
    if not items:
        raise ConfigError(f"DURABLE_REDIS_URL {_redact(url)}: no sentinel hosts ({FORM})")
    sentinels = tuple(_host_port(h.strip(), url) for h in items)
    parts = [p for p in path.split("/") if p]
    if not parts or len(parts) > 2:
        raise ConfigError(f"DURABLE_REDIS_URL {_redact(url)}: expected /master[/db] ({FORM})")
    if len(parts) == 2 and not parts[1].isdigit():
        raise ConfigError(f"DURABLE_REDIS_URL {_redact(url)}: db must be a number, "
                         f"got {parts[1]!r}")
    db = int(parts[1]) if len(parts) == 2 else 0
    return SentinelTarget(sentinels, unquote(parts[0]), db, username, password,
                          SENTINEL_SCHEMES[scheme.lower()])


def sentinel_client(url: str, **connection_kwargs: Any) -> Redis:
    """A client of the current master; it re-asks the Sentinels after a failover."""
    from redis.asyncio.sentinel import Sentinel

    target = parse_sentinel_url(url)
    tls = {"ssl": True} if target.ssl else {}
    sentinel = Sentinel(list(target.sentinels), sentinel_kwargs={"socket_timeout": 5, **tls},
                        **tls)
    return sentinel.master_for(target.master, db=target.db, username=target.username,
                               password=target.password, **connection_kwargs)


def sync_redis_client(url: str, **connection_kwargs: Any) -> SyncRedis:
    """A blocking client of the same URL, Sentinel or not (metrics collectors)."""
    if not is_sentinel_url(url):
        return SyncRedis.from_url(url, **connection_kwargs)
    from redis.sentinel import Sentinel

    target = parse_sentinel_url(url)
    tls = {"ssl": True} if target.ssl else {}
    sentinel = Sentinel(list(target.sentinels), sentinel_kwargs={"socket_timeout": 5, **tls},
                        **tls)
    return sentinel.master_for(target.master, db=target.db, username=target.username,
                               password=target.password, **connection_kwargs)


def arq_redis_settings(url: str) -> RedisSettings:
    """arq's own connection for `arq worker`, from the same URL (Sentinel or not)."""
    from arq.connections import RedisSettings

    if not is_sentinel_url(url):
        return RedisSettings.from_dsn(url)
    target = parse_sentinel_url(url)
    return RedisSettings(host=list(target.sentinels), sentinel=True,
                         sentinel_master=target.master, database=target.db,
                         username=target.username, password=target.password, ssl=target.ssl)
