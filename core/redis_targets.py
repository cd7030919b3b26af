"""DURABLE_REDIS_URL's forms, parsed and checked (no connection: store/redis_url.py builds
the clients from what this returns).

Forms (user and password URL-encoded; both optional):
- `redis://[user:password@]host[:port][/db]`, `rediss://...` for TLS;
- `unix://[user:password@]/path/to/redis.sock[?db=N]`;
- `redis+sentinel://[user:password@]h1[:p1],h2[:p2]/master[/db]` (`rediss+sentinel://` for
  TLS): every connection asks the Sentinels where the master is, so clients follow a
  failover. The user and password are the master's; Sentinels without auth are the
  common case.
- `redis+cluster://[user:password@]h1[:p1][,h2[:p2]...]/` (`rediss+cluster://` for TLS):
  a Redis Cluster; the hosts are seeds (any nodes of it: the client learns the rest and
  follows MOVED/ASK and failovers). db 0 only; the user and password are every node's.

Query options, the same for every form: `db`, and with TLS `ssl_ca_certs` (a private CA),
`ssl_certfile` and `ssl_keyfile` (a client certificate), `ssl_cert_reqs`
(`required`, `optional` or `none`) and `ssl_check_hostname`. Anything else is refused, so
a typo is an error instead of an option silently dropped. Every error names the URL with
its password replaced by `***`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote

from strands_durable.errors import RedisUrlError

SENTINEL_SCHEMES = {"redis+sentinel": False, "rediss+sentinel": True}
CLUSTER_SCHEMES = {"redis+cluster": False, "rediss+cluster": True}
CLUSTER_FORM = "redis+cluster://[user:password@]host[:port][,host[:port]...]/"
MAX_SEEDS = 64  # a cluster's seeds: a few nodes are enough, a thousand is a mistake
MAX_URL_CHARS = 8192  # errors quote the URL: a hostile one stays bounded
PLAIN_SCHEMES = {"redis": False, "rediss": True, "unix": False}
SENTINEL_DEFAULT_PORT = 26379
DEFAULT_PORT = 6379
FORM = "redis+sentinel://[user:password@]host[:port][,host[:port]...]/master[/db]"
CERT_REQS = ("required", "optional", "none")
FILE_OPTIONS = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")
TLS_OPTIONS = (*FILE_OPTIONS, "ssl_cert_reqs", "ssl_check_hostname")
QUERY_OPTIONS = ("db", *TLS_OPTIONS)
SECRET_QUERY_OPTIONS = ("password", "ssl_password")
BOOLEANS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


@dataclass(frozen=True)
class TlsOptions:
    """What `rediss://` connections check and present; the defaults are redis-py's."""

    ca_certs: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    cert_reqs: str = "required"
    check_hostname: bool = False

    def kwargs(self) -> dict[str, Any]:
        return {"ssl_ca_certs": self.ca_certs, "ssl_certfile": self.certfile,
                "ssl_keyfile": self.keyfile, "ssl_cert_reqs": self.cert_reqs,
                "ssl_check_hostname": self.check_hostname}


@dataclass(frozen=True)
class SentinelTarget:
    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    ssl: bool = False
    tls: TlsOptions = field(default_factory=TlsOptions)


@dataclass(frozen=True)
class ServerTarget:
    """One Redis: a TCP host and port, or a unix socket path."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    unix_path: str | None = None
    db: int = 0
    username: str | None = None
    password: str | None = None
    ssl: bool = False
    tls: TlsOptions = field(default_factory=TlsOptions)


@dataclass(frozen=True)
class ClusterTarget:
    """A Redis Cluster, reached through any of its seed nodes (db 0 only)."""

    seeds: tuple[tuple[str, int], ...]
    username: str | None = None
    password: str | None = None
    ssl: bool = False
    tls: TlsOptions = field(default_factory=TlsOptions)
    db: int = 0


RedisTarget = ServerTarget | SentinelTarget | ClusterTarget


@dataclass(frozen=True)
class Timeouts:
    """Seconds; connect covers TCP, the TLS handshake and AUTH."""

    connect_s: float = 5.0
    socket_s: float = 10.0


def is_sentinel_url(url: str) -> bool:
    return url.split("://", 1)[0].lower() in SENTINEL_SCHEMES


def is_cluster_url(url: str) -> bool:
    return url.split("://", 1)[0].lower() in CLUSTER_SCHEMES


def redact(url: str) -> str:
    """The URL with its password (and any secret query option) replaced by `***`."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "***" if ("@" in url or ":" in url) else url
    rest, qmark, query = rest.partition("?")
    netloc, slash, path = rest.partition("/")
    creds, at, hosts = netloc.rpartition("@")
    if at:
        user, colon, _secret = creds.partition(":")
        netloc = f"{user}:***@{hosts}" if colon else f"***@{hosts}"
    if qmark:
        parts = []
        for item in query.split("&"):
            name, eq, _value = item.partition("=")
            secret = eq and unquote(name).lower() in SECRET_QUERY_OPTIONS
            parts.append(f"{name}=***" if secret else item)
        query = "&".join(parts)
    return f"{scheme}://{netloc}{slash}{path}{qmark}{query}"


def _problem(url: str, text: str) -> RedisUrlError:
    shown = redact(url)
    if len(shown) > 200:
        shown = shown[:200] + f"... ({len(url)} characters)"
    return RedisUrlError(shown, text)


