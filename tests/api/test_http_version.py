"""The release and the data formats as the API shows them: /healthz's details, the
workers' heartbeats in GET /v1/workers, and the console's fleet page (real redis-server,
a real worker in process)."""

from __future__ import annotations

import json

import httpx
from helpers import wait_for
from helpers.api import TOKEN, asgi_client, make_app

from strands_durable.models import now_ms
from strands_durable.settings import DurableSettings
from strands_durable.store.store import Store
from strands_durable.version import DATA_FORMAT, __version__
from strands_durable.worker.consumer import StepConsumer


async def test_healthz_names_the_release_and_both_formats(client: httpx.AsyncClient,
                                                          store: Store) -> None:
    doc = (await client.get("/healthz")).json()
    assert doc["version"] == {"release": __version__, "data_format": DATA_FORMAT,
                              "recorded_format": DATA_FORMAT}


async def test_workers_report_the_release_they_run(client: httpx.AsyncClient,
                                                   consumer: StepConsumer) -> None:
    async def listed() -> list[dict[str, object]] | None:
        items: list[dict[str, object]] = (await client.get("/v1/workers")).json()["items"]
        return items or None

    items = await wait_for(listed, timeout_s=30, what="the worker's heartbeat")
    assert [(w["consumer"], w["version"]) for w in items] == [(consumer.name, __version__)]


async def test_the_console_fleet_page_shows_each_worker_s_release(
        settings: DurableSettings, store: Store) -> None:
    await store.redis.hset(store.keys.workers(), mapping={
        "w-new": json.dumps({"last_seen_ms": now_ms(), "version": __version__}),
        "w-old": json.dumps({"last_seen_ms": now_ms()})})  # a 0.1.0 heartbeat
    async with asgi_client(make_app(settings, api_token=TOKEN)) as browser:
        browser.headers["accept"] = "text/html"
        r = await browser.post("/ui/login", data={"token": TOKEN, "next": "/ui"})
        assert r.status_code == 303
        html = (await browser.get("/ui/fleet")).text
    rows = {name: row for row in html.split("<tr>") for name in ("w-new", "w-old")
            if name in row}
    assert f'<td class="mono">{__version__}</td>' in rows["w-new"]
    assert '<td class="mono"></td>' in rows["w-old"]
