"""The client without an API server (`connect_redis`): the same methods, run on a
private redis-server through the functions the API's routes call, with a real worker
(the `consumer` fixture) in this process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from helpers import RedisServer, free_port, wait_for
from helpers.api import HITL, chain_spec
from helpers.client import FAILING, NOPE

from strands_durable.client import AsyncClient, Client
from strands_durable.client.errors import ApiInvalidInput, ConnectionFailed
from strands_durable.errors import Conflict, InvalidInput, NotFound, Unavailable
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration


@pytest.fixture
async def client(redis_server: RedisServer, prefix: str, consumer: StepConsumer
                 ) -> AsyncIterator[AsyncClient]:
    async with AsyncClient.connect_redis(redis_server.url, key_prefix=prefix) as c:
        yield c


async def test_submit_wait_events_stream_artifacts_fork(client: AsyncClient) -> None:
    started = await client.submit(chain_spec(2, name="report"), variables={"topic": "kelp"},
                                  idempotency_key="k-1")
    assert started.created
    assert not (await client.submit(chain_spec(2, name="report"), variables={"topic": "kelp"},
                                    idempotency_key="k-1")).created
    sid = started.session_id
    done = await client.wait(sid, timeout=60, poll=0.05)
    assert done.status == "completed" and done.steps_committed == 2

    followed = [e async for e in client.events(sid)]
    assert [e.type for e in followed].count("step_completed") == 2
    assert [e.id async for e in client.events(sid, follow=False)] == [e.id for e in followed]
    live = [entry async for entry in client.stream(sid)]
    assert [e.step for e in live if e.kind == "attempt"] == ["step:0", "step:1"]

    (art,) = await client.artifacts(sid)
    assert (await client.artifact(sid, art.name)).startswith(b"# Report\n")
    with pytest.raises(NotFound) as missing:
        await client.artifact(sid, "nope.md")
    assert missing.value.code == "artifact_not_found"
    assert [c.n for c in await client.checkpoints(sid)] == [1, 2]
    assert (await client.checkpoint(sid, 2)).n == 2

    forked = await client.fork(sid, 1, variables={"topic": "tides"})
    assert (await client.wait(forked.session_id, timeout=60, poll=0.05)).status == "completed"
    listed = [s.session_id async for s in client.list(workflow="report", page_size=1)]
    assert sorted(listed) == sorted([sid, forked.session_id])
    await client.delete(forked.session_id)
    with pytest.raises(NotFound):
        await client.get(forked.session_id)


async def test_control_and_human_answers(client: AsyncClient) -> None:
    asking = (await client.submit(HITL)).session_id
    waiting = await client.wait(asking, timeout=60, poll=0.05)
    assert waiting.status == "paused" and waiting.waiting
    await client.signal(asking, "approved")
    assert (await client.wait(asking, timeout=60, poll=0.05)).status == "completed"

    failing = (await client.submit(FAILING)).session_id
    assert (await client.wait(failing, timeout=60, poll=0.05)).status == "failed"
    dry = await client.requeue(failing, dry_run=True)
    assert [r.step for r in dry.requeued] == ["step:0"]
    assert (await client.requeue(failing)).statuses[failing] == "running"
    assert (await client.wait(failing, timeout=60, poll=0.05)).status == "failed"
    with pytest.raises(Conflict) as refused:
        await client.pause(failing)
    assert refused.value.code == "invalid_transition"
    assert (await client.resume(failing, budgets={"max_tokens": 9_000})).status == "running"
    assert (await client.wait(failing, timeout=60, poll=0.05)).status == "failed"

    held = (await client.submit(HITL)).session_id
    assert (await client.wait(held, timeout=60, poll=0.05)).status == "paused"
    assert (await client.cancel(held)).status == "cancelled"


async def test_errors_and_the_fleet(client: AsyncClient, consumer: StepConsumer) -> None:
    with pytest.raises(NotFound) as missing:
        await client.get(NOPE)
    assert missing.value.code == "session_not_found"
    with pytest.raises(InvalidInput):
        await client.submit("version: 0\nname: x\n")
    with pytest.raises(ApiInvalidInput) as bad:
        await client.requeue(NOPE, step="")
    assert bad.value.code == "invalid_request"
    for wrong in ({"status": "bogus"}, {"page_size": 0}):
        with pytest.raises(InvalidInput, match=r"status|limit"):
            [s async for s in client.list(**wrong)]

    async def seen() -> bool:
        return any(w.alive for w in await client.workers())

    await wait_for(seen, timeout_s=30, what="the consumer's first heartbeat")
    assert (await client.health()).status == "ok"
    assert (await client.queue()).shards


async def test_the_sync_client_on_redis(redis_server: RedisServer, prefix: str,
                                        consumer: StepConsumer) -> None:
    def use() -> None:
        with Client.connect_redis(redis_server.url, key_prefix=prefix) as client:
            sid = client.submit(chain_spec(1)).session_id
            assert client.wait(sid, timeout=60, poll=0.05).status == "completed"
            assert [s.session_id for s in client.list()] == [sid]
            assert "session_completed" in [e.type for e in client.events(sid)]

    # The consumer runs on this test's loop: the blocking client waits on a thread.
    await asyncio.to_thread(use)


async def test_an_unreachable_redis_is_unavailable_not_a_traceback(prefix: str) -> None:
    async with AsyncClient.connect_redis(f"redis://127.0.0.1:{free_port()}/0",
                                         key_prefix=prefix) as client:
        with pytest.raises(ConnectionFailed) as down:
            await client.get(NOPE)
        assert isinstance(down.value, Unavailable) and down.value.code == "redis_unavailable"
        with pytest.raises(ConnectionFailed):
            [e async for e in client.events(NOPE)]
        assert (await client.health()).status == "unavailable"