def _host_port(item: str, url: str, default: int, what: str = "host") -> tuple[str, int]:
    if item.startswith("["):  # [IPv6]:port
        host, closed, tail = item[1:].partition("]")
        if not closed:
            raise _problem(url, f"unclosed '[' in {what} {item!r}")
        port = tail.removeprefix(":") or str(default)
    elif item.count(":") == 1:
        host, _, port = item.partition(":")
    else:
        host, port = item, str(default)
    if not host:
        raise _problem(url, f"empty {what} in {item!r}")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise _problem(url, f"bad {what.replace('host', 'port')} in {item!r}")
    return host, int(port)


def _credentials(netloc: str) -> tuple[str | None, str | None, str]:
    creds, at, hosts = netloc.rpartition("@")
    if not at:
        return None, None, netloc
    user, colon, secret = creds.partition(":")
    return unquote(user) or None, (unquote(secret) if colon else None), hosts


def _db(text: str, url: str) -> int:
    if not text.isdigit():
        raise _problem(url, f"db must be a number, got {text!r}")
    return int(text)


def _query(url: str, query: str, ssl: bool) -> tuple[int | None, TlsOptions]:
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise _problem(url, "malformed query string") from None
    options: dict[str, str] = {}
    for name, value in pairs:
        if name in SECRET_QUERY_OPTIONS or name not in QUERY_OPTIONS:
            raise _problem(url, f"unknown option {name!r} (known: {', '.join(QUERY_OPTIONS)})")
        options[name] = value
    db = _db(options.pop("db"), url) if "db" in options else None
    if not options:
        return db, TlsOptions()
    if not ssl:
        raise _problem(url, f"{', '.join(options)} need TLS: use rediss:// "
                            "(or rediss+sentinel://, rediss+cluster://)")
    for name in FILE_OPTIONS:
        path = options.get(name)
        if path is not None and not os.path.isfile(path):
            raise _problem(url, f"{name}: no such file {path!r}")
    cert_reqs = options.get("ssl_cert_reqs", "required").lower()
    if cert_reqs not in CERT_REQS:
        raise _problem(url, f"ssl_cert_reqs must be one of {', '.join(CERT_REQS)}, "
                            f"got {cert_reqs!r}")
    check = options.get("ssl_check_hostname", "false").lower()
    if check not in BOOLEANS:
        raise _problem(url, f"ssl_check_hostname must be true or false, got {check!r}")
    if ("ssl_certfile" in options) != ("ssl_keyfile" in options):
        raise _problem(url, "ssl_certfile and ssl_keyfile go together")
    return db, TlsOptions(ca_certs=options.get("ssl_ca_certs"),
                          certfile=options.get("ssl_certfile"),
                          keyfile=options.get("ssl_keyfile"),
                          cert_reqs=cert_reqs, check_hostname=BOOLEANS[check])


def parse_sentinel_url(url: str) -> SentinelTarget:
    """The Sentinel target of `url`; ConfigError naming the problem (never the password)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in SENTINEL_SCHEMES:
        raise _problem(url, f"not a Sentinel URL ({FORM})")
    ssl = SENTINEL_SCHEMES[scheme.lower()]
    rest, _, query = rest.split("#", 1)[0].partition("?")
    netloc, _, path = rest.partition("/")
    username, password, hosts = _credentials(netloc)
    items = [h for h in hosts.split(",") if h.strip()]
    if not items:
        raise _problem(url, f"no sentinel hosts ({FORM})")
    sentinels = tuple(_host_port(h.strip(), url, SENTINEL_DEFAULT_PORT, "sentinel host")
                      for h in items)
    parts = [p for p in path.split("/") if p]
    if not parts or len(parts) > 2:
        raise _problem(url, f"expected /master[/db] ({FORM})")
    query_db, tls = _query(url, query, ssl)
    db = _db(parts[1], url) if len(parts) == 2 else (query_db or 0)
    return SentinelTarget(sentinels, unquote(parts[0]), db, username, password, ssl, tls)


def parse_server_url(url: str) -> ServerTarget:
    """`redis://`, `rediss://` or `unix://`; ConfigError naming the problem."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in PLAIN_SCHEMES:
        raise _problem(url, "expected redis://, rediss:// or unix://")
    scheme = scheme.lower()
    ssl = PLAIN_SCHEMES[scheme]
    rest, _, query = rest.split("#", 1)[0].partition("?")
    netloc, slash, path = rest.partition("/")
    username, password, hostport = _credentials(netloc)
    query_db, tls = _query(url, query, ssl)
    if scheme == "unix":
        if hostport:
            raise _problem(url, "unix:// takes a path: unix://[user:password@]/path/to.sock")
        if not path:
            raise _problem(url, "unix:// needs the socket's path")
        return ServerTarget(unix_path=unquote(slash + path), db=query_db or 0,
                            username=username, password=password)
    if not hostport:
        raise _problem(url, "no host")
    host, port = _host_port(hostport, url, DEFAULT_PORT)
    if path.strip("/") and query_db is not None:
        raise _problem(url, "db given twice (path and ?db=)")
    db = _db(path.strip("/"), url) if path.strip("/") else (query_db or 0)
    return ServerTarget(host=host, port=port, db=db, username=username, password=password,
                        ssl=ssl, tls=tls)


def parse_redis_url(url: str) -> RedisTarget:
    if len(url) > MAX_URL_CHARS:
        raise _problem(url, f"longer than {MAX_URL_CHARS} characters")
    if is_cluster_url(url):
        return parse_cluster_url(url)
    return parse_sentinel_url(url) if is_sentinel_url(url) else parse_server_url(url)


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
