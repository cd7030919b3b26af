"""DURABLE_REDIS_URL forms: `redis+sentinel://` parsed into Sentinels, master and db, with
errors that name the problem and never print the password."""

from __future__ import annotations

import re

import pytest

from sessions.errors import ConfigError
from sessions.redis_url import (
    SentinelTarget,
    arq_redis_settings,
    is_sentinel_url,
    parse_sentinel_url,
)


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
    ("rediss+sentinel://app:pw@[::1]:5000,s2/primary/0?ignored=1",
     SentinelTarget((("::1", 5000), ("s2", 26379)), "primary", 0, "app", "pw", ssl=True)),
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
