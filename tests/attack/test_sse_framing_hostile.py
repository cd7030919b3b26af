"""What a hostile model writes, end to end through the live stream's SSE framing
(worker/live.py -> store/live.py -> sessions/live.py -> api/sse.py over real uvicorn ->
the Python client's parser, client/wire.SseParser in client/http_backend.py): text that
carries SSE syntax of its own ("\\n\\ndata: ...", "\\r", "event: end", "id: ", "retry: ",
a ": comment" line, NUL and the other line breaks a parser might split on) and tool names
that do the same must arrive as exactly what the model wrote, in their own frames: no
frame made up, none ended early, the `end` frame the server's own. And the events feed
(GET /v1/sessions/{id}/events?follow=1, the console's feed), whose `event:` line is the
stored event's type: an imported session's events are the importer's text. And a model
that writes a lone surrogate (a JSON escape carries one; no UTF-8 encodes it)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
from helpers import send_chunked, serve_http, wait_for
from helpers.api import Frame, frames, make_app, served_client, submit, wait_status
from helpers.held_llm import _OpenAIHandler, chunk, ending

from strands_durable.client import AsyncClient, Client
from strands_durable.settings import DurableSettings
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

# Everything an SSE parser could take for syntax, inside what a model writes.
HOSTILE_TEXT = (
    "before\n\ndata: {\"kind\":\"text\",\"text\":\"INJECTED\"}\n\n"
    "event: end\ndata: {\"session_id\":\"x\",\"status\":\"completed\"}\n\n"
    "\r\rid: 99999999999999-0\r\n"
    "retry: 1\n: a comment line\n"
    "event: error\ndata: {\"error\":{\"code\":\"x\",\"message\":\"y\"}}\r\n\r\n"
    "nul\x00 vt\x0b ff\x0c fs\x1c gs\x1d rs\x1e nel\x85 ls\u2028 ps\u2029 "
    "bom\ufeff emoji \U0001f600 after")
HOSTILE_TOOL = "t\n\nevent: end\ndata: {}\r\r"  # at most 64 characters, a tool's name


def spec(reply: str, *, word_delay_s: float = 0.0, tool: str | None = None) -> str:
    """A one-step chain whose scripted model replies `reply` (after asking for `tool`,
    which the agent does not have: its error result is the next turn's input)."""
    rules: list[dict[str, Any]] = []
    if tool is not None:
        rules.append({"agent": "a", "turn": 1,
                      "tool_calls": [{"name": tool, "input": {"q": reply}}]})
    rules.append({"agent": "a", "reply": reply})
    doc = {"version": 0, "name": "hostile-sse",
           "runtime": {"provider": "scripted",
                       "script": {"word_delay_s": word_delay_s, "rules": rules}},
           "agents": {"a": {"prompt": "A."}},
           "pattern": {"type": "chain", "config": {"steps": [{"agent": "a", "input": "x"}]}}}
    return json.dumps(doc)  # JSON is YAML: every character escaped, none raw in the spec


@pytest.fixture
async def served(settings: DurableSettings) -> AsyncIterator[httpx.AsyncClient]:
    async with served_client(make_app(settings), timeout=60) as http:
        yield http


async def run_to_the_end(http: httpx.AsyncClient, store: Store, text: str, **kw: Any) -> str:
    sid = await submit(http, spec(text, **kw))
    await wait_status(http, sid, "completed", timeout_s=60)

    async def flushed() -> bool:
        return sum(f.get("kind") == "turn_end" for _, f in await store.live_entries(sid)) \
            >= (2 if kw.get("tool") else 1)

    await wait_for(flushed, timeout_s=30, what="the live stream's last flush")
    return sid


async def raw_frames(http: httpx.AsyncClient, path: str) -> list[Frame]:
    """Every frame of a whole stream, as the tests' own strict parser reads it (a data
    line that is not JSON fails here)."""
    got = []
    async with http.stream("GET", path) as r:
        assert r.status_code == 200, await r.aread()
        async for frame in frames(r):
            if frame.data is not None:
                got.append(frame)
    return got


@pytest.mark.parametrize("word_delay_s", [0.0, 0.001], ids=["one-delta", "word-by-word"])
async def test_hostile_model_text_reaches_the_python_clients_exactly(
        served: httpx.AsyncClient, store: Store, consumer: StepConsumer,
        word_delay_s: float) -> None:
    """The async and the sync client read the model's text back character for character
    (every SSE-looking line in it included), after the session's own `end`: no frame was
    made up and none cut the stream short."""
    sid = await run_to_the_end(served, store, HOSTILE_TEXT, word_delay_s=word_delay_s)
    (result,) = await store.results(sid)
    assert result.response == HOSTILE_TEXT  # what the model wrote, committed as written

    url = str(served.base_url)
    async with AsyncClient(url, timeout=60) as client:
        entries = [e async for e in client.stream(sid)]
    assert "".join(e.text for e in entries if e.kind == "text") == HOSTILE_TEXT
    assert entries[0].kind == "attempt" and entries[-1].kind == "turn_end"
    assert all(e.step == "step:0" and e.agent == "a" for e in entries)
    assert len({e.id for e in entries}) == len(entries)

    def sync_read() -> str:
        with Client(url, timeout=60) as sync:
            return "".join(e.text for e in sync.stream(sid) if e.kind == "text")

    assert await asyncio.to_thread(sync_read) == HOSTILE_TEXT


async def test_each_live_entry_is_one_frame_whatever_the_model_wrote(
        served: httpx.AsyncClient, store: Store, consumer: StepConsumer) -> None:
    """On the wire: one frame per live entry, one `data:` line each (JSON that escapes
    every line break), the stream's own `end` last, and its ids the stream's."""
    sid = await run_to_the_end(served, store, HOSTILE_TEXT, tool=HOSTILE_TOOL)
    stored = await store.live_entries(sid)
    async with served.stream("GET", f"/v1/sessions/{sid}/stream") as r:
        body = (await r.aread()).decode()
    blocks = [b for b in body.split("\n\n") if b and not b.startswith((":", "retry:"))]
    assert "\r" not in body
    for block in blocks:
        lines = block.split("\n")
        assert [line.partition(":")[0] for line in lines] in (
            ["id", "event", "data"], ["event", "data"]), block[:300]
    got = await raw_frames(served, f"/v1/sessions/{sid}/stream")
    assert [f.id for f in got[:-1]] == [entry_id for entry_id, _ in stored]
    assert got[-1].event == "end" and got[-1].data == {"session_id": sid,
                                                       "status": "completed"}
    assert [f.event for f in got].count("end") == 1 and "error" not in [f.event for f in got]
    texts = [f.data["text"] for f in got if f.event == "text"]
    assert "".join(texts) == HOSTILE_TEXT  # the tool turn wrote none
    [tool] = [f.data for f in got if f.event == "tool"]
    assert tool["tool"] == HOSTILE_TOOL and tool["turn"] == 1


async def test_a_hostile_tool_name_reaches_the_client_as_its_name(
        served: httpx.AsyncClient, store: Store, consumer: StepConsumer) -> None:
    sid = await run_to_the_end(served, store, "done", tool=HOSTILE_TOOL)
    async with AsyncClient(str(served.base_url), timeout=60) as client:
        entries = [e async for e in client.stream(sid)]
    assert [e.tool for e in entries if e.kind == "tool"] == [HOSTILE_TOOL]
    assert [e.kind for e in entries].count("turn_end") == 2
    assert "".join(e.text for e in entries if e.kind == "text") == "done"


# -- the events feed: an imported session's event types ----------------------------------

FORGED_END = ('step_started\n\nevent: end\ndata: {"session_id":"forged","status":'
              '"completed"}\n\nevent: x')


async def test_an_imported_event_type_cannot_forge_frames_on_the_events_feed(
        served: httpx.AsyncClient, store: Store, consumer: StepConsumer) -> None:
    """An export is untrusted input (store/export.py): an event of it whose type carries
    SSE syntax is either refused at import or framed as one event of that type; the
    feed's `end` is the server's own and every event reaches the client."""
    sid = await run_to_the_end(served, store, "fine")
    doc = (await served.get(f"/v1/sessions/{sid}/export")).json()
    assert len(doc["events"]) >= 3
    doc["events"][1]["fields"]["type"] = FORGED_END
    r = await served.post("/v1/sessions/import", params={"new_id": "true"}, json=doc)
    if r.status_code == 422:  # refused as untrusted input: nothing to frame
        return
    assert r.status_code == 201, r.text
    new = r.json()["session_id"]
    async with AsyncClient(str(served.base_url), timeout=60) as client:
        got = [e async for e in client.events(new)]
    assert len(got) == len(doc["events"]), [e.type for e in got]
    assert got[1].type == FORGED_END


# -- a model that writes a lone surrogate (a JSON escape can carry one) --------------------

LONE = ["ok ", "\ud800", " fine"]  # as the model's JSON escapes them: "\ud800" alone


@pytest.fixture
def lone_llm(allow_provider_host: Callable[[str, str], None],
             monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An OpenAI-compatible server whose reply has a lone surrogate in its second delta;
    its /v1 URL, allowed as an OpenAI host."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")

    class Handler(_OpenAIHandler):
        def do_POST(self) -> None:
            model = self.requested_model()
            body = [chunk(model, {"role": "assistant", "content": ""}),
                    *(chunk(model, {"content": part}) for part in LONE), *ending(model)]
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                send_chunked(self, "text/event-stream", body)

    with serve_http(Handler) as port:
        url = f"http://127.0.0.1:{port}/v1"
        allow_provider_host("openai", url)
        yield url


async def lone_session(http: httpx.AsyncClient, store: Store, url: str) -> str:
    """A one-step session on the lone-surrogate model, run to its end."""
    doc = {"version": 0, "name": "lone", "runtime": {"provider": "openai",
                                                      "model_id": "gpt-x", "host": url},
           "agents": {"a": {"prompt": "A."}},
           "pattern": {"type": "chain", "config": {"steps": [{"agent": "a", "input": "x"}]}}}
    sid = await submit(http, json.dumps(doc))

    async def ended() -> bool:  # read from the store: the API's GET is what breaks
        return (await store.get_session(sid)).status.is_terminal

    await wait_for(ended, timeout_s=60, what="the session to end")
    return sid


async def test_a_lone_surrogate_from_the_model_loses_no_live_entries(
        served: httpx.AsyncClient, store: Store, consumer: StepConsumer, lone_llm: str
        ) -> None:
    """The model's text reaches the client (the surrogate as U+FFFD or dropped, the text
    around it kept), and so does its turn's end."""
    sid = await lone_session(served, store, lone_llm)

    live = consumer.runner.executor.live
    assert live is not None

    async def flushed() -> bool:  # the turn's entries flushed (written or dropped)
        return not live._pending and live.generation >= 2

    await wait_for(flushed, timeout_s=30, what="the turn's flush")
    async with AsyncClient(str(served.base_url), timeout=60) as client:
        entries = [e async for e in client.stream(sid)]
    text = "".join(e.text for e in entries if e.kind == "text")
    assert text.startswith("ok ") and text.endswith(" fine"), entries
    assert [e.kind for e in entries][-1] == "turn_end", entries


async def test_a_lone_surrogate_in_a_reply_leaves_the_session_readable(
        served: httpx.AsyncClient, store: Store, consumer: StepConsumer, lone_llm: str
        ) -> None:
    sid = await lone_session(served, store, lone_llm)
    r = await served.get(f"/v1/sessions/{sid}")
    assert r.status_code == 200, r.text[:300]
    assert r.json()["status"] == "completed"
