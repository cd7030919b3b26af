"""Reading sessions over HTTP on a real redis-server: get, list (filters, pages),
events, artifacts; delete; 404 for what is not there."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from fastapi import FastAPI
from helpers.api import chain_spec, error_of, submit, wait_status

from strands_durable.sessions.control import cancel
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

UNKNOWN = "00000000-0000-4000-8000-000000000000"


async def test_get_is_the_status_document(client: httpx.AsyncClient,
                                          consumer: StepConsumer) -> None:
    sid = await submit(client, chain_spec(2), variables={"topic": "kelp"})
    doc = await wait_status(client, sid, "completed")
    assert doc["session_id"] == sid and doc["pattern_type"] == "chain"
    assert doc["variables"] == {"topic": "kelp"}
    assert [h["index"] for h in doc["pattern_state"]["step_history"]] == [0, 1]
    usage = doc["token_usage"]
    assert usage["total_input_tokens"] > 0
    assert sum(usage["by_agent"].values()) == (usage["total_input_tokens"]
                                               + usage["total_output_tokens"])
    assert doc["steps_committed"] == 2 and doc["error"] is None


@pytest.mark.parametrize("path", ["", "/events", "/events?follow=1", "/stream", "/artifacts",
                                  "/artifacts/x.md"])
async def test_unknown_session_is_404(client: httpx.AsyncClient, path: str) -> None:
    err = error_of(await client.get(f"/v1/sessions/{UNKNOWN}{path}"), 404)
    assert err["code"] == "session_not_found"
    assert err["details"] == {"session_id": UNKNOWN} and UNKNOWN in err["message"]


async def test_unknown_route_and_method_use_the_envelope(client: httpx.AsyncClient) -> None:
    assert error_of(await client.get("/v1/nope"), 404)["code"] == "not_found"
    assert error_of(await client.put("/v1/sessions"), 405)["code"] == "method_not_allowed"


async def updated_at(store: Store, sid: str) -> datetime:
    return datetime.fromisoformat((await store.get_session(sid)).updated_at.replace("Z", "+00:00"))


async def past_the_update_of(store: Store, sid: str) -> None:
    """Wait until the clock has left the millisecond `sid` was last updated in: whatever is
    updated next sorts strictly after it (two updates within one millisecond tie, and a
    tie is ordered by session id)."""
    last = await updated_at(store, sid)
    while datetime.now(UTC) <= last:
        await asyncio.sleep(0.001)


async def test_list_filters_by_status_workflow_and_time(client: httpx.AsyncClient,
                                                        store: Store) -> None:
    a = await submit(client, chain_spec(1, name="alpha"))
    await past_the_update_of(store, a)
    b = await submit(client, chain_spec(1, name="beta"))
    await past_the_update_of(store, b)
    c = await submit(client, chain_spec(1, name="alpha"))
    await past_the_update_of(store, c)
    await cancel(store, b)

    async def ids(**params: str) -> list[str]:
        r = await client.get("/v1/sessions", params=params)
        assert r.status_code == 200, r.text
        return [s["session_id"] for s in r.json()["items"]]

    assert await ids() == [b, c, a]  # most recently updated first (b was cancelled last)
    assert await ids(status="running") == [c, a]
    assert await ids(status="cancelled") == [b]
    assert await ids(workflow="alpha") == [c, a]
    assert await ids(workflow="alpha", status="cancelled") == []
    first = (await client.get("/v1/sessions")).json()["items"][0]
    assert set(first) >= {"session_id", "status", "workflow_name", "pattern_type",
                          "created_at", "updated_at", "steps_committed", "token_usage"}
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    past = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    assert await ids(updated_after=future) == []
    assert await ids(updated_before=past) == []
    assert await ids(updated_after=past, updated_before=future) == [b, c, a]
    cut = await updated_at(store, b)
    assert await ids(updated_before=(cut - timedelta(milliseconds=1)).isoformat()) == [c, a]
    assert await ids(updated_after=cut.isoformat()) == [b]


async def test_list_pages_with_a_cursor(client: httpx.AsyncClient, store: Store) -> None:
    made = [await submit(client, chain_spec(1)) for _ in range(7)]
    # Order: update time (ms), then id, both descending; made this fast, many tie.
    index = store.keys.index_all(0)
    scores = {sid: await store.redis.zscore(index, sid) for sid in made}
    expected = sorted(made, key=lambda sid: (scores[sid], sid), reverse=True)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": "3", **({"cursor": cursor} if cursor else {})}
        page = (await client.get("/v1/sessions", params=params)).json()
        seen += [s["session_id"] for s in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == expected and pages == 3
    # A filtered walk pages the same way.
    page = (await client.get("/v1/sessions", params={"limit": "5",
                                                     "workflow": "plain"})).json()
    rest = (await client.get("/v1/sessions", params={"limit": "5", "workflow": "plain",
                                                     "cursor": page["next_cursor"]})).json()
    assert [s["session_id"] for s in page["items"] + rest["items"]] == expected
    assert rest["next_cursor"] is None


@pytest.mark.parametrize("params", [{"cursor": "not-a-cursor!"}, {"limit": "0"},
                                    {"status": "sleeping"}, {"updated_after": "yesterday"}])
async def test_list_rejects_bad_parameters(client: httpx.AsyncClient,
                                           params: dict[str, str]) -> None:
    err = error_of(await client.get("/v1/sessions", params=params), 422)
    assert err["code"] in ("invalid_cursor", "invalid_request")


async def test_events_history_and_after(client: httpx.AsyncClient,
                                        consumer: StepConsumer) -> None:
    sid = await submit(client, chain_spec(2))
    await wait_status(client, sid, "completed")
    page = (await client.get(f"/v1/sessions/{sid}/events")).json()
    types = [e["type"] for e in page["items"]]
    assert types[0] == "session_started" and types[-1] == "session_completed"
    assert types.count("step_completed") == 2
    started = next(e for e in page["items"] if e["type"] == "step_started")
    assert started["step"] == "step:0" and started["attempt"] == 1 and started["worker"]
    assert page["last_id"] == page["items"][-1]["id"]
    middle = page["items"][2]["id"]
    later = (await client.get(f"/v1/sessions/{sid}/events", params={"after": middle})).json()
    assert later["items"] == page["items"][3:]
    two = (await client.get(f"/v1/sessions/{sid}/events", params={"limit": 2})).json()
    assert two["items"] == page["items"][:2]
    err = error_of(await client.get(f"/v1/sessions/{sid}/events",
                                    params={"after": "bogus"}), 422)
    assert "after" in err["message"]


async def test_artifacts_list_and_fetch(client: httpx.AsyncClient,
                                        consumer: StepConsumer) -> None:
    sid = await submit(client, chain_spec(1, name="kelp"))
    running = (await client.get(f"/v1/sessions/{sid}/artifacts")).json()
    await wait_status(client, sid, "completed")
    listed = (await client.get(f"/v1/sessions/{sid}/artifacts")).json()
    assert running == {"items": []} or running == listed
    [item] = listed["items"]
    assert item["name"] == "kelp-report.md"
    r = await client.get(f"/v1/sessions/{sid}/artifacts/kelp-report.md")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/markdown")
    assert r.text.startswith("# Report\na: step 0 of x") and item["size_bytes"] == len(r.content)
    err = error_of(await client.get(f"/v1/sessions/{sid}/artifacts/missing.md"), 404)
    assert err["code"] == "artifact_not_found" and err["details"]["name"] == "missing.md"


async def test_delete(client: httpx.AsyncClient, store: Store) -> None:
    sid = await submit(client, chain_spec(1))
    r = await client.delete(f"/v1/sessions/{sid}")
    assert r.status_code == 204 and r.content == b""
    assert not await store.exists(sid)
    # Nothing of it is left, not even its operator lock or the lock's fencing counter.
    leftovers = [k async for k in store.redis.scan_iter(f"{store.keys.prefix}:*{sid}*")]
    assert leftovers == []
    assert error_of(await client.get(f"/v1/sessions/{sid}"), 404)["code"] == "session_not_found"
    assert error_of(await client.delete(f"/v1/sessions/{sid}"), 404)["code"] == \
        "session_not_found"
    assert (await client.get("/v1/sessions")).json()["items"] == []


async def test_openapi_and_docs(client: httpx.AsyncClient, app: FastAPI) -> None:
    schema = (await client.get("/openapi.json")).json()
    expected = {
        "/v1/sessions": {"get", "post"},
        "/v1/sessions/{session_id}": {"get", "delete"},
        "/v1/sessions/{session_id}/events": {"get"},
        "/v1/sessions/{session_id}/stream": {"get"},
        "/v1/sessions/{session_id}/artifacts": {"get"},
        "/v1/sessions/{session_id}/artifacts/{name}": {"get"},
        "/v1/sessions/{session_id}/pause": {"post"},
        "/v1/sessions/{session_id}/resume": {"post"},
        "/v1/sessions/{session_id}/cancel": {"post"},
        "/v1/sessions/{session_id}/signal": {"post"},
        "/v1/sessions/{session_id}/requeue": {"post"},
        "/v1/sessions/{session_id}/checkpoints": {"get"},
        "/v1/sessions/{session_id}/checkpoints/{n}": {"get"},
        "/v1/sessions/{session_id}/export": {"get"}, "/v1/sessions/import": {"post"},
        "/v1/workers": {"get"},
        "/v1/queue": {"get"},
        "/v1/tokens": {"get", "post"}, "/v1/tokens/{token_id}": {"delete"},
        "/v1/audit": {"get"},
        "/v1/quotas": {"get"}, "/v1/quotas/{namespace}": {"get", "put", "delete"},
        "/v1/schedules": {"get", "post"},
        "/v1/schedules/{name}": {"get", "patch", "delete"},
        "/v1/schedules/{name}/pause": {"post"}, "/v1/schedules/{name}/resume": {"post"},
        "/v1/schedules/{name}/trigger": {"post"},
        "/v1/webhooks": {"get"}, "/v1/webhooks/{webhook_id}/retry": {"post"},
        "/healthz": {"get"},
        "/metrics": {"get"},
    }
    assert {path: set(ops) for path, ops in schema["paths"].items()} == expected
    docs = await client.get("/docs")
    assert docs.status_code == 200 and "swagger-ui" in docs.text
