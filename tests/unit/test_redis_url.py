"""DURABLE_REDIS_URL forms: `redis+sentinel://` parsed into Sentinels, master and db, with
errors that name the problem and never print the password."""

from __future__ import annotations

import re

import pytest

from strands_durable.errors import ConfigError
from strands_durable.redis_targets import (
    SentinelTarget,
    ServerTarget,
    TlsOptions,
    is_sentinel_url,
    parse_redis_url,
    parse_sentinel_url,
    parse_server_url,
    redact,
)
from strands_durable.store.redis_url import arq_redis_settings


def test_plain_urls_are_not_sentinel() -> None:
    assert not is_sentinel_url("redis://127.0.0.1:6379/0")
    assert not is_sentinel_url("rediss://h:6380/1")
    assert not is_sentinel_url("memory://")
    assert is_sentinel_url("redis+sentinel://s1/mymaster")
    assert is_sentinel_url("REDISS+SENTINEL://s1/mymaster")


@pytest.mark.parametrize(("url", "expected"), [
    ("redis+sentinel://s1:26379,s2:26380,s3/mymaster/2",
     SentinelTarget((("s1", 26379), ("s2", 26380), ("s3", 26379)), "mymaster", 2)),
    ("redis+sentinel://:p%40ss%3Aw@s1/mymaster",
     SentinelTarget((("s1", 26379),), "mymaster", 0, None, "p@ss:w")),
    ("rediss+sentinel://app:pw@[::1]:5000,s2/primary/0?ssl_cert_reqs=none",
     SentinelTarget((("::1", 5000), ("s2", 26379)), "primary", 0, "app", "pw", ssl=True,
                    tls=TlsOptions(cert_reqs="none"))),
    ("redis+sentinel://s1:26379/mymaster/",
     SentinelTarget((("s1", 26379),), "mymaster", 0)),
])
def test_parse(url: str, expected: SentinelTarget) -> None:
    assert parse_sentinel_url(url) == expected


@pytest.mark.parametrize(("url", "problem"), [
    ("redis+sentinel:///mymaster", "no sentinel hosts"),
    ("redis+sentinel://s1:26379", "expected /master[/db]"),
    ("redis+sentinel://s1:26379/a/b/c", "expected /master[/db]"),
    ("redis+sentinel://s1:26379/mymaster/zero", "db must be a number"),
    ("redis+sentinel://s1:port/mymaster", "bad sentinel port"),
    ("redis+sentinel://s1:70000/mymaster", "bad sentinel port"),
    ("redis+sentinel://:26379/mymaster", "empty sentinel host"),
    ("redis://s1:6379/0", "not a Sentinel URL"),
])
def test_bad_urls_name_the_problem(url: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(problem)) as info:
        parse_sentinel_url(url)
    assert "DURABLE_REDIS_URL" in str(info.value)


def test_errors_never_show_the_password() -> None:
    with pytest.raises(ConfigError) as info:
        parse_sentinel_url("redis+sentinel://user:hunter2@s1:nope/mymaster")
    assert "hunter2" not in str(info.value) and "***@" in str(info.value)


def test_arq_settings_follow_the_same_url() -> None:
    plain = arq_redis_settings("redis://h:6390/3")
    assert (plain.host, plain.port, plain.database, plain.sentinel) == ("h", 6390, 3, False)
    sentinel = arq_redis_settings("redis+sentinel://:pw@s1:1,s2:2/mymaster/4")
    assert sentinel.sentinel and sentinel.sentinel_master == "mymaster"
    assert sentinel.host == [("s1", 1), ("s2", 2)]
    assert (sentinel.database, sentinel.password) == (4, "pw")


# -- one parser for every form: TLS options, ACL users, db, and nothing silently dropped --

def test_plain_urls_carry_tls_options_acl_user_and_db(tmp_path) -> None:
    ca, cert, key = (tmp_path / n for n in ("ca.pem", "client.pem", "client.key"))
    for f in (ca, cert, key):
        f.write_text("x")
    target = parse_server_url(f"rediss://app%40x:p%3Aw@redis.internal:6380/3?ssl_ca_certs={ca}"
                              f"&ssl_certfile={cert}&ssl_keyfile={key}"
                              "&ssl_check_hostname=true")
    assert target == ServerTarget(
        host="redis.internal", port=6380, db=3, username="app@x", password="p:w", ssl=True,
        tls=TlsOptions(ca_certs=str(ca), certfile=str(cert), keyfile=str(key),
                       check_hostname=True))
    assert parse_server_url("rediss://h?ssl_cert_reqs=none&db=2") == ServerTarget(
        host="h", db=2, ssl=True, tls=TlsOptions(cert_reqs="none"))
    assert parse_server_url("unix://:pw@/run/redis.sock?db=4") == ServerTarget(
        unix_path="/run/redis.sock", db=4, password="pw")
    assert parse_server_url("redis://[::1]:7000") == ServerTarget(host="::1", port=7000)


