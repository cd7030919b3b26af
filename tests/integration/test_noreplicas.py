"""NOREPLICAS is an outage to wait out (store/outage.py): a primary with
`min-replicas-to-write 1` whose replica is gone refuses every write. A worker's store
waits and completes once the replica is back (one line when it starts, one when it
ends, no traceback), a refused commit applied nothing, the API answers 503. Real
redis-servers: a primary and its replica (`--replicaof`), the replica killed and
started again on its port."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import RedisServer, quick_settings, start_redis, wait_for, wait_for_sync
from helpers.api import asgi_client, chain_spec, error_of, make_app
from integration.test_store import commit_request, deliver, new_session, started
from redis import Redis as SyncRedis

from strands_durable.models import SessionStatus
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.connect import open_store
from strands_durable.store.keys import CONSUMER_GROUP
from strands_durable.store.outage import (
    REDIS_DOWN_IN_LOOP,
    NoReplicasError,
    RedisOutage,
    RedisOutageExceeded,
    outage_client_kwargs,
)
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

SPEC = """
version: 0
name: norep
runtime: {provider: scripted}
agents:
  a: {prompt: "You are a."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "one"}
      - {agent: a, input: "two"}
      - {agent: a, input: "three"}
"""


@dataclass
class Pair:
    """A primary that needs one good replica to write, and that replica."""

    primary: RedisServer
    replica: RedisServer

    def good_replicas(self) -> int:
        with SyncRedis(port=self.primary.port) as direct:
            return int(direct.info("replication").get("min_slaves_good_slaves", 0))

    def lose_replica(self) -> None:
        self.replica.stop()
        wait_for_sync(lambda: self.good_replicas() == 0, what="the primary to refuse writes")

    def restore_replica(self) -> None:
        self.replica = start_redis(["--replicaof", "127.0.0.1", str(self.primary.port)],
                                   port=self.replica.port)
        wait_for_sync(lambda: self.good_replicas() == 1, what="the replica in sync")


@pytest.fixture
def pair() -> Iterator[Pair]:
    primary = start_redis(["--min-replicas-to-write", "1", "--min-replicas-max-lag", "1"])
    try:
        replica = start_redis(["--replicaof", "127.0.0.1", str(primary.port)])
        both = Pair(primary, replica)
        try:
            wait_for_sync(lambda: both.good_replicas() == 1, what="the replica in sync")
            yield both
        finally:
            both.replica.stop()
    finally:
        primary.stop()


@pytest.fixture
def pair_settings(pair: Pair, prefix: str, tmp_path: Path) -> DurableSettings:
    return quick_settings(pair.primary.url, prefix, tmp_path)


class CountingOutage(RedisOutage):
    """A RedisOutage that keeps what it announced and counts the failed retries."""

    def __init__(self, limit_s: float) -> None:
        self.said: list[tuple[int, str]] = []
        self.failures = 0
        super().__init__(limit_s, "the primary",
                         announce=lambda level, text: self.said.append((level, text)))

    def failed(self, error: BaseException) -> None:
        self.failures += 1
        super().failed(error)


async def test_writes_and_scripts_are_refused_as_no_replicas_reads_answer(
        pair: Pair, pair_settings: DurableSettings) -> None:
    store = open_store(pair_settings)  # a plain client (API, CLI): no retry
    try:
        await store.prepare()
        sid, _ = await store.create_session(new_session())
        pair.lose_replica()
        with pytest.raises(NoReplicasError) as plain:
            await store.redis.set("k", "v")
        assert str(plain.value).startswith("NOREPLICAS ")
        assert isinstance(plain.value, REDIS_DOWN_IN_LOOP)
        with pytest.raises(NoReplicasError):  # create.lua: refused at its first write
            await store.create_session(new_session())
        assert (await store.get_session(sid)).status == SessionStatus.RUNNING
        assert len(await store.list_sessions(limit=10)) == 1
    finally:
        await store.close()


async def test_a_refused_commit_applied_nothing(pair: Pair,
                                                pair_settings: DurableSettings) -> None:
    store = open_store(pair_settings)
    try:
        await store.prepare()
        sid, _ = await store.create_session(new_session())
        entry_id, job = await deliver(store)
        assert (await started(store, job, entry_id)).verdict == "run"
        events_before = await store.events(sid)
        pair.lose_replica()
        with pytest.raises(NoReplicasError):
            await store.commit(commit_request(job, entry_id, "c1"))
        record = await store.get_session(sid)
        assert record.version == 1 and record.state == {"current_step": 0}
        assert await store.results(sid) == [] and await store.checkpoints(sid) == []
        assert await store.events(sid) == events_before
        assert await store.conversation(sid, "a", 10) == []
        pending = await store.redis.xpending(store.keys.stream(0), CONSUMER_GROUP)
        assert pending["pending"] == 1  # still the worker's, re-claimable
        pair.restore_replica()
        outcome = await store.commit(commit_request(job, entry_id, "c1"))
        assert outcome.verdict == "ok" and outcome.version == 2
        assert [r.key for r in await store.results(sid)] == ["step:0"]
    finally:
        await store.close()


async def test_a_worker_store_waits_out_no_replicas(pair: Pair,
                                                    pair_settings: DurableSettings) -> None:
    outage = CountingOutage(600)
    store = open_store(pair_settings, **outage_client_kwargs(outage))
    try:
        await store.prepare()
        pair.lose_replica()
        creating = asyncio.create_task(store.create_session(new_session()))
        await wait_for(lambda: _true(outage.failures >= 3), what="the create to be retried")
        assert not creating.done() and not outage.up
        pair.restore_replica()
        sid, created = await asyncio.wait_for(creating, timeout=30)
        assert created and (await store.get_session(sid)).status == SessionStatus.RUNNING
        assert outage.up and outage.outages == 1
        assert [level for level, _ in outage.said] == [logging.WARNING, logging.INFO]
        assert "NOREPLICAS" in outage.said[0][1]
    finally:
        await store.close()


async def test_past_the_outage_limit_a_worker_gives_up(pair: Pair,
                                                       pair_settings: DurableSettings) -> None:
    outage = RedisOutage(0.3, "the primary", announce=lambda level, text: None)
    store = open_store(pair_settings, **outage_client_kwargs(outage))
    try:
        await store.prepare()
        pair.lose_replica()
        with pytest.raises(RedisOutageExceeded, match=r"past DURABLE_REDIS_OUTAGE_S=0\.3"):
            await store.create_session(new_session())
        assert outage.waiting == 0
    finally:
        await store.close()


async def test_a_worker_logs_one_line_and_finishes_its_sessions(
        pair: Pair, pair_settings: DurableSettings, caplog: pytest.LogCaptureFixture
        ) -> None:
    caplog.set_level(logging.INFO)
    outage = CountingOutage(600)
    plain = open_store(pair_settings)
    worker = StepConsumer(pair_settings, open_store(pair_settings,
                                                    **outage_client_kwargs(outage)))
    await worker.start()
    try:
        sid, _ = await start_session(plain, load_spec_text(SPEC, "norep.yaml"))
        pair.lose_replica()
        # Every loop of the worker (reads, heartbeat, timers, commits) meets it, many times.
        await wait_for(lambda: _true(outage.failures >= 20), what="the worker to retry")
        assert not outage.up
        pair.restore_replica()
        await wait_for(lambda: _status_is(plain, sid, SessionStatus.COMPLETED),
                       what="the session to complete")
        await wait_for(lambda: _true(outage.up), what="the worker to see Redis back")
        assert [level for level, _ in outage.said] == [logging.WARNING, logging.INFO]
        loud = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
        assert loud == [], [r.getMessage() for r in loud]
        done = [f["step"] for _, f in await plain.events(sid) if f["type"] == "step_completed"]
        assert sorted(done) == ["step:0", "step:1", "step:2"]  # each once
    finally:
        await worker.stop(grace_s=0)
        await worker.store.close()
        await plain.close()


async def test_the_api_answers_503_while_writes_are_refused(
        pair: Pair, pair_settings: DurableSettings) -> None:
    async with asgi_client(make_app(pair_settings)) as client:
        first = await client.post("/v1/sessions", json={"spec": chain_spec(1)})
        assert first.status_code == 201
        pair.lose_replica()
        r = await client.post("/v1/sessions", json={"spec": chain_spec(1)})
        err = error_of(r, 503)
        assert err["code"] == "redis_unavailable" and r.headers["retry-after"] == "1"
        assert "Redis refuses writes" in err["message"] and "NOREPLICAS" in err["message"]
        sid = first.json()["session_id"]
        assert (await client.get(f"/v1/sessions/{sid}")).status_code == 200  # reads work
        pair.restore_replica()
        again = await client.post("/v1/sessions", json={"spec": chain_spec(1)})
        assert again.status_code == 201


async def _true(value: bool) -> bool:
    return value


async def _status_is(store: Store, sid: str, status: SessionStatus) -> bool:
    return (await store.get_session(sid)).status == status
