"""Sessions that move over HTTP and through the Python client: GET /v1/sessions/{id}/export
and POST /v1/sessions/import on a real redis-server through the ASGI app, the client's
methods on both backends, the roles (export: read, import: operate) and the namespace an
import lands in."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI
from helpers import random_prefix, wait_for
from helpers.api import TOKEN, asgi_client, error_of, make_app
from pattern_specs import CASES

from strands_durable.access import NAMESPACE_HEADER
from strands_durable.client import AsyncClient
from strands_durable.models import SessionStatus
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.store.export import SessionExport
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

UNCHANGED = ("results", "order", "events", "conversations", "checkpoints", "artifacts")


@pytest.fixture
async def finished(store: Store, consumer: StepConsumer) -> str:
    sid, _ = await start_session(store, CASES["graph"].load())

    async def done() -> bool:
        return (await store.get_session(sid)).status is SessionStatus.COMPLETED

    await wait_for(done, what="the session to complete")
    return sid


@pytest.fixture
def target_app(settings: DurableSettings) -> FastAPI:
    """Another deployment's API (its own prefix), with an admin token."""
    return make_app(settings, key_prefix=random_prefix(), api_token=TOKEN)


@pytest.fixture
async def target(target_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(target_app, token=TOKEN) as client:
        yield client


def same(a: SessionExport, b: SessionExport) -> bool:
    return all(getattr(a, part) == getattr(b, part) for part in UNCHANGED)


async def test_both_clients_move_a_session(settings: DurableSettings, finished: str,
                                           target: httpx.AsyncClient,
                                           target_app: FastAPI) -> None:
    async with AsyncClient.connect_redis(settings.redis_url,
                                         key_prefix=settings.key_prefix) as source:
        doc = await source.export_session(finished)
    assert doc.session_id == finished and doc.meta["status"] == "completed"
    async with AsyncClient("http://api.test", token=TOKEN,
                           transport=httpx.ASGITransport(app=target_app)) as http:
        imported = await http.import_session(doc.model_dump_json())
        assert (imported.session_id, imported.status, imported.requeued) == (
            finished, "completed", 0)
        assert same(await http.export_session(finished), doc)
        assert (await http.get(finished)).status is SessionStatus.COMPLETED


async def test_roles_and_the_namespace_an_import_lands_in(
        settings: DurableSettings, finished: str, target: httpx.AsyncClient) -> None:
    source = make_app(settings)
    async with asgi_client(source) as open_api:
        exported = (await open_api.get(f"/v1/sessions/{finished}/export")).json()
    tokens = {}
    for role in ("read", "operate"):
        r = await target.post("/v1/tokens", json={"role": role, "namespaces": ["team-a"]})
        assert r.status_code == 201, r.text
        tokens[role] = r.json()["token"]

    def as_(role: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {tokens[role]}", NAMESPACE_HEADER: "team-a"}

    err = error_of(await target.post("/v1/sessions/import", json=exported,
                                     headers=as_("read")), 403)
    assert "operate" in err["message"]
    r = await target.post("/v1/sessions/import", json=exported, headers=as_("operate"))
    assert r.status_code == 201, r.text
    # It is team-a's now: readable there, not in the default namespace.
    r = await target.get(f"/v1/sessions/{finished}/export", headers=as_("read"))
    assert r.status_code == 200 and r.json()["meta"]["namespace"] == "team-a"
    error_of(await target.get(f"/v1/sessions/{finished}"), 404)