def test_every_role_gets_the_same_options() -> None:
    """The store's client, arq's settings and the blocking metrics client all carry the
    URL's TLS options and ACL user (arq's own from_dsn dropped the query options)."""
    from redis.asyncio import Redis as AsyncRedis

    from strands_durable.redis_targets import Timeouts
    from strands_durable.store.redis_url import async_redis_client, sync_redis_client

    url = "rediss://worker:s3cret@h:6390/3?ssl_cert_reqs=none"
    timeouts = Timeouts(connect_s=1.5, socket_s=7)
    pools = [async_redis_client(url, timeouts, redis_class=AsyncRedis).connection_pool,
             sync_redis_client(url, timeouts).connection_pool]
    for pool in pools:
        kw = pool.connection_kwargs
        assert pool.connection_class.__name__ == "SSLConnection"
        assert (kw["username"], kw["password"], kw["db"]) == ("worker", "s3cret", 3)
        assert kw["ssl_cert_reqs"] == "none"
        assert (kw["socket_connect_timeout"], kw["socket_timeout"]) == (1.5, 7)
    arq = arq_redis_settings(url)
    assert (arq.ssl, arq.ssl_cert_reqs, arq.username, arq.password, arq.database) == (
        True, "none", "worker", "s3cret", 3)


@pytest.mark.parametrize(("url", "problem"), [
    ("redis://u:hunter2@h:port/0", "bad port"),
    ("redis://u:hunter2@[::1/0", "unclosed '['"),
    ("redis://u:hunter2@h:6379/x", "db must be a number"),
    ("redis://u:hunter2@h/0?socket_timeout=abc", "unknown option 'socket_timeout'"),
    ("redis://u:hunter2@h/0?password=hunter2", "unknown option 'password'"),
    ("redis://u:hunter2@h/0?ssl_cert_reqs=none", "need TLS: use rediss://"),
    ("rediss://u:hunter2@h/0?ssl_cert_reqs=maybe", "ssl_cert_reqs must be one of"),
    ("rediss://u:hunter2@h/0?ssl_ca_certs=/no/such/ca.pem", "no such file"),
    ("rediss://u:hunter2@h/0?ssl_check_hostname=perhaps", "must be true or false"),
    ("redis://u:hunter2@/0", "no host"),
    ("unix://u:hunter2@host/sock", "unix:// takes a path"),
    ("redis://u:hunter2@h/1?db=2", "db given twice"),
])
def test_bad_plain_urls_name_the_problem_never_the_password(url: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(problem)) as info:
        parse_redis_url(url)
    assert "hunter2" not in str(info.value)
    assert str(info.value).startswith("DURABLE_REDIS_URL ")


@pytest.mark.parametrize(("url", "shown"), [
    ("redis://u:hunter2@h:1/0", "redis://u:***@h:1/0"),
    ("redis://:hunter2@h/0", "redis://:***@h/0"),
    ("rediss://hunter2@h/0", "rediss://***@h/0"),
    ("redis://h/0?password=hunter2&db=1", "redis://h/0?password=***&db=1"),
    ("redis+sentinel://u:p%40hunter2@s1,s2/m", "redis+sentinel://u:***@s1,s2/m"),
    ("redis://h:1/0", "redis://h:1/0"),
])
def test_redact(url: str, shown: str) -> None:
    assert redact(url) == shown


def test_settings_errors_never_show_the_password() -> None:
    from pydantic import ValidationError

    from strands_durable.settings import DurableSettings, describe_settings_error

    for url in ("htp://u:hunter2@h/0", "redis://u:hunter2@h:x/0", "rediss://u:hunter2@h/0?x=1"):
        with pytest.raises(ValidationError) as info:
            DurableSettings(redis_url=url)
        message = describe_settings_error(info.value)
        assert message.startswith("DURABLE_REDIS_URL='") and "***" in message, message
        assert "hunter2" not in message
    with pytest.raises(ValidationError) as info:
        DurableSettings(redis_socket_timeout_s=1, read_block_ms=1000)
    assert "DURABLE_REDIS_SOCKET_TIMEOUT_S" in describe_settings_error(info.value)
    assert "hunter2" not in repr(DurableSettings(redis_url="redis://u:hunter2@h/0",
                                                 api_token="hunter2"))
