"""A cluster with a password: the URL's password reaches every node; a wrong one is a
refusal (a worker gives up at once, naming the URL's options), not an outage to wait
out, and no error shows the password."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from integration.test_store import new_session
from redis.exceptions import AuthenticationError
from redis_cluster import LocalCluster, start_cluster

from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.outage import RedisOutage, RedisOutageExceeded, outage_client_kwargs

pytestmark = pytest.mark.integration
PASSWORD = "s3cret-pw"


@pytest.fixture(scope="module")
def secured() -> Iterator[LocalCluster]:
    c = start_cluster(primaries=3, replicas=0, password=PASSWORD)
    yield c
    c.stop()


async def test_the_password_reaches_every_node(secured: LocalCluster, prefix: str) -> None:
    store = open_store(DurableSettings(redis_url=secured.url, key_prefix=prefix, shards=6))
    try:
        await store.prepare()
        sid, _ = await store.create_session(new_session())
        assert (await store.get_session(sid)).session_id == sid
    finally:
        await store.close()


async def test_a_wrong_password_is_refused_not_waited_out(secured: LocalCluster,
                                                          prefix: str) -> None:
    url = secured.url.replace(PASSWORD, "wrong-pw")
    plain = open_store(DurableSettings(redis_url=url, key_prefix=prefix))
    try:
        with pytest.raises(AuthenticationError):
            await plain.prepare()
    finally:
        await plain.close()
    outage = RedisOutage(600, "the cluster")
    worker = open_store(DurableSettings(redis_url=url, key_prefix=prefix),
                        **outage_client_kwargs(outage))
    try:
        with pytest.raises(RedisOutageExceeded, match="refused this worker") as info:
            await worker.prepare()
        assert "wrong-pw" not in str(info.value)
    finally:
        await worker.close()


def test_replicas_zero_cluster_has_no_replicas(secured: LocalCluster) -> None:
    assert len(secured.primaries()) == 3 and secured.replica_nodes() == []
