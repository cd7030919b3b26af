"""GET /v1/sessions/{id}/stream over real HTTP (uvicorn on a free port): a step's model
output reaches the client while the step runs, before it commits. A local OpenAI-
compatible server streams part of its reply, then holds the rest until the test has seen
that part arrive (a condition, not a delay); the committed response is what the stream
showed; Last-Event-ID resumes with no gap and no repeat; a session's live stream goes
with the session; with DURABLE_LIVE_STREAM off nothing is written."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from helpers.api import (
    Frame,
    error_of,
    frames,
    frames_of,
    make_app,
    served_client,
    submit,
    wait_status,
)
from helpers.held_llm import FIRST, HeldLLM

from strands_durable.settings import DurableSettings
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

def spec(host: str) -> str:
    return f"""
version: 0
name: live
runtime: {{provider: openai, model_id: gpt-live, host: "{host}"}}
agents: {{a: {{prompt: "You answer."}}}}
pattern: {{type: chain, config: {{steps: [{{agent: a, input: "say hello"}}]}}}}
"""


@pytest.fixture
async def http(settings: DurableSettings) -> AsyncIterator[httpx.AsyncClient]:
    async with served_client(make_app(settings), timeout=60) as client:
        yield client


async def test_a_client_sees_the_reply_while_it_is_written(
        http: httpx.AsyncClient, store: Store, consumer: StepConsumer, held: HeldLLM) -> None:
    sid = await submit(http, spec(held.url("/v1")))
    seen: list[Frame] = []
    committed_when_partial = None
    async with http.stream("GET", f"/v1/sessions/{sid}/stream") as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        async for frame in frames(r):
            if frame.comments:
                continue
            seen.append(frame)
            text = "".join(f.data["text"] for f in seen if f.event == "text")
            if text == "".join(FIRST) and committed_when_partial is None:
                # Live: half the reply is here, the model holds the rest, nothing committed.
                committed_when_partial = (await store.get_session(sid)).steps_committed
                held.go.set()
    assert committed_when_partial == 0
    assert seen[-1].event == "end" and seen[-1].data == {"session_id": sid,
                                                         "status": "completed"}
    live = seen[:-1]
    assert live[0].event == "attempt"
    assert live[0].data["worker"] == consumer.name
    assert live[0].data | {"id": "", "worker": ""} == {
        "id": "", "kind": "attempt", "step": "step:0", "attempt": 1, "agent": "a", "turn": 0,
        "text": "", "tool": "", "stop": "", "replayed": 0, "worker": "", "at_ms": 0}
    assert live[-1].event == "turn_end" and live[-1].data["stop"] == "end_turn"
    streamed = "".join(f.data["text"] for f in live if f.event == "text")
    (result,) = await store.results(sid)
    assert streamed == result.response == "Hello world!"
    assert all(f.data["turn"] == 1 for f in live[1:])
    ids = [f.id for f in live]
    assert ids == [f.data["id"] for f in live] and ids == sorted(ids, key=_id_order)

    # Resumed after the second frame: the rest, once each, then the end.
    async with http.stream("GET", f"/v1/sessions/{sid}/stream",
                           headers={"Last-Event-ID": str(ids[1])}) as r:
        again = [f async for f in frames(r) if not f.comments]
    assert [f.id for f in again[:-1]] == ids[2:] and again[-1].event == "end"

    await store.delete_session(sid)
    assert await store.redis.exists(store.keys.live(sid)) == 0


def _id_order(entry_id: str | None) -> tuple[int, int]:
    ms, _, seq = (entry_id or "0-0").partition("-")
    return int(ms), int(seq or 0)


@pytest.fixture
def quiet_settings(settings: DurableSettings) -> DurableSettings:
    return settings.model_copy(update={"live_stream": False})


async def test_with_the_live_stream_off_nothing_is_written(
        quiet_settings: DurableSettings, store: Store) -> None:
    from helpers.api import asgi_client

    worker = StepConsumer(quiet_settings, store)
    await worker.start()
    try:
        async with asgi_client(make_app(quiet_settings)) as client:
            sid = await submit(client, """
version: 0
name: quiet
runtime: {provider: scripted}
agents: {a: {prompt: "A."}}
pattern: {type: chain, config: {steps: [{agent: a, input: "x"}]}}
""")
            await wait_status(client, sid, "completed")
            r = await client.get(f"/v1/sessions/{sid}/stream")
            assert r.status_code == 200
            assert [f.event for f in frames_of(r.text)] == ["end"]
    finally:
        await worker.stop(grace_s=0)
    assert await store.redis.exists(store.keys.live(sid)) == 0


async def test_an_unknown_session_is_404_before_any_stream(http: httpx.AsyncClient) -> None:
    r = await http.get("/v1/sessions/00000000-0000-4000-8000-000000000000/stream")
    assert error_of(r, 404)["code"] == "session_not_found"
    r = await http.get("/v1/sessions/00000000-0000-4000-8000-000000000000/stream",
                       headers={"Last-Event-ID": "not-an-id"})
    assert r.status_code == 422



async def test_clients_of_one_session_share_one_blocking_read(
        settings: DurableSettings, store: Store, consumer: StepConsumer, held: HeldLLM) -> None:
    app = make_app(settings)
    async with served_client(app, timeout=60) as http:
        sid = await submit(http, spec(held.url("/v1")))
        partial = [asyncio.Event() for _ in range(5)]

        async def client(n: int) -> list[str | None]:
            seen: list[Frame] = []
            async with http.stream("GET", f"/v1/sessions/{sid}/stream") as r:
                async for frame in frames(r):
                    if frame.comments:
                        continue
                    seen.append(frame)
                    if "".join(f.data["text"] for f in seen if f.event == "text") \
                            == "".join(FIRST):
                        partial[n].set()
            return [f.id for f in seen]

        clients = [asyncio.create_task(client(n)) for n in range(5)]
        await asyncio.wait_for(asyncio.gather(*(p.wait() for p in partial)), 60)
        # Five clients following, mid-reply: one watch of the session's stream.
        watches = app.state.live_followers._watches
        assert list(watches) == [sid] and watches[sid].followers == 5
        held.go.set()
        transcripts = await asyncio.gather(*clients)
    assert all(t == transcripts[0] for t in transcripts) and len(transcripts[0]) >= 4
    assert app.state.live_followers._watches == {}  # the watch ended with its followers
