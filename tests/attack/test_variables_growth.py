"""Variables merged over stored ones cannot grow without bound, through the ASGI app on a
real redis-server: a schedule's PATCH, a resume and a fork each put new values over what
is stored, each request under the body limit; the merged whole past 256 KiB of JSON is a
422 naming `variables`, and what was stored stays as it was. Before, 30 PATCHes of
400 KB left a 12 MB schedule whose every run and every read carried them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from helpers.api import asgi_client, chain_spec, make_app, submit, wait_status

from strands_durable.settings import DurableSettings
from strands_durable.spec.variables import MAX_VARIABLES_BYTES
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

VALUE = "x" * 100_000  # three of them are past the limit; each request is far under 512 KiB
SCHEDULE = {"name": "grows", "cron": "0 * * * *", "spec": chain_spec(1)}


@pytest.fixture
async def http(settings: DurableSettings) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(make_app(settings)) as client:
        yield client


def refused_naming_variables(r: httpx.Response) -> None:
    assert r.status_code == 422, (r.status_code, r.text[:300])
    error = r.json()["error"]
    assert "variables" in error["message"] and f"{MAX_VARIABLES_BYTES:,}" in error["message"]


async def test_a_schedules_variables_stop_at_the_limit(http: httpx.AsyncClient) -> None:
    assert (await http.post("/v1/schedules", json=SCHEDULE)).status_code == 201
    for n in range(2):
        r = await http.patch("/v1/schedules/grows", json={"variables": {f"k{n}": VALUE}})
        assert r.status_code == 200, r.text[:300]
    before = (await http.get("/v1/schedules/grows")).json()
    refused_naming_variables(await http.patch("/v1/schedules/grows",
                                              json={"variables": {"k2": VALUE}}))
    after = (await http.get("/v1/schedules/grows")).json()
    assert after == before and set(after["variables"]) == {"topic", "k0", "k1"}


async def test_a_resume_cannot_grow_them_past_it(http: httpx.AsyncClient,
                                                 store: Store) -> None:
    sid = await submit(http, chain_spec(2))  # no worker: it stays running until paused
    for n in range(3):
        assert (await http.post(f"/v1/sessions/{sid}/pause")).status_code == 200
        r = await http.post(f"/v1/sessions/{sid}/resume", json={"variables": {f"k{n}": VALUE}})
        if n < 2:
            assert r.status_code == 200, r.text[:300]
            # The event names what changed, not the 100 KB value whole.
            resumed = [f for _, f in await store.events(sid) if f["type"] == "session_resumed"]
            assert f"k{n}=xxx" in resumed[-1]["detail"] and len(resumed[-1]["detail"]) < 200
    refused_naming_variables(r)
    record = await store.get_session(sid)
    assert record.status.value == "paused" and set(record.variables) == {"topic", "k0", "k1"}


async def test_a_fork_cannot_either(http: httpx.AsyncClient, store: Store,
                                    consumer: StepConsumer) -> None:
    sid = await submit(http, chain_spec(2), variables={"k0": VALUE, "k1": VALUE})
    await wait_status(http, sid, "completed")
    sessions_before = len((await http.get("/v1/sessions")).json()["items"])
    refused_naming_variables(await http.post(
        f"/v1/sessions/{sid}/resume", json={"from_checkpoint": 1, "variables": {"k2": VALUE}}))
    assert len((await http.get("/v1/sessions")).json()["items"]) == sessions_before
    r = await http.post(f"/v1/sessions/{sid}/resume",
                        json={"from_checkpoint": 1, "variables": {"k1": "short"}})
    assert r.status_code == 201, r.text[:300]  # replacing a value is no growth
