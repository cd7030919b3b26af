"""GET /v1/sessions/{id}/events?follow=1 over real HTTP (uvicorn on a free port):
server-sent events arrive while a real worker commits, and the stream ends by itself
when the session does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from helpers import StepBreakpoints, start_redis
from helpers.api import (
    HITL,
    Frame,
    asgi_client,
    chain_spec,
    frames,
    make_app,
    served_client,
    submit,
    uvicorn_server,
    wait_status,
)

from strands_durable.settings import DurableSettings
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration


@pytest.fixture
async def http(settings: DurableSettings) -> AsyncIterator[httpx.AsyncClient]:
    async with served_client(make_app(settings)) as client:
        yield client


async def test_follow_streams_events_while_the_worker_commits(
        http: httpx.AsyncClient, store: Store, consumer: StepConsumer,
        breakpoints: StepBreakpoints) -> None:
    breakpoints.set("plain", "step:1")  # until the first commit has been seen live
    sid = await submit(http, chain_spec(3))
    seen: list[Frame] = []
    status_at_first_commit = None
    async with http.stream("GET", f"/v1/sessions/{sid}/events", params={"follow": "1"}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        async for frame in frames(r):
            if frame.comments:
                continue
            seen.append(frame)
            if frame.event == "step_completed" and status_at_first_commit is None:
                # Live: the first commit arrives while two steps are still to run.
                record = await store.get_session(sid)
                status_at_first_commit = (record.status.value, record.steps_committed)
                breakpoints.clear("plain", "step:1")
        # The loop ended because the server closed the stream, not because we left.
    assert status_at_first_commit is not None
    assert status_at_first_commit == ("running", 1)
    assert seen[-1].event == "end"
    assert seen[-1].data == {"session_id": sid, "status": "completed"}
    events = seen[:-1]
    history = [(eid, f["type"]) for eid, f in await store.events(sid)]
    assert [(f.id, f.event) for f in events] == history
    assert [f.data["type"] for f in events] == [t for _, t in history]
    assert sum(1 for f in events if f.event == "step_completed") == 3


async def test_last_event_id_resumes_after_it(http: httpx.AsyncClient, store: Store,
                                              consumer: StepConsumer) -> None:
    sid = await submit(http, chain_spec(2))
    await wait_status(http, sid, "completed")
    history = await store.events(sid)
    after = history[2][0]
    async with http.stream("GET", f"/v1/sessions/{sid}/events?follow=1",
                           headers={"Last-Event-ID": after}) as r:
        got = [f async for f in frames(r) if not f.comments]
    assert [f.id for f in got[:-1]] == [eid for eid, _ in history[3:]]
    assert got[-1].event == "end"


async def test_a_waiting_session_keeps_the_stream_open_until_cancelled(
        http: httpx.AsyncClient, consumer: StepConsumer) -> None:
    sid = await submit(http, HITL)
    await wait_status(http, sid, "paused")
    types = []
    cancelled = False
    async with http.stream("GET", f"/v1/sessions/{sid}/events?follow=1") as r:
        async for frame in frames(r):
            if frame.comments and "keep-alive" in frame.comments:
                # Paused is not ended: nothing new, the stream stays open. Cancel it
                # (once: another keep-alive may already be on its way).
                if not cancelled:
                    cancel = await http.post(f"/v1/sessions/{sid}/cancel")
                    assert cancel.status_code == 200
                    cancelled = True
                continue
            if not frame.comments:
                types.append(frame.event)
            if frame.event == "end":
                assert frame.data["status"] == "cancelled"
    assert types[-2:] == ["session_cancelled", "end"]
    assert "session_paused" in types


async def test_a_session_deleted_while_followed_ends_the_stream(
        http: httpx.AsyncClient) -> None:
    sid = await submit(http, chain_spec(1))  # no worker: it stays running
    ended = None
    async with http.stream("GET", f"/v1/sessions/{sid}/events?follow=1") as r:
        async for frame in frames(r):
            if frame.event == "step_scheduled":
                assert (await http.delete(f"/v1/sessions/{sid}")).status_code == 204
            if frame.event == "end":
                ended = frame.data
    assert ended == {"session_id": sid, "status": "deleted"}


async def test_redis_dying_mid_stream_says_so_and_closes(prefix: str) -> None:
    server = start_redis()
    try:
        app = make_app(DurableSettings(redis_url=server.url, key_prefix=prefix))
        async with uvicorn_server(app) as url, httpx.AsyncClient(base_url=url,
                                                                 timeout=30) as http:
            sid = await submit(http, chain_spec(1))
            got: list[Frame] = []
            async with http.stream("GET", f"/v1/sessions/{sid}/events?follow=1") as r:
                async for frame in frames(r):
                    if frame.comments:
                        continue
                    got.append(frame)
                    if frame.event == "step_scheduled":
                        server.stop()  # while the follower blocks on XREAD
            assert got[-1].event == "error"
            assert got[-1].data["error"]["code"] == "redis_unavailable"
    finally:
        server.stop()


async def test_following_an_ended_session_does_not_wait(settings: DurableSettings,
                                                         consumer: StepConsumer) -> None:
    app = make_app(settings)
    app.state.follow_block_ms = 60_000  # a wait would show: the test allows 10 s
    async with asgi_client(app) as client:
        sid = await submit(client, chain_spec(1))
        await wait_status(client, sid, "completed")
        history = (await client.get(f"/v1/sessions/{sid}/events")).json()["items"]
        r = await asyncio.wait_for(
            client.get(f"/v1/sessions/{sid}/events?follow=1",
                       headers={"Last-Event-ID": history[-1]["id"]}), timeout=10)
    # Nothing after the last event: the stream says it ended, without waiting for more.
    assert r.text.split("\n\n") == [
        "retry: 2000", f'event: end\ndata: {{"session_id":"{sid}","status":"completed"}}', ""]
