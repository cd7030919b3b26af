"""/v1/quotas through the real ASGI app on a real redis-server: each route, each role,
the same validation as `durable quotas set` (a bad value is a 422 naming its field,
nothing written), every change in the audit trail (a token's id, never its text), and
the Python client's quota methods on both backends."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result
from fastapi import FastAPI
from helpers import RedisServer
from helpers.api import TOKEN, asgi_client, create_tokens, error_of, make_app
from helpers.cli import durable

from strands_durable.access import NAMESPACE_HEADER, NamespaceQuota
from strands_durable.client import AsyncClient, Client
from strands_durable.client.errors import ApiInvalidInput, ClientError
from strands_durable.errors import InvalidInput, NotFound
from strands_durable.models import now_ms
from strands_durable.sessions import access
from strands_durable.sessions.token_quota import utc_day
from strands_durable.settings import DurableSettings
from strands_durable.store.store import Store

pytestmark = pytest.mark.integration

QUOTA: dict[str, Any] = {"running_sessions": 5, "tokens_per_day": 1000, "over": "queue",
                         "weight": 3, "steps_in_flight": 40}


async def test_each_route_round_trip(client: httpx.AsyncClient, store: Store) -> None:
    await store.add_tokens("team-a", utc_day(now_ms()), 120)
    r = await client.put("/v1/quotas/team-a", json=QUOTA)
    assert r.status_code == 200, r.text
    assert r.json() == {"namespace": "team-a", **QUOTA, "tokens_today": 120}
    assert await store.quota("team-a") == NamespaceQuota(namespace="team-a", **QUOTA)
    r = await client.put("/v1/quotas/team-b", json={"running_sessions": 2})
    assert r.json() == {"namespace": "team-b", "running_sessions": 2, "tokens_per_day": None,
                        "over": "refuse", "weight": None, "steps_in_flight": None,
                        "tokens_today": 0}
    listed = (await client.get("/v1/quotas")).json()["items"]
    assert [(q["namespace"], q["tokens_today"]) for q in listed] == [("team-a", 120),
                                                                    ("team-b", 0)]
    assert (await client.get("/v1/quotas/team-a")).json()["tokens_per_day"] == 1000
    # A PUT replaces the whole quota.
    r = await client.put("/v1/quotas/team-a", json={"tokens_per_day": 50})
    assert r.json()["running_sessions"] is None and r.json()["over"] == "refuse"
    r = await client.delete("/v1/quotas/team-a")
    assert r.status_code == 204 and r.content == b""
    assert await store.quota("team-a") is None
    for r in (await client.delete("/v1/quotas/team-a"), await client.get("/v1/quotas/team-a")):
        err = error_of(r, 404)
        assert err["code"] == "not_found" and err["details"] == {"namespace": "team-a"}
    assert [q["namespace"] for q in (await client.get("/v1/quotas")).json()["items"]] \
        == ["team-b"]


HOSTILE_BODIES: list[tuple[Any, str]] = [
    ({"running_sessions": -1}, "running_sessions"),
    ({"running_sessions": 0}, "running_sessions"),
    ({"running_sessions": 100_001}, "running_sessions"),
    ({"running_sessions": 10**40}, "running_sessions"),
    ({"running_sessions": "5"}, "running_sessions"),
    ({"running_sessions": 5.5}, "running_sessions"),
    ({"running_sessions": True}, "running_sessions"),
    ({"running_sessions": [1]}, "running_sessions"),
    ({"tokens_per_day": 0}, "tokens_per_day"),
    ({"tokens_per_day": 10**12 + 1}, "tokens_per_day"),
    ({"tokens_per_day": -5}, "tokens_per_day"),
    ({"tokens_per_day": {"$gt": 1}}, "tokens_per_day"),
    ({"running_sessions": 1, "over": "never"}, "over"),
    ({"weight": 0}, "weight"),
    ({"weight": 101}, "weight"),
    ({"weight": "3"}, "weight"),
    ({"steps_in_flight": 0}, "steps_in_flight"),
    ({"steps_in_flight": 100_001}, "steps_in_flight"),
    ({"running_sessions": 1, "over": 1}, "over"),
    ({"running_sessions": 1, "namespace": "team-b"}, "namespace"),
    ({"running_sessions": 1, "unknown": "x" * 10_000}, "unknown"),
    ({}, "running_sessions"),
    ({"running_sessions": None, "tokens_per_day": None}, "running_sessions"),
    ([], "body"),
    ("running_sessions=5", "body"),
    (None, "body"),
]


@pytest.mark.parametrize(("body", "field"), HOSTILE_BODIES)
async def test_hostile_bodies_are_a_422_naming_the_field(
        client: httpx.AsyncClient, store: Store, body: Any, field: str) -> None:
    r = await client.put("/v1/quotas/team-a", json=body)
    err = error_of(r, 422)
    assert err["code"] == "invalid_request"
    assert field in err["message"], err
    assert len(r.content) < 20_000  # the hostile value is not echoed whole
    assert await store.quota("team-a") is None
    assert await access.audit_page(store, "team-a", 10, None) == []


async def test_a_body_that_is_not_json_is_a_422(client: httpx.AsyncClient) -> None:
    r = await client.put("/v1/quotas/team-a", content=b"{not json",
                         headers={"content-type": "application/json"})
    assert error_of(r, 422)["code"] == "invalid_request"


@pytest.mark.parametrize("namespace", [
    "Team-A", "-a", "a-", "a_b", "a" * 64, "a" * 5000, "%00", "team%20a", "t%C3%A9am", "*",
    "..", "%2E%2E",
])
async def test_hostile_namespaces_are_a_422_naming_it(client: httpx.AsyncClient, store: Store,
                                                      namespace: str) -> None:
    for method in ("GET", "PUT", "DELETE"):
        r = await client.request(method, f"/v1/quotas/{namespace}", json=QUOTA)
        if r.status_code == 404:  # ".." resolved by the URL: another route, or none
            assert error_of(r, 404)["code"] in ("not_found", "http_error")
            continue
        err = error_of(r, 422)
        assert err["code"] == "invalid_request" and "namespace" in err["message"], err
        assert len(r.content) < 2_000
    assert await store.quotas() == []


@pytest.fixture
async def authed(settings: DurableSettings) -> AsyncIterator[tuple[FastAPI, dict[str, str]]]:
    app = make_app(settings, api_token=TOKEN)
    async with asgi_client(app, token=TOKEN) as admin:
        tokens = {"env": TOKEN, **await create_tokens(admin, [
            ("all_admin", "admin", ["*"]), ("all_read", "read", ["*"]),
            ("all_operate", "operate", ["*"]), ("a_admin", "admin", ["team-a"]),
            ("a_operate", "operate", ["team-a"]), ("a_read", "read", ["team-a"])])}
        for ns in ("team-a", "team-b"):
            assert (await admin.put(f"/v1/quotas/{ns}", json=QUOTA)).status_code == 200
        yield app, tokens


def as_token(app: FastAPI, token: str, namespace: str | None = None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"}
    if namespace is not None:
        headers[NAMESPACE_HEADER] = namespace
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                             base_url="http://api.test", headers=headers)


# token -> (namespaces its list shows, may it read team-a's quota, may it set/delete it)
ROLE_TABLE = {
    "env": (["team-a", "team-b"], True, True),
    "all_admin": (["team-a", "team-b"], True, True),
    "all_operate": (["team-a", "team-b"], True, False),
    "all_read": (["team-a", "team-b"], True, False),
    "a_admin": (["team-a"], True, False),
    "a_operate": (["team-a"], True, False),
    "a_read": (["team-a"], True, False),
}


@pytest.mark.parametrize("who", sorted(ROLE_TABLE))
async def test_each_route_and_role(authed: tuple[FastAPI, dict[str, str]], store: Store,
                                   who: str) -> None:
    app, tokens = authed
    listed, reads, writes = ROLE_TABLE[who]
    async with as_token(app, tokens[who], "team-a") as c:
        assert [q["namespace"] for q in (await c.get("/v1/quotas")).json()["items"]] == listed
        r = await c.get("/v1/quotas/team-a")
        assert r.status_code == 200 and reads, r.text
        put = await c.put("/v1/quotas/team-a", json={"running_sessions": 9})
        delete = await c.delete("/v1/quotas/team-a")
        if writes:
            assert (put.status_code, delete.status_code) == (200, 204)
            assert await store.quota("team-a") is None
            return
        for r in (put, delete):
            err = error_of(r, 403)
            assert err["code"] == "forbidden" and err["details"]["needs"] == "admin"
            assert "over every namespace" in err["message"]
        assert await store.quota("team-a") == NamespaceQuota(namespace="team-a", **QUOTA)


async def test_a_scoped_token_works_in_its_paths_namespace_without_the_header(
        authed: tuple[FastAPI, dict[str, str]]) -> None:
    app, tokens = authed
    async with as_token(app, tokens["a_read"]) as c:
        assert (await c.get("/v1/quotas/team-a")).status_code == 200
        # The list works in the header's namespace (`default` without one), as others do.
        assert error_of(await c.get("/v1/quotas"), 403)["code"] == "forbidden"


async def test_every_change_is_in_the_audit_trail(authed: tuple[FastAPI, dict[str, str]],
                                                  store: Store) -> None:
    app, tokens = authed
    token_id = tokens["all_admin"].split("_")[1]
    async with as_token(app, tokens["all_admin"], "team-b") as c:
        assert (await c.put("/v1/quotas/team-a", json={"tokens_per_day": 77})).status_code \
            == 200
        assert (await c.delete("/v1/quotas/team-a")).status_code == 204
    entries = await access.audit_page(store, "team-a", 10, None)
    dropped, changed, first = entries[0], entries[1], entries[2]
    assert (dropped.action, changed.action, first.action) == ("quota_drop", "quota_set",
                                                              "quota_set")
    assert dropped.actor == changed.actor == token_id and first.actor == "env"
    assert changed.detail == "None session(s), 77 token(s) a day, over: refuse"
    assert changed.namespace == "team-a" and changed.target == "team-a"
    assert changed.source  # the client's address
    for entry in entries:
        assert tokens["all_admin"] not in entry.model_dump_json()
        assert TOKEN not in entry.model_dump_json()
    # Nothing of team-a's changes landed in the header's namespace's trail.
    assert all(e.target != "team-a" for e in await access.audit_page(store, "team-b", 10,
                                                                          None))


async def test_both_clients_manage_quotas(app: FastAPI, settings: DurableSettings,
                                          store: Store) -> None:
    await store.add_tokens("c-0", utc_day(now_ms()), 33)
    async with asgi_client(app):  # runs the app's lifespan: the store is prepared
        http = AsyncClient("http://api.test", transport=httpx.ASGITransport(app=app),
                           retries=0)
        redis = AsyncClient.connect_redis(settings.redis_url, key_prefix=settings.key_prefix)
        for n, client in enumerate((http, redis)):
            ns = f"c-{n}"
            made = await client.set_quota(ns, running_sessions=3, tokens_per_day=500,
                                          over="queue")
            assert (made.namespace, made.running_sessions, made.tokens_per_day, made.over) \
                == (ns, 3, 500, "queue")
            assert made.tokens_today == (33 if n == 0 else 0)
            assert (await client.quota(ns)).tokens_per_day == 500
            assert ns in [q.namespace for q in await client.quotas()]
            replaced = await client.set_quota(ns, tokens_per_day=9)
            assert (replaced.running_sessions, replaced.over) == (None, "refuse")
            bads: list[tuple[dict[str, Any], str]] = [
                ({"running_sessions": 0}, "running_sessions"),
                ({"tokens_per_day": 10**13}, "tokens_per_day"),
                ({"over": "never", "running_sessions": 1}, "over"), ({}, "running_sessions")]
            for bad, field in bads:
                with pytest.raises(ApiInvalidInput) as raised:
                    await client.set_quota(ns, **bad)
                assert raised.value.status == 422 and field in str(raised.value)
            with pytest.raises(InvalidInput, match="namespace"):
                await client.quota("Not/A Namespace")
            await client.delete_quota(ns)
            with pytest.raises(NotFound):
                await client.quota(ns)
            with pytest.raises(NotFound):
                await client.delete_quota(ns)
            with pytest.raises(ClientError):
                await client.set_quota("a:b", running_sessions=1)
        await http.aclose()
        await redis.aclose()
    trail = await access.audit_page(store, "c-1", 10, None)
    assert [e.action for e in trail] == ["quota_drop", "quota_set", "quota_set"]
    assert trail[0].actor.startswith("python:") and trail[0].source == "python"


async def test_the_api_lists_what_the_cli_lists(client: httpx.AsyncClient, store: Store,
                                               settings: DurableSettings) -> None:
    await store.add_tokens("team-a", utc_day(now_ms()), 7)
    env = {"DURABLE_REDIS_URL": settings.redis_url, "DURABLE_KEY_PREFIX": settings.key_prefix}

    def cli(*args: str) -> Result:  # in a thread: the CLI runs its own event loop
        return CliRunner().invoke(durable(), ["quotas", *args], env=env)

    done = await asyncio.to_thread(cli, "set", "team-a", "--running-sessions", "4")
    assert done.exit_code == 0, done.output
    assert (await client.put("/v1/quotas/team-b", json={"tokens_per_day": 9})).status_code \
        == 200
    listed = await asyncio.to_thread(cli, "list", "--json")
    assert listed.exit_code == 0, listed.output
    assert (await client.get("/v1/quotas")).json()["items"] == json.loads(listed.output)


def test_the_blocking_client_on_redis(redis_server: RedisServer, prefix: str,
                                      store: Store) -> None:
    with Client.connect_redis(redis_server.url, key_prefix=prefix) as client:
        made = client.set_quota("team-s", running_sessions=1, over="queue")
        assert (made.running_sessions, made.over, made.tokens_today) == (1, "queue", 0)
        assert [q.namespace for q in client.quotas()] == ["team-s"]
        assert client.quota("team-s").running_sessions == 1
        with pytest.raises(ApiInvalidInput, match="running_sessions"):
            client.set_quota("team-s", running_sessions=True)  # a bool is not a number here
        client.delete_quota("team-s")
        assert client.quotas() == []
        with pytest.raises(NotFound):
            client.delete_quota("team-s")
