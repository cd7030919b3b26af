"""DURABLE_REDIS_URL=redis+sentinel://...: the store and arq reach the master through a real
Redis Sentinel (redis-server --sentinel), and the same client follows a failover."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from arq.connections import create_pool
from helpers import (
    EXAMPLES,
    RedisServer,
    free_port,
    poll_until,
    random_prefix,
    start_redis,
    wait_for,
)
from helpers.fleet import Fleet
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ReadOnlyError, ResponseError, TimeoutError

from strands_durable.models import SessionStatus
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_file
from strands_durable.store.connect import open_store
from strands_durable.store.redis_url import arq_redis_settings, sync_redis_client
from strands_durable.store.store import Store
from tests.integration.test_store import new_session

pytestmark = pytest.mark.integration
MASTER = "durablemaster"


@dataclass
class SentinelSetup:
    master: RedisServer
    replica: RedisServer
    sentinel_port: int

    @property
    def url(self) -> str:
        return f"redis+sentinel://127.0.0.1:{self.sentinel_port}/{MASTER}/0"


def start_sentinel(master_port: int, workdir: Path) -> tuple[int, subprocess.Popen[bytes]]:
    port = free_port()
    conf = workdir / "sentinel.conf"  # Sentinel rewrites its config: it must be writable
    conf.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {workdir}\n"
        f"sentinel monitor {MASTER} 127.0.0.1 {master_port} 1\n"
        f"sentinel down-after-milliseconds {MASTER} 1000\n"
        f"sentinel failover-timeout {MASTER} 10000\n")
    binary = shutil.which("redis-server")
    assert binary, "redis-server is not installed"
    process = subprocess.Popen([binary, str(conf), "--sentinel"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    return port, process


@pytest.fixture
def sentinel_setup(tmp_path: Path) -> Iterator[SentinelSetup]:
    # Each in its own directory: a replica (and a demoted master) writes the RDB it
    # receives to disk, which must not land in the working directory.
    dirs = [tmp_path / name for name in ("master", "replica", "sentinel")]
    for d in dirs:
        d.mkdir()
    master = start_redis(workdir=dirs[0])
    replica = start_redis(["--replicaof", "127.0.0.1", str(master.port)], workdir=dirs[1])
    port, process = start_sentinel(master.port, dirs[2])
    try:
        yield SentinelSetup(master, replica, port)
    finally:
        process.kill()
        process.wait(timeout=10)
        replica.stop()
        master.stop()


@pytest.fixture
async def sentinel(sentinel_setup: SentinelSetup) -> AsyncIterator[Redis]:
    client = Redis(port=sentinel_setup.sentinel_port, decode_responses=True)

    async def replica_known() -> bool:
        try:
            replicas = await client.sentinel_slaves(MASTER)
        except (RedisConnectionError, ResponseError):
            return False
        # a replica Sentinel sees as up and linked to the master can be promoted
        return any(int(r["port"]) == sentinel_setup.replica.port and not r["is_sdown"]
                   and r.get("master-link-status") == "ok" for r in replicas)

    assert await poll_until(replica_known, timeout_s=20), "sentinel never saw the replica"
    yield client
    await client.aclose()


@pytest.fixture
async def sentinel_store(sentinel_setup: SentinelSetup, sentinel: Redis
                         ) -> AsyncIterator[Store]:
    settings = DurableSettings(redis_url=sentinel_setup.url, key_prefix=random_prefix())
    store = open_store(settings)
    yield store
    await store.redis.aclose()


def role_and_keys(server: RedisServer, pattern: str) -> tuple[str, int]:
    import redis

    with redis.Redis(port=server.port, decode_responses=True) as direct:
        return str(direct.info("replication")["role"]), len(direct.keys(pattern))


async def test_store_reaches_the_master_through_sentinel(
        sentinel_setup: SentinelSetup, sentinel_store: Store) -> None:
    sid, created = await sentinel_store.create_session(new_session())
    assert created
    assert (await sentinel_store.get_session(sid)).workflow_name == "wf"
    role, keys = role_and_keys(sentinel_setup.master, f"{sentinel_store.keys.prefix}:*")
    assert role == "master" and keys > 0


async def test_arq_connects_through_the_same_url(sentinel_setup: SentinelSetup,
                                                 sentinel: Redis) -> None:
    pool = await create_pool(arq_redis_settings(sentinel_setup.url))
    try:
        job = await pool.enqueue_job("ping", _queue_name=f"{random_prefix()}:arq")
        assert job is not None
    finally:
        await pool.aclose()
    role, keys = role_and_keys(sentinel_setup.master, "arq:job:*")
    assert role == "master" and keys == 1


def test_the_blocking_client_reaches_the_master(sentinel_setup: SentinelSetup,
                                                sentinel: Redis) -> None:
    client = sync_redis_client(sentinel_setup.url, decode_responses=True, socket_timeout=5)
    try:
        client.set("sync-probe", "1")
        assert client.info("replication")["role"] == "master"
    finally:
        client.close()
    with_key = role_and_keys(sentinel_setup.master, "sync-probe")
    assert with_key == ("master", 1)


async def test_the_client_follows_a_failover(sentinel_setup: SentinelSetup, sentinel: Redis,
                                             sentinel_store: Store) -> None:
    first, _ = await sentinel_store.create_session(new_session())
    await sentinel.execute_command("SENTINEL", "FAILOVER", MASTER)

    async def promoted() -> bool:
        addr = await sentinel.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER)
        return bool(addr) and int(addr[1]) == sentinel_setup.replica.port

    assert await poll_until(promoted, timeout_s=30), "sentinel did not promote the replica"

    async def write_lands() -> str | None:
        # The first command after the switch may meet the demoted master or a closed
        # connection; the client then asks the Sentinel again, as a worker's retry would.
        try:
            sid, _ = await sentinel_store.create_session(new_session())
        except (RedisConnectionError, ReadOnlyError, TimeoutError):
            return None
        return sid

    second = await poll_until(write_lands, timeout_s=30)
    assert second is not None, "no write reached the new master"
    role, _ = role_and_keys(sentinel_setup.replica, "*")
    assert role == "master"
    assert (await sentinel_store.get_session(first)).session_id == first  # replicated
    assert (await sentinel_store.get_session(second)).session_id == second


async def test_a_real_arq_worker_runs_steps_through_sentinel(
        sentinel_setup: SentinelSetup, sentinel_store: Store, tmp_path: Path) -> None:
    await sentinel_store.prepare()
    fleet = Fleet.create(sentinel_setup.url, sentinel_store.keys.prefix, tmp_path,
                         read_block_ms=100, heartbeat_s=0.5)
    fleet.start_worker()
    try:
        sid, _ = await start_session(sentinel_store,
                                     load_spec_file(EXAMPLES / "chain-research.yaml"))

        async def completed() -> bool:
            return (await sentinel_store.get_session(sid)).status == SessionStatus.COMPLETED

        await wait_for(completed, timeout_s=60, what="the session to complete via Sentinel")
    finally:
        fleet.stop_all()
    assert (await sentinel_store.get_session(sid)).steps_committed == 3
