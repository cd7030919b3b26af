"""DURABLE_REDIS_URL `redis+cluster://` and `rediss+cluster://`: seeds parsed, hostile
URLs refused with a bounded error that names the problem and never the password."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from strands_durable.errors import ConfigError
from strands_durable.redis_targets import (
    MAX_SEEDS,
    ClusterTarget,
    TlsOptions,
    is_cluster_url,
    parse_cluster_url,
    parse_redis_url,
    redact,
)
from strands_durable.settings import DurableSettings, describe_settings_error
from strands_durable.store.cluster_client import DurableRedisCluster
from strands_durable.store.redis_url import async_redis_client, sync_redis_client


@pytest.mark.parametrize(("url", "expected"), [
    ("redis+cluster://n1:7000,n2:7001,n3/",
     ClusterTarget((("n1", 7000), ("n2", 7001), ("n3", 6379)))),
    ("redis+cluster://n1:7000", ClusterTarget((("n1", 7000),))),
    ("REDIS+CLUSTER://app:p%40ss@[::1]:7000,n2:7000/",
     ClusterTarget((("::1", 7000), ("n2", 7000)), "app", "p@ss")),
    ("rediss+cluster://:pw@n1:7000/?ssl_cert_reqs=none",
     ClusterTarget((("n1", 7000),), None, "pw", ssl=True, tls=TlsOptions(cert_reqs="none"))),
    ("redis+cluster://n1:7000,n1:7000/", ClusterTarget((("n1", 7000),))),  # deduplicated
])
def test_parse(url: str, expected: ClusterTarget) -> None:
    assert is_cluster_url(url)
    assert parse_redis_url(url) == expected


@pytest.mark.parametrize(("url", "problem"), [
    ("redis+cluster:///", "no seed nodes"),
    ("redis+cluster://:secret@/", "no seed nodes"),
    ("redis+cluster://,,,/", "no seed nodes"),
    ("redis+cluster://n1:port/", "bad seed port"),
    ("redis+cluster://n1:0/", "bad seed port"),
    ("redis+cluster://n1:70000/", "bad seed port"),
    ("redis+cluster://:7000/", "empty seed host"),
    ("redis+cluster://[::1:7000/", "unclosed '['"),
    ("redis+cluster://n1:7000/1", "only db 0"),
    ("redis+cluster://n1:7000/?db=2", "only db 0"),
    ("redis+cluster://n1:7000/?timeout=3", "unknown option 'timeout'"),
    ("redis+cluster://n1:7000/?password=x", "unknown option 'password'"),
    ("redis+cluster://n1:7000/?ssl_cert_reqs=none", "need TLS"),
    ("redis+cluster://" + ",".join(f"n{i}:7000" for i in range(MAX_SEEDS + 1)) + "/",
     f"at most {MAX_SEEDS}"),
    ("redis+cluster://n1:7000/?x=" + "a" * 20_000, "longer than"),
])
def test_hostile_urls_name_the_problem(url: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(problem)) as info:
        parse_redis_url(url)
    assert "DURABLE_REDIS_URL" in str(info.value)
    assert len(str(info.value)) < 600  # bounded, however long the URL


def test_errors_never_show_the_password() -> None:
    url = "redis+cluster://app:hunter2@n1:port/"
    with pytest.raises(ConfigError) as info:
        parse_cluster_url(url)
    assert "hunter2" not in str(info.value) and "app:***@" in str(info.value)
    assert redact("rediss+cluster://:hunter2@n1:7000,n2/") == "rediss+cluster://:***@n1:7000,n2/"


def test_settings_accept_cluster_urls_and_refuse_bad_ones() -> None:
    assert DurableSettings(redis_url="redis+cluster://n1:7000/").redis_url
    with pytest.raises(ValidationError, match="only db 0") as info:
        DurableSettings(redis_url="redis+cluster://:hunter2@n1:7000/3")
    assert "hunter2" not in describe_settings_error(info.value)


async def test_clients_are_cluster_clients_without_io() -> None:
    client = async_redis_client("redis+cluster://127.0.0.1:7000,127.0.0.1:7001/")
    assert isinstance(client, DurableRedisCluster)
    assert set(client.seeds) == {"127.0.0.1:7000", "127.0.0.1:7001"}
    sync = sync_redis_client("redis+cluster://127.0.0.1:7000/")
    assert type(sync).__name__ == "LazySyncCluster"
    sync.close()
    await client.aclose()
