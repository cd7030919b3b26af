"""`rediss+cluster://` with a private CA: a 3-primary cluster whose every port (clients,
cluster bus, replication) is TLS; the store, arq's connection and the sync metrics client
all work through the URL's ssl_ca_certs, and without the CA the server is not trusted."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from arq.connections import ArqRedis
from attack.test_redis_tls_acl import make_pki
from integration.test_store import new_session
from redis.exceptions import ConnectionError
from redis_cluster import LocalCluster, start_cluster

from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.fleet_reads import open_sync_client
from strands_durable.store.outage import RedisOutage, RedisOutageExceeded, outage_client_kwargs
from strands_durable.store.redis_url import async_redis_client

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    if not shutil.which("openssl"):
        pytest.skip("the openssl command is needed to make the test CA")
    pki = tmp_path_factory.mktemp("pki")
    make_pki(pki)
    c = start_cluster(primaries=3, replicas=0, pki=pki)
    yield c
    c.stop()


async def test_every_client_works_over_tls(tls_cluster: LocalCluster, prefix: str) -> None:
    assert tls_cluster.url.startswith("rediss+cluster://")
    settings = DurableSettings(redis_url=tls_cluster.url, key_prefix=prefix, shards=6)
    store = open_store(settings)
    try:
        await store.prepare()
        sid, _ = await store.create_session(new_session())
        assert (await store.get_session(sid)).session_id == sid
        assert len(await store.list_sessions(limit=10)) == 1
    finally:
        await store.close()
    arq = async_redis_client(tls_cluster.url, redis_class=ArqRedis)
    try:
        assert await arq.zcard("{tls:arq}") == 0
    finally:
        await arq.aclose()
    sync = open_sync_client(tls_cluster.url, settings.redis_timeouts)
    try:
        assert sync.hget(store.keys.config(), "shards") == "6"
    finally:
        sync.close()


async def test_an_untrusted_server_is_refused(tls_cluster: LocalCluster, prefix: str,
                                              ) -> None:
    url = tls_cluster.url.split("?", 1)[0]  # no private CA: the system's do not sign it
    store = open_store(DurableSettings(redis_url=url, key_prefix=prefix))
    try:
        with pytest.raises(ConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
            await store.prepare()
    finally:
        await store.close()
    # A worker does not wait out a certificate it will never trust: it gives up at once.
    outage = RedisOutage(600, "the cluster")
    worker = open_store(DurableSettings(redis_url=url, key_prefix=prefix),
                        **outage_client_kwargs(outage))
    try:
        with pytest.raises(RedisOutageExceeded, match="refused this worker"):
            await worker.prepare()
    finally:
        await worker.close()
