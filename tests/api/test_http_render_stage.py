"""The render stage of POST /v1/sessions (api/render_stage.py) through real HTTP on the
ASGI app and a real redis-server: a full stage answers 503 in the envelope with
Retry-After and stores nothing, a template that burns CPU is refused naming the render
limit, a render process that dies is a 503 too, and a normal submit still works.
No timing is asserted here (bench/submit_render.py measures /healthz under load)."""

from __future__ import annotations

import asyncio
import os
import signal

import httpx
import pytest
from fastapi import FastAPI
from helpers import wait_for
from helpers.api import asgi_client, chain_spec, error_of, make_app, submit, wait_status

from strands_durable.api.render_stage import RenderStage
from strands_durable.settings import DurableSettings
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

# ~350 bytes that pass every static check and burn CPU until DURABLE_RENDER_TIMEOUT_S.
NESTED_LOOPS = "{% for a in 'a'*999999 %}{% for b in 'a'*999999 %}{% endfor %}{% endfor %}x"
HEAVY = f"""
version: 0
name: heavy
runtime: {{provider: scripted}}
agents:
  a: {{prompt: "You are a."}}
pattern:
  type: chain
  config:
    steps:
      - agent: a
        input: "{NESTED_LOOPS}"
"""


async def keys_of(store: Store) -> set[str]:
    return {k async for k in store.redis.scan_iter(f"{store.keys.prefix}:*")}


def stage_of(app: FastAPI) -> RenderStage:
    stage: RenderStage = app.state.render_stage
    return stage


async def taken(stage: RenderStage, n: int) -> bool:
    return stage.taken == n


async def test_a_full_render_stage_answers_503_with_retry_after_and_stores_nothing(
        settings: DurableSettings, store: Store) -> None:
    app = make_app(settings, api_render_workers=1, api_render_queue=0)
    async with asgi_client(app) as client:
        before = await keys_of(store)
        stage = stage_of(app)
        heavy = asyncio.create_task(client.post("/v1/sessions", json={"spec": HEAVY}))
        await wait_for(lambda: taken(stage, 1), timeout_s=10, what="the heavy submit to "
                       "take the stage's one slot")

        r = await client.post("/v1/sessions", json={"spec": chain_spec(1)})
        error = error_of(r, 503)
        assert error["code"] == "overloaded"
        assert "DURABLE_API_RENDER_WORKERS" in error["message"]
        assert "DURABLE_API_RENDER_QUEUE" in error["message"]
        assert r.headers["retry-after"] == "2"  # ceil(DURABLE_RENDER_TIMEOUT_S)
        assert error["details"] == {"retry_after_s": 2}

        refused = await heavy
        assert error_of(refused, 422)["code"] == "template_error"
        assert await keys_of(store) == before  # neither wrote anything
        # The slot is free again: the same submit now works.
        assert stage.taken == 0
        await submit(client, chain_spec(1))


async def test_a_heavy_template_is_refused_naming_the_render_limit_and_stores_nothing(
        client: httpx.AsyncClient, store: Store) -> None:
    before = await keys_of(store)
    r = await client.post("/v1/sessions", json={"spec": HEAVY})
    error = error_of(r, 422)
    assert error["code"] == "template_error"
    assert "DURABLE_RENDER_TIMEOUT_S" in error["message"], error
    assert error["details"]["where"] == "pattern.config.steps[0].input"
    assert await keys_of(store) == before
    assert (await client.get("/v1/sessions")).json()["items"] == []


async def test_a_render_process_that_dies_is_a_503_and_the_next_submit_works(
        settings: DurableSettings, store: Store) -> None:
    app = make_app(settings, api_render_workers=1, api_render_queue=0)
    async with asgi_client(app) as client:
        before = await keys_of(store)
        stage = stage_of(app)
        heavy = asyncio.create_task(client.post("/v1/sessions", json={"spec": HEAVY}))
        await wait_for(lambda: taken(stage, 1), timeout_s=10, what="the heavy submit")

        async def started() -> list[int]:
            return stage.pids()

        for pid in await wait_for(started, timeout_s=30, what="the render process"):
            os.kill(pid, signal.SIGKILL)  # as the kernel's OOM killer would
        error = error_of(await heavy, 503)
        assert error["code"] == "overloaded" and "nothing was stored" in error["message"]
        assert await keys_of(store) == before
        assert stage.taken == 0
        await submit(client, chain_spec(1))  # on a new process


async def test_a_normal_submit_is_planned_in_the_stage_and_runs(
        app: FastAPI, client: httpx.AsyncClient, consumer: StepConsumer) -> None:
    sid = await submit(client, chain_spec(2), variables={"topic": "kelp"})
    doc = await wait_status(client, sid, "completed")
    assert len(doc["pattern_state"]["step_history"]) == 2
    assert stage_of(app).taken == 0
