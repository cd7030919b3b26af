"""Helpers of the HTTP API tests: specs, an httpx client on the ASGI app (its lifespan run
as a server would), a real uvicorn server for live streams, waiting on statuses."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections.abc import AsyncIterator, Awaitable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

from helpers import REPO, free_port, wait_for, wait_for_sync
from helpers.fleet import durable_bin
from strands_durable.api.app import create_app
from strands_durable.settings import DurableSettings

TOKEN = "t0ken-for-tests"
# Short blocks so followers notice ended or deleted sessions quickly in tests.
FOLLOW_BLOCK_MS = 200

CHAIN = """
version: 0
name: {name}
runtime:
  provider: scripted
agents:
  a: {{prompt: "You are a."}}
pattern:
  type: chain
  config:
    steps:
{steps}
outputs:
  artifacts:
    - path: "{name}-report.md"
      from: "# Report\\n{{{{ last_response }}}}"
"""

HITL = """
version: 0
name: approve
runtime: {provider: scripted}
agents:
  a: {prompt: "You draft."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "draft it"}
      - type: hitl
        prompt: "Approve the draft?"
        context_display: "Draft: {{ steps[0].response }}"
      - {agent: a, input: "final after {{ hitl_response }}"}
outputs:
  artifacts:
    - path: "approved.md"
      from: "{{ last_response }}"
"""


def chain_spec(steps: int = 2, name: str = "plain") -> str:
    body = "\n".join(f"      - {{agent: a, input: \"step {i} of {{{{ topic }}}}\"}}"
                     for i in range(steps))
    return CHAIN.format(name=name, steps=body) + "inputs:\n  values: {topic: x}\n"


def make_app(settings: DurableSettings, **updates: Any) -> FastAPI:
    app = create_app(settings.model_copy(update=updates))
    app.state.follow_block_ms = FOLLOW_BLOCK_MS
    return app


@asynccontextmanager
async def asgi_client(app: FastAPI, token: str | None = None
                      ) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api.test",
                                     headers=headers) as client:
            yield client


@asynccontextmanager
async def served_client(app: FastAPI, timeout: float = 30) -> AsyncIterator[httpx.AsyncClient]:
    """`app` served over real HTTP (uvicorn_server) and a client of it."""
    async with uvicorn_server(app) as url, httpx.AsyncClient(base_url=url,
                                                             timeout=timeout) as client:
        yield client


@asynccontextmanager
async def uvicorn_server(app: FastAPI) -> AsyncIterator[str]:
    """Serve `app` over real HTTP on a free port, in this event loop; yields its URL."""
    port = free_port()
    # Idle connections kept for the test's whole length: with uvicorn's 5 s, a test
    # client reusing its connection after a long browser step raced the server closing
    # it (httpx.ReadError on a loaded machine).
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on",
                                           timeout_keep_alive=300))
    task = asyncio.create_task(server.serve())

    async def started() -> bool:
        if task.done():
            task.result()  # raise what stopped it
        return server.started

    try:
        await wait_for(started, timeout_s=10, what="uvicorn to start")
        # The render stage's processes up: a test's first submit would otherwise wait for
        # them to start (30 s on a loaded CI machine), inside its HTTP client's timeout.
        await asyncio.wait_for(app.state.render_stage.warmed(), timeout=120)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=15)


async def create_tokens(admin: httpx.AsyncClient, tokens: list[tuple[str, str, list[str]]]
                        ) -> dict[str, str]:
    """Each (name, role, namespaces) made a token through POST /v1/tokens: name -> secret."""
    made: dict[str, str] = {}
    for name, role, namespaces in tokens:
        r = await admin.post("/v1/tokens", json={"role": role, "namespaces": namespaces,
                                                 "name": name})
        assert r.status_code == 201, r.text
        made[name] = r.json()["token"]
    return made


async def session_status_is(client: httpx.AsyncClient, sid: str, *statuses: str
                            ) -> dict[str, Any] | None:
    r = await client.get(f"/v1/sessions/{sid}")
    doc: dict[str, Any] = r.json()
    return doc if doc.get("status") in statuses else None


def wait_status(client: httpx.AsyncClient, sid: str, *statuses: str,
                timeout_s: float = 30) -> Awaitable[dict[str, Any]]:
    return wait_for(lambda: session_status_is(client, sid, *statuses), timeout_s=timeout_s,
                    what=f"session {sid} to be {'/'.join(statuses)}")


async def submit(client: httpx.AsyncClient, spec: Any, **body: Any) -> str:
    r = await client.post("/v1/sessions", json={"spec": spec, **body})
    assert r.status_code == 201, r.text
    sid: str = r.json()["session_id"]
    return sid


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    """The error envelope, after checking the status and its shape."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    err: dict[str, Any] = body["error"]
    return err



@contextmanager
def api_process(env: dict[str, str], log: Path, *, port_from_env: bool = False
                ) -> Iterator[str]:
    """`durable api` as a real process (uvicorn) on a free port, given as --port or as
    DURABLE_API_PORT; yields its URL once it answers, and stops it afterwards."""
    port = free_port()
    args = [*durable_bin(), "api"]
    if port_from_env:
        env = {**env, "DURABLE_API_HOST": "127.0.0.1", "DURABLE_API_PORT": str(port)}
    else:
        args += ["--port", str(port)]
    with log.open("wb") as out:
        proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def answering() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"durable api exited {proc.returncode}:\n"
                                 f"{log.read_text(errors='replace')}")
        try:
            return httpx.get(f"{url}/healthz", timeout=1).status_code in (200, 503)
        except httpx.TransportError:
            return False

    try:
        wait_for_sync(answering, timeout_s=120, what="durable api to answer")
        yield url
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


@dataclass
class Frame:
    event: str = "message"
    id: str | None = None
    data: Any = None
    comments: list[str] = field(default_factory=list)


async def frames(response: httpx.Response) -> AsyncIterator[Frame]:
    """Parse a text/event-stream as it arrives."""
    frame = Frame()
    async for line in response.aiter_lines():
        if line == "":
            if frame.data is not None or frame.comments:
                yield frame
            frame = Frame()
        else:
            _take_line(frame, line)


def frames_of(body: str) -> list[Frame]:
    """The frames with data of a whole text/event-stream body."""
    found = []
    for block in body.split("\n\n"):
        frame = Frame()
        for line in block.splitlines():
            _take_line(frame, line)
        if frame.data is not None:
            found.append(frame)
    return found


def _take_line(frame: Frame, line: str) -> None:
    if line.startswith(":"):
        frame.comments.append(line[1:].strip())
        return
    name, _, value = line.partition(":")
    value = value.removeprefix(" ")
    if name == "event":
        frame.event = value
    elif name == "id":
        frame.id = value
    elif name == "data":
        frame.data = json.loads(value)
