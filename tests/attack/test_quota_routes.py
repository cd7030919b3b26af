"""Tenants against each other's quotas, through the real ASGI app on a real redis-server:
a token of namespace A (read, operate, even admin over A) can neither read, list, set nor
delete namespace B's quota, whatever header, path trick or body it sends, and cannot
raise its own; a namespace with no quota is refused exactly as one with a quota (no
oracle). Each refusal is checked on Redis's contents too, not only on the status."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from helpers.api import TOKEN, asgi_client, create_tokens, error_of, make_app

from strands_durable.access import NAMESPACE_HEADER
from strands_durable.settings import DurableSettings
from strands_durable.store.store import Store

pytestmark = pytest.mark.integration

QUOTA = {"running_sessions": 2, "tokens_per_day": 1000, "over": "refuse"}
SCOPED = ("a_read", "a_operate", "a_admin")


async def redis_snapshot(store: Store) -> dict[str, Any]:
    """Every key of the test's prefix (the audit trails included) and its value."""
    snapshot: dict[str, Any] = {}
    async for key in store.redis.scan_iter(match=f"{store.keys.prefix}:*", count=1000):
        snapshot[key] = await store.redis.dump(key)
    return snapshot


@pytest.fixture
async def tenants(settings: DurableSettings) -> AsyncIterator[tuple[FastAPI, dict[str, str]]]:
    app = make_app(settings, api_token=TOKEN)
    async with asgi_client(app, token=TOKEN) as admin:
        tokens = await create_tokens(admin, [
            (name, role, ["team-a"])
            for name, role in [("a_read", "read"), ("a_operate", "operate"),
                               ("a_admin", "admin")]])
        for ns in ("team-a", "team-b"):
            assert (await admin.put(f"/v1/quotas/{ns}", json=QUOTA)).status_code == 200
        yield app, tokens


def as_token(app: FastAPI, token: str, namespace: str | None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"}
    if namespace is not None:
        headers[NAMESPACE_HEADER] = namespace
    # Redirects followed: a trailing slash is answered 307 to the path without it.
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                             base_url="http://api.test", headers=headers,
                             follow_redirects=True)


@pytest.mark.parametrize("who", SCOPED)
@pytest.mark.parametrize("header", [None, "team-a", "team-b"])
async def test_a_token_of_a_cannot_read_or_change_bs_quota(
        tenants: tuple[FastAPI, dict[str, str]], store: Store, who: str,
        header: str | None) -> None:
    app, tokens = tenants
    before = await redis_snapshot(store)
    async with as_token(app, tokens[who], header) as a:
        for method in ("GET", "PUT", "DELETE"):
            for path in ("/v1/quotas/team-b", "/v1/quotas/team-nobody"):
                r = await a.request(method, path, json={"running_sessions": 100_000})
                err = error_of(r, 403)
                assert err["code"] == "forbidden", (method, path)
                assert "team-b" not in r.text or path.endswith("team-b")
            # A namespace with a quota and one without are refused alike: no oracle.
            known = await a.request(method, "/v1/quotas/team-b", json=QUOTA)
            unknown = await a.request(method, "/v1/quotas/team-zz", json=QUOTA)
            assert known.json()["error"]["message"].replace("team-b", "team-zz") \
                == unknown.json()["error"]["message"]
        # The list shows only A's quota, whatever namespace the header names.
        r = await a.get("/v1/quotas")
        if header == "team-a":
            assert [q["namespace"] for q in r.json()["items"]] == ["team-a"]
        else:
            assert error_of(r, 403)["code"] == "forbidden"
    assert await redis_snapshot(store) == before, "a refused request changed Redis"


@pytest.mark.parametrize("path", [
    "/v1/quotas/team-b/", "/v1/quotas/team-b%2F", "/v1/quotas/team-a%2F..%2Fteam-b",
    "/v1/quotas/team-a/../team-b", "/v1/quotas/TEAM-B", "/v1/quotas/team-b%00",
    "/v1/quotas/team-b%20", "/v1/quotas/%2A", "/v1/quotas/team-a,team-b",
    "/v1/quotas//team-b",
])
async def test_path_tricks_reach_no_other_namespace(
        tenants: tuple[FastAPI, dict[str, str]], store: Store, path: str) -> None:
    app, tokens = tenants
    before = await redis_snapshot(store)
    async with as_token(app, tokens["a_admin"], "team-a") as a:
        for method in ("GET", "PUT", "DELETE"):
            r = await a.request(method, path, json={"running_sessions": 100_000})
            assert r.status_code in (403, 404, 405, 422), (method, path, r.text)
            assert set(r.json()) == {"error"}
            assert "running_sessions" not in r.text or r.status_code == 422
    assert await redis_snapshot(store) == before


async def test_a_tenants_admin_cannot_raise_its_own_quota(
        tenants: tuple[FastAPI, dict[str, str]], store: Store) -> None:
    app, tokens = tenants
    before = await redis_snapshot(store)
    async with as_token(app, tokens["a_admin"], "team-a") as a:
        assert (await a.get("/v1/quotas/team-a")).json()["running_sessions"] == 2
        put = await a.put("/v1/quotas/team-a", json={"running_sessions": 100_000})
        assert error_of(put, 403)["details"] == {"needs": "admin",
                                                 "token": tokens["a_admin"].split("_")[1]}
        assert error_of(await a.delete("/v1/quotas/team-a"), 403)["code"] == "forbidden"
    assert await redis_snapshot(store) == before
    quota = await store.quota("team-a")
    assert quota is not None and quota.running_sessions == 2
