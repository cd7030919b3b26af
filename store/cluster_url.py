"""Parsing `redis+cluster://` and `rediss+cluster://` URLs (the forms and the errors are
those of store/redis_url.py, which dispatches here)."""

from __future__ import annotations

from strands_durable.store.redis_url import (
    CLUSTER_FORM,
    CLUSTER_SCHEMES,
    DEFAULT_PORT,
    MAX_SEEDS,
    ClusterTarget,
    _credentials,
    _host_port,
    _problem,
    _query,
)


def parse_cluster_url(url: str) -> ClusterTarget:
    """The Redis Cluster of `url`; RedisUrlError naming the problem (never the password)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in CLUSTER_SCHEMES:
        raise _problem(url, f"not a cluster URL ({CLUSTER_FORM})")
    ssl = CLUSTER_SCHEMES[scheme.lower()]
    rest, _, query = rest.split("#", 1)[0].partition("?")
    netloc, _, path = rest.partition("/")
    username, password, hosts = _credentials(netloc)
    items = [h.strip() for h in hosts.split(",") if h.strip()]
    if not items:
        raise _problem(url, f"no seed nodes ({CLUSTER_FORM})")
    if len(items) > MAX_SEEDS:
        raise _problem(url, f"{len(items)} seed nodes; at most {MAX_SEEDS} (a few are enough)")
    seeds = tuple(dict.fromkeys(_host_port(h, url, DEFAULT_PORT, "seed host") for h in items))
    query_db, tls = _query(url, query, ssl)
    if path.strip("/") or query_db:
        raise _problem(url, "a Redis Cluster has only db 0: end the URL with '/' "
                            f"({CLUSTER_FORM})")
    return ClusterTarget(seeds, username, password, ssl, tls)
