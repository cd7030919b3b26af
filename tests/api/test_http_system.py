"""/healthz and /metrics, and every route's answer while Redis is unreachable (503),
against real redis-servers (one of them stopped under the app)."""

from __future__ import annotations

import json

import httpx
import pytest
from fastapi import FastAPI
from helpers import free_port, start_redis, wait_for
from helpers.api import asgi_client, chain_spec, error_of, make_app
from prometheus_client.parser import text_string_to_metric_families

from strands_durable.models import now_ms
from strands_durable.settings import DurableSettings
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

UNKNOWN = "00000000-0000-4000-8000-000000000000"


async def test_healthz_degraded_without_workers(client: httpx.AsyncClient,
                                                store: Store) -> None:
    # A worker last seen long ago is known but not recent.
    await store.redis.hset(store.keys.workers(), "old-worker",
                           json.dumps({"last_seen_ms": now_ms() - 3_600_000}))
    await store.redis.hset(store.keys.workers(), "garbled", "not json")
    r = await client.get("/healthz")
    assert r.status_code == 200
    doc = r.json()
    assert doc["status"] == "degraded" and doc["redis"] == {"ok": True, "error": None}
    assert doc["workers"]["recent"] == 0 and doc["workers"]["known"] == 2


async def test_healthz_ok_with_a_live_worker(client: httpx.AsyncClient, store: Store,
                                             consumer: StepConsumer) -> None:
    async def healthy() -> dict[str, object] | None:
        doc: dict[str, object] = (await client.get("/healthz")).json()
        return doc if doc["status"] == "ok" else None

    doc = await wait_for(healthy, timeout_s=10, what="the worker's heartbeat")
    workers = doc["workers"]
    assert isinstance(workers, dict)
    assert workers["names"] == [consumer.name] and workers["recent"] == 1


async def test_metrics_is_prometheus_text(client: httpx.AsyncClient) -> None:
    r = await client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    families = list(text_string_to_metric_families(r.text))
    assert families, r.text


@pytest.fixture
def dead_redis_settings(prefix: str) -> DurableSettings:
    """Settings naming a port nothing listens on."""
    return DurableSettings(redis_url=f"redis://127.0.0.1:{free_port()}/0", key_prefix=prefix)


@pytest.mark.parametrize(("method", "path", "body"), [
    ("GET", "/v1/sessions", None),
    ("POST", "/v1/sessions", {"spec": chain_spec(1)}),
    ("GET", f"/v1/sessions/{UNKNOWN}", None),
    ("GET", f"/v1/sessions/{UNKNOWN}/events", None),
    ("GET", f"/v1/sessions/{UNKNOWN}/events?follow=1", None),
    ("GET", f"/v1/sessions/{UNKNOWN}/artifacts", None),
    ("POST", f"/v1/sessions/{UNKNOWN}/pause", None),
    ("POST", f"/v1/sessions/{UNKNOWN}/signal", {"response": "x"}),
    ("DELETE", f"/v1/sessions/{UNKNOWN}", None),
])
async def test_redis_unreachable_is_503(dead_redis_settings: DurableSettings, method: str,
                                        path: str, body: object) -> None:
    async with asgi_client(make_app(dead_redis_settings)) as client:
        r = await client.request(method, path, json=body)
        err = error_of(r, 503)
        assert err["code"] == "redis_unavailable" and "Redis" in err["message"]
        assert r.headers["retry-after"] == "1"
        health = await client.get("/healthz")
        assert health.status_code == 503
        assert health.json()["status"] == "unavailable"
        assert health.json()["redis"]["ok"] is False


async def test_redis_dying_under_a_running_app(prefix: str) -> None:
    server = start_redis()
    try:
        app = make_app(DurableSettings(redis_url=server.url, key_prefix=prefix))
        async with asgi_client(app) as client:
            r = await client.post("/v1/sessions", json={"spec": chain_spec(1)})
            assert r.status_code == 201
            sid = r.json()["session_id"]
            assert (await client.get("/healthz")).status_code == 200
            server.stop()
            assert error_of(await client.get(f"/v1/sessions/{sid}"), 503)["code"] == \
                "redis_unavailable"
            error_of(await client.post("/v1/sessions", json={"spec": chain_spec(1)}), 503)
            assert (await client.get("/healthz")).status_code == 503
    finally:
        server.stop()


async def test_every_route_with_a_body_documents_413_and_answers_it(
        client: httpx.AsyncClient, app: FastAPI) -> None:
    """The body limit answers 413 before any route runs, so each route says it may (the
    OpenAPI fuzz run found /signal answering an undocumented 413)."""
    paths = app.openapi()["paths"]
    for path, operations in paths.items():
        for method, operation in operations.items():
            if "requestBody" in operation:
                assert "413" in operation["responses"], f"{method.upper()} {path}"
    sid = "3b241101-e2bb-4255-8caf-4136c566a962"
    answer = await client.post(f"/v1/sessions/{sid}/signal",
                               json={"response": "x" * 600_000})
    assert error_of(answer, 413)["code"] == "payload_too_large"
