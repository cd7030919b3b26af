"""The release and the data formats as the API shows them: /healthz's details, the
workers' heartbeats in GET /v1/workers, and the console's fleet page (real redis-server,
a real worker in process)."""

from __future__ import annotations

import httpx
from helpers import wait_for

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
