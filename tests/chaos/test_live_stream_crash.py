"""kill -9 of a worker mid-reply, seen by a client of GET /v1/sessions/{id}/stream (real
HTTP, uvicorn): a local OpenAI-compatible server streams half its reply and holds the
rest; the worker streaming it is killed; the client drops its connection and comes back
with Last-Event-ID; a second worker re-claims the step and runs it again. The client's
transcript is one coherent story: the first attempt partial, a second attempt (from the
other worker) whole, nothing twice, and the committed response is the second's text."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from helpers.api import Frame, frames, make_app, served_client, submit
from helpers.held_llm import FIRST, HeldLLM

from strands_durable.settings import DurableSettings
from strands_durable.store.store import Store

pytestmark = pytest.mark.chaos

SPEC = """
version: 0
name: live-crash
runtime: {{provider: openai, model_id: gpt-live, host: "{host}"}}
agents: {{a: {{prompt: "You answer."}}}}
pattern: {{type: chain, config: {{steps: [{{agent: a, input: "say hello"}}]}}}}
"""


@pytest.fixture
async def http(settings: DurableSettings) -> AsyncIterator[httpx.AsyncClient]:
    async with served_client(make_app(settings), timeout=120) as client:
        yield client


def told(seen: list[Frame]) -> str:
    return "".join(f.data["text"] for f in seen if f.event == "text")


@pytest.mark.timeout(300)
async def test_a_client_following_a_killed_step_sees_one_coherent_transcript(
        http: httpx.AsyncClient, store: Store, held: HeldLLM,
        fleet_factory: Callable[..., Any],
        capsys: pytest.CaptureFixture[str]) -> None:
    fleet = fleet_factory(claim_idle_ms=1000, heartbeat_s=0.5)
    victim = fleet.start_worker()
    sid = await submit(http, SPEC.format(host=held.url("/v1")))

    seen: list[Frame] = []
    async with http.stream("GET", f"/v1/sessions/{sid}/stream") as r:
        async for frame in frames(r):
            if not frame.comments:
                seen.append(frame)
            if told(seen) == "".join(FIRST):
                break  # half the reply is here; the model holds the rest; the client leaves
    await asyncio.to_thread(fleet.kill, victim, signal.SIGKILL)
    held.go.set()  # the server lets go; the dead worker's connection takes nothing
    fleet.start_worker()

    async with http.stream("GET", f"/v1/sessions/{sid}/stream",
                           headers={"Last-Event-ID": str(seen[-1].id)}) as r:
        seen += [f async for f in frames(r) if not f.comments]

    assert seen[-1].event == "end" and seen[-1].data["status"] == "completed"
    transcript = seen[:-1]
    ids = [f.id for f in transcript]
    assert len(set(ids)) == len(ids), "an entry came twice"
    starts = [n for n, f in enumerate(transcript) if f.event == "attempt"]
    assert len(starts) == 2, [(f.event, f.data) for f in transcript]
    first, second = transcript[starts[0]:starts[1]], transcript[starts[1]:]
    assert told(first) == "".join(FIRST)  # partial: the first attempt never ended its turn
    assert not any(f.event == "turn_end" for f in first)
    assert second[0].data["worker"] != first[0].data["worker"]
    (result,) = await store.results(sid)
    assert told(second) == result.response == "Hello world!"
    assert second[-1].event == "turn_end"
    with capsys.disabled():
        print("\nlive stream crash drill, as the client received it:")
        for f in transcript:
            shown = f.data.get("text") or f.data.get("stop") or f.data.get("worker")
            print(f"  {f.id} {f.event:9} {f.data['step']} attempt {f.data['attempt']}: "
                  f"{shown!r}")
        print(f"  committed: {result.response!r}")
