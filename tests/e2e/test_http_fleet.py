"""End to end over HTTP only: `durable api` (a real uvicorn process, token auth on) and
real `arq worker` processes on a real redis-server. Submit, follow the events as
server-sent events, pause, resume, answer a human-in-the-loop step, fetch the artifact."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import wait_for
from helpers.api import Frame, api_process, frames
from helpers.fleet import Fleet

pytestmark = pytest.mark.e2e

TOKEN = "e2e-token"
SPEC = """
version: 0
name: launch-note
runtime:
  provider: scripted
  script:
    rules:
      - {agent: writer, contains: "approved", reply: "Launch note, approved by a human."}
agents:
  researcher: {prompt: "You research."}
  writer: {prompt: "You write."}
pattern:
  type: chain
  config:
    steps:
      - {agent: researcher, input: "facts about {{ product }}"}
      - {agent: researcher, input: "more on {{ last_response }}"}
      - type: hitl
        prompt: "Publish the note about {{ product }}?"
        context_display: "{{ steps[1].response }}"
      - {agent: writer, input: "final note, {{ hitl_response }}"}
inputs:
  values: {product: widgets}
outputs:
  artifacts:
    - path: "{{ product }}-note.md"
      from: "# {{ product }}\\n{{ last_response }}"
"""


@pytest.fixture
def api(fleet_factory: Any, tmp_path: Path) -> Iterator[tuple[Fleet, str]]:
    fleet: Fleet = fleet_factory()
    fleet.start_worker()
    fleet.start_worker()
    env = {**fleet.env, "DURABLE_API_TOKEN": TOKEN}
    with api_process(env, tmp_path / "api.log") as url:
        yield fleet, url


@pytest.fixture
async def http(api: tuple[Fleet, str]) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=api[1], timeout=30,
                                 headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        yield client


async def follow(http: httpx.AsyncClient, sid: str, into: list[Frame]) -> None:
    async with http.stream("GET", f"/v1/sessions/{sid}/events",
                           params={"follow": "1"}) as r:
        assert r.status_code == 200
        async for frame in frames(r):
            if not frame.comments:
                into.append(frame)


async def status(http: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    r = await http.get(f"/v1/sessions/{sid}")
    assert r.status_code == 200, r.text
    doc: dict[str, Any] = r.json()
    return doc


async def test_a_session_driven_to_completion_over_http(api: tuple[Fleet, str],
                                                        http: httpx.AsyncClient) -> None:
    fleet, url = api
    # Auth is on: nothing but /healthz answers without the token.
    async with httpx.AsyncClient(base_url=url) as anonymous:
        assert (await anonymous.get("/v1/sessions")).status_code == 401
        health = (await anonymous.get("/healthz")).json()
    assert set(health) == {"status"}  # the details are for holders of the token
    assert (await http.get("/healthz")).json()["redis"]["ok"] is True

    fleet.breakpoints.set("launch-note", "step:0")
    r = await http.post("/v1/sessions", json={"spec": SPEC, "variables": {"product": "kites"}},
                        headers={"Idempotency-Key": "launch-1"})
    assert r.status_code == 201, r.text
    sid = r.json()["session_id"]
    assert r.headers["location"] == f"/v1/sessions/{sid}"
    seen: list[Frame] = []
    follower = asyncio.create_task(follow(http, sid, seen))

    # Pause while the first step runs: it commits, nothing after it starts.
    await wait_for(lambda: _has(seen, "step_started"), timeout_s=60,
                   what="the first step to start (seen over SSE)")
    await fleet.breakpoints.wait("launch-note", "step:0")
    r = await http.post(f"/v1/sessions/{sid}/pause")
    assert r.status_code == 200 and r.json()["status"] == "paused"
    fleet.breakpoints.clear("launch-note", "step:0")
    doc = await wait_for(lambda: _committed(http, sid, 1), timeout_s=60,
                         what="the running step to commit while paused")
    assert doc["status"] == "paused" and doc["steps_committed"] == 1
    assert (await http.post(f"/v1/sessions/{sid}/pause")).status_code == 409
    r = await http.post(f"/v1/sessions/{sid}/resume")
    assert r.status_code == 200 and r.json()["status"] == "running"

    # The human-in-the-loop step pauses it again, waiting for an answer.
    doc = await wait_for(lambda: _waiting_for_human(http, sid), timeout_s=60,
                         what="the HITL step to wait for input")
    assert "Publish the note about kites?" in doc["paused_reason"]
    r = await http.post(f"/v1/sessions/{sid}/signal", json={"response": "approved"})
    assert r.status_code == 200, r.text

    await asyncio.wait_for(follower, timeout=60)  # the stream ends when the session does
    assert seen[-1].event == "end"
    assert seen[-1].data == {"session_id": sid, "status": "completed"}
    types = [f.event for f in seen[:-1]]
    assert types[0] == "session_started" and types[-1] == "session_completed"
    assert types.count("step_completed") == 4 and types.count("session_paused") == 2
    assert types.count("session_resumed") == 2

    doc = await status(http, sid)
    assert doc["status"] == "completed" and doc["steps_committed"] == 4
    history = doc["pattern_state"]["step_history"]
    assert history[2]["response"] == "approved"
    assert history[3]["response"] == "Launch note, approved by a human."
    listed = (await http.get(f"/v1/sessions/{sid}/artifacts")).json()["items"]
    assert [a["name"] for a in listed] == ["kites-note.md"]
    art = await http.get(f"/v1/sessions/{sid}/artifacts/kites-note.md")
    assert art.status_code == 200
    assert art.text == "# kites\nLaunch note, approved by a human."
    # The agent steps were run by the arq workers (their heartbeats name them); the
    # human's answer was committed by the operator.
    committers = [f.data["worker"] for f in seen if f.event == "step_completed"]
    # A loaded machine can delay a heartbeat past the liveness window: wait for both.
    live = await wait_for(lambda: _live_workers(http, 2), timeout_s=60,
                          what="both workers' heartbeats in /healthz")
    assert committers[2] == "operator"
    assert set(committers[:2] + committers[3:]) <= live

    # The same key with the same request names the same session, even now; with
    # another request (no variables) it is refused.
    again = await http.post("/v1/sessions", json={"spec": SPEC,
                                                  "variables": {"product": "kites"}},
                            headers={"Idempotency-Key": "launch-1"})
    assert again.status_code == 200 and again.json()["session_id"] == sid
    other = await http.post("/v1/sessions", json={"spec": SPEC},
                            headers={"Idempotency-Key": "launch-1"})
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    assert "Traceback" not in fleet.logs()


async def _has(seen: list[Frame], event: str) -> bool:
    return any(f.event == event for f in seen)


async def _committed(http: httpx.AsyncClient, sid: str, n: int) -> dict[str, Any] | None:
    doc = await status(http, sid)
    return doc if doc["steps_committed"] >= n else None


async def _live_workers(http: httpx.AsyncClient, count: int) -> set[str] | None:
    names = set((await http.get("/healthz")).json()["workers"]["names"])
    return names if len(names) == count else None


async def _waiting_for_human(http: httpx.AsyncClient, sid: str) -> dict[str, Any] | None:
    doc = await status(http, sid)
    reason = doc.get("paused_reason") or ""
    return doc if reason.startswith("waiting for human input") else None
