"""Tenants against each other, through the real ASGI app on a real redis-server: a token of
namespace A can neither read, list, stream, control nor delete anything of namespace B
(ids known or guessed), a `read` token changes nothing, fleet routes need an admin over
every namespace, revoked and expired tokens are refused, guessing tokens is throttled,
and every control action lands in its namespace's audit trail. Each refusal is checked
on Redis's contents too, not only on the status code."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from helpers.api import TOKEN, asgi_client, chain_spec, create_tokens, error_of, make_app

from strands_durable.access import NAMESPACE_HEADER
from strands_durable.api.auth import MAX_FAILURES, REVOCATION_S
from strands_durable.settings import DurableSettings
from strands_durable.store.store import Store

pytestmark = pytest.mark.integration

GUESSED = "3b241101-e2bb-4255-8caf-4136c566a962"


def session_routes(app: FastAPI, sid: str) -> list[tuple[str, str]]:
    """(method, path) of every API route about one session, for `sid`."""
    found = []
    for path, operations in app.openapi()["paths"].items():
        if "{session_id}" not in path:
            continue
        concrete = path.replace("{session_id}", sid).replace("{name}", "x.md") \
            .replace("{n}", "1")
        found += [(method.upper(), concrete) for method in sorted(operations)]
    return found


def every_route(app: FastAPI) -> list[tuple[str, str]]:
    found = []
    for path, operations in app.openapi()["paths"].items():
        concrete = (path.replace("{session_id}", GUESSED).replace("{name}", "x.md")
                    .replace("{n}", "1").replace("{token_id}", "0123456789ab")
                    .replace("{namespace}", "team-a"))
        found += [(method.upper(), concrete) for method in sorted(operations)]
    return found


def secret_of(token: str) -> str:
    """The random part of `sdt_<12 hex id>_<secret>` (the secret may hold '_' too)."""
    assert token.startswith("sdt_") and len(token) == 4 + 12 + 1 + 43
    return token[17:]


BODIES: dict[str, Any] = {"signal": {"response": "yes"}, "resume": {}, "requeue": {}}


def body_for(path: str) -> Any:
    return BODIES.get(path.rsplit("/", 1)[-1], {})


async def redis_snapshot(store: Store) -> dict[str, Any]:
    """Every key of the test's prefix with its type and a digest of its value."""
    snapshot: dict[str, Any] = {}
    async for key in store.redis.scan_iter(match=f"{store.keys.prefix}:*", count=1000):
        name = key.decode() if isinstance(key, bytes) else key
        if ":audit:" in name:
            continue  # the trail of what was tried is not the tenant's data
        snapshot[name] = await store.redis.dump(name)
    return snapshot


class Tenants:
    def __init__(self, app: FastAPI, tokens: dict[str, str], sessions: dict[str, str]) -> None:
        self.app, self.tokens, self.sessions = app, tokens, sessions

    def client(self, token: str, namespace: str | bytes | None = None) -> httpx.AsyncClient:
        bearer = f"Bearer {self.tokens.get(token, token)}"
        headers: dict[str, str | bytes] = {"Authorization": bearer}
        if namespace is not None:
            headers[NAMESPACE_HEADER] = namespace
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app),
                                 base_url="http://api.test", headers=headers)


@pytest.fixture
async def tenants(settings: DurableSettings, store: Store) -> AsyncIterator[Tenants]:
    app = make_app(settings, api_token=TOKEN)
    async with asgi_client(app, token=TOKEN) as admin:
        tokens = await create_tokens(admin, [
            ("a_read", "read", ["team-a"]), ("a_submit", "submit", ["team-a"]),
            ("a_operate", "operate", ["team-a"]), ("b_operate", "operate", ["team-b"]),
            ("a_admin", "admin", ["team-a"]), ("all_operate", "operate", ["*"])])
        t = Tenants(app, tokens, {})
        for namespace, token in (("team-a", "a_submit"), ("team-b", "b_operate")):
            async with t.client(token, namespace) as c:
                r = await c.post("/v1/sessions", json={"spec": chain_spec(3, name=namespace)})
                assert r.status_code == 201, r.text
                t.sessions[namespace] = r.json()["session_id"]
        yield t


async def test_namespace_b_cannot_touch_anything_of_namespace_a(tenants: Tenants,
                                                                store: Store) -> None:
    sid = tenants.sessions["team-a"]
    before = await redis_snapshot(store)
    async with tenants.client("b_operate", "team-b") as b:
        for method, path in session_routes(tenants.app, sid):
            r = await b.request(method, path, json=body_for(path))
            err = error_of(r, 404)
            assert err["code"] == "session_not_found", (method, path)
            # Answered exactly as a session that does not exist at all.
            guessed = await b.request(method, path.replace(sid, GUESSED), json=body_for(path))
            assert error_of(guessed, 404)["message"] == err["message"].replace(sid, GUESSED)
        # Its own token cannot name A's namespace either.
        async with tenants.client("b_operate", "team-a") as into_a:
            for method, path in session_routes(tenants.app, sid):
                r = await into_a.request(method, path, json=body_for(path))
                assert error_of(r, 403)["code"] == "forbidden", (method, path)
            assert error_of(await into_a.get("/v1/sessions"), 403)["code"] == "forbidden"
        listed = (await b.get("/v1/sessions")).json()["items"]
        assert [s["session_id"] for s in listed] == [tenants.sessions["team-b"]]
        assert listed[0]["namespace"] == "team-b"
    assert await redis_snapshot(store) == before, "a refused request changed Redis"
    assert (await store.get_session(sid)).status.value == "running"


async def test_each_namespace_lists_its_own_and_the_default_lists_neither(
        tenants: Tenants) -> None:
    async with tenants.client("all_operate", "team-a") as a:
        assert [s["session_id"] for s in (await a.get("/v1/sessions")).json()["items"]] \
            == [tenants.sessions["team-a"]]
    async with tenants.client("all_operate") as default:
        assert (await default.get("/v1/sessions")).json()["items"] == []
        # Filters combine: status and namespace.
        r = await default.get("/v1/sessions", params={"status": "running"})
        assert r.json()["items"] == []


async def test_a_read_token_changes_nothing(tenants: Tenants, store: Store) -> None:
    sid = tenants.sessions["team-a"]
    before = await redis_snapshot(store)
    async with tenants.client("a_read", "team-a") as reader:
        assert (await reader.get(f"/v1/sessions/{sid}")).status_code == 200
        assert (await reader.get(f"/v1/sessions/{sid}/events")).status_code == 200
        for method, path in every_route(tenants.app):
            if method == "GET" or path == "/healthz":
                continue
            r = await reader.request(method, path.replace(GUESSED, sid), json=body_for(path))
            assert error_of(r, 403)["code"] == "forbidden", (method, path)
        r = await reader.post("/v1/sessions", json={"spec": chain_spec(1)})
        assert error_of(r, 403)["details"]["needs"] == "submit"
    assert await redis_snapshot(store) == before


async def test_roles_stack_and_fleet_routes_need_an_admin_over_every_namespace(
        tenants: Tenants, store: Store) -> None:
    sid = tenants.sessions["team-a"]
    async with tenants.client("a_submit", "team-a") as submitter:
        assert error_of(await submitter.post(f"/v1/sessions/{sid}/pause"), 403)
    async with tenants.client("a_operate", "team-a") as operator:
        assert (await operator.post(f"/v1/sessions/{sid}/pause")).status_code == 200
        assert (await store.get_session(sid)).status.value == "paused"
    for name in ("a_operate", "a_admin", "all_operate"):
        async with tenants.client(name, "team-a") as c:
            for path in ("/v1/workers", "/v1/queue", "/metrics", "/v1/tokens"):
                assert error_of(await c.get(path), 403)["code"] == "forbidden", (name, path)
            r = await c.post("/v1/tokens", json={"role": "admin", "namespaces": ["*"]})
            assert error_of(r, 403)["details"]["needs"] == "admin"
    assert len(await store.tokens()) == 6  # none was made by those attempts


async def test_one_idempotency_key_in_two_namespaces_is_two_sessions(tenants: Tenants) -> None:
    spec = chain_spec(1, name="same")
    headers = {"Idempotency-Key": "launch-1"}
    async with tenants.client("a_operate", "team-a") as a, \
            tenants.client("b_operate", "team-b") as b:
        ra = await a.post("/v1/sessions", json={"spec": spec}, headers=headers)
        rb = await b.post("/v1/sessions", json={"spec": spec}, headers=headers)
        assert ra.status_code == rb.status_code == 201
        assert ra.json()["session_id"] != rb.json()["session_id"]
        again = await a.post("/v1/sessions", json={"spec": spec}, headers=headers)
        assert again.status_code == 200 and again.json()["session_id"] == ra.json()["session_id"]
        bad = await a.post("/v1/sessions", json={"spec": spec},
                           headers={"Idempotency-Key": "has space"})
        assert "Idempotency-Key" in error_of(bad, 422)["message"]


async def test_a_revoked_token_is_refused_by_every_replica_within_a_second(
        tenants: Tenants, settings: DurableSettings) -> None:
    replica = make_app(settings, api_token=TOKEN)  # another API process on the same Redis
    async with asgi_client(replica) as _, tenants.client("a_read", "team-a") as one, \
            httpx.AsyncClient(transport=httpx.ASGITransport(app=replica),
                              base_url="http://api.test", headers={
                                  "Authorization": f"Bearer {tenants.tokens['a_read']}",
                                  NAMESPACE_HEADER: "team-a"}) as two:
        assert (await one.get("/v1/sessions")).status_code == 200
        assert (await two.get("/v1/sessions")).status_code == 200  # cached there now
        token_id = tenants.tokens["a_read"].split("_")[1]
        async with tenants.client(TOKEN) as admin:
            assert (await admin.delete(f"/v1/tokens/{token_id}")).status_code == 204
        revoked_at = time.monotonic()
        assert REVOCATION_S < 1
        await asyncio.sleep(max(0.0, revoked_at + 1.0 - time.monotonic()))
        for c in (one, two):
            assert error_of(await c.get("/v1/sessions"), 401)["code"] == "unauthorized"
        async with tenants.client(TOKEN) as admin:
            listed = {t["id"]: t for t in (await admin.get("/v1/tokens")).json()["items"]}
            assert listed[token_id]["state"] == "revoked"


async def test_an_expired_token_is_refused(tenants: Tenants) -> None:
    async with tenants.client(TOKEN) as admin:
        r = await admin.post("/v1/tokens", json={"role": "read", "namespaces": ["team-a"],
                                                 "expires_in_s": 1})
        created = r.json()
    async with tenants.client(created["token"], "team-a") as c:
        expires_s = created["info"]["expires_ms"] / 1000
        await asyncio.sleep(max(0.0, expires_s - time.time()) + REVOCATION_S + 0.1)
        assert error_of(await c.get("/v1/sessions"), 401)["code"] == "unauthorized"


async def test_guessing_tokens_is_throttled_per_address(tenants: Tenants) -> None:
    wrong = "sdt_0123456789ab_" + "x" * 43
    async with tenants.client(wrong, "team-a") as guesser:
        for _ in range(MAX_FAILURES):
            assert error_of(await guesser.get("/v1/sessions"), 401)
        r = await guesser.get("/v1/sessions")
        err = error_of(r, 429)
        assert err["code"] == "too_many_failures" and int(r.headers["retry-after"]) >= 1
    # While throttled, even the right token from that address waits.
    async with tenants.client("a_read", "team-a") as same_address:
        assert error_of(await same_address.get("/v1/sessions"), 429)


async def test_tokens_are_kept_as_digests_and_never_shown_again(tenants: Tenants,
                                                               store: Store) -> None:
    texts = list(tenants.tokens.values())
    async for key in store.redis.scan_iter(match=f"{store.keys.prefix}:*", count=1000):
        kind = await store.redis.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        raw = (str(await store.redis.hgetall(key)) if kind == "hash" else
               str(await store.redis.xrange(key)) if kind == "stream" else
               str(await store.redis.dump(key)))
        for text in texts:
            assert text not in raw and secret_of(text) not in raw, key
    async with tenants.client(TOKEN) as admin:
        listing = (await admin.get("/v1/tokens")).text
    for text in texts:
        assert secret_of(text) not in listing
    assert "digest" not in listing


async def test_every_control_action_is_audited_in_its_namespace(tenants: Tenants) -> None:
    sid = tenants.sessions["team-a"]
    operate_id = tenants.tokens["a_operate"].split("_")[1]
    async with tenants.client("a_operate", "team-a") as a:
        assert (await a.post(f"/v1/sessions/{sid}/pause")).status_code == 200
        assert (await a.post(f"/v1/sessions/{sid}/resume", json={})).status_code == 200
        assert (await a.post(f"/v1/sessions/{sid}/cancel")).status_code == 200
        assert (await a.delete(f"/v1/sessions/{sid}")).status_code == 204
        trail = (await a.get("/v1/audit", params={"limit": 100})).json()["items"]
    mine = [(e["action"], e["target"]) for e in trail if e["actor"] == operate_id]
    assert mine == [("delete", sid), ("cancel", sid), ("resume", sid), ("pause", sid)]
    assert all(e["namespace"] == "team-a" and e["source"] for e in trail)
    assert {("token_create", tenants.tokens["a_read"].split("_")[1])} <= {
        (e["action"], e["target"]) for e in trail}
    assert ("submit", sid) in {(e["action"], e["target"]) for e in trail}
    async with tenants.client("b_operate", "team-b") as b:
        theirs = (await b.get("/v1/audit", params={"limit": 100})).json()["items"]
    assert sid not in {e["target"] for e in theirs}
    async with tenants.client("a_read", "team-a") as reader:
        assert error_of(await reader.get("/v1/audit"), 403)["details"]["needs"] == "operate"


async def test_hostile_namespaces_and_token_requests_are_refused(tenants: Tenants) -> None:
    for namespace in ("Team-A", "-a", "a" * 64, "a b", "\xe9".encode("latin-1"), "*", ""):
        async with tenants.client(TOKEN, namespace) as c:
            r = await c.get("/v1/sessions")
            if namespace == "":
                continue  # an empty header is no header to some stacks; either way bounded
            assert error_of(r, 422)["code"] == "invalid_request", namespace
    async with tenants.client(TOKEN) as admin:
        for body in ({"role": "god", "namespaces": ["a"]}, {"role": "read", "namespaces": []},
                     {"role": "read", "namespaces": ["Bad NS"]},
                     {"role": "read", "namespaces": ["a"], "expires_in_s": -1},
                     {"role": "read", "namespaces": ["a"], "name": "x" * 101},
                     {"role": "read", "namespaces": ["a"], "name": "bell\x07"}):
            r = await admin.post("/v1/tokens", json=body)
            assert r.status_code == 422, (body, r.text)
        for bad in ("../../x", "0123456789ab", "ZZZZZZZZZZZZ"):
            r = await admin.delete(f"/v1/tokens/{bad}")
            assert r.status_code in (404, 422), (bad, r.text)
        r = await admin.get("/v1/audit", params={"before": "not-an-id"})
        assert r.status_code == 422


# -- the console ----------------------------------------------------------------------
def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found, "no CSRF field on the page"
    return found.group(1)


@asynccontextmanager
async def console_as(app: FastAPI, token: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://api.test",
                                 headers={"accept": "text/html"}) as c:
        r = await c.post("/ui/login", data={"token": token, "next": "/ui"})
        assert r.status_code == 303 and r.headers["location"] == "/ui", r.text
        yield c


async def test_the_console_shows_a_scoped_token_its_namespace_only(tenants: Tenants,
                                                                  store: Store) -> None:
    sid_a, sid_b = tenants.sessions["team-a"], tenants.sessions["team-b"]
    before = await redis_snapshot(store)
    async with console_as(tenants.app, tenants.tokens["b_operate"]) as b:
        page = (await b.get("/ui")).text
        assert sid_b in page and sid_a not in page and 'value="team-b"' in page
        assert "/ui/fleet" not in page  # no fleet link for a namespace's operator
        for path in (f"/ui/sessions/{sid_a}", f"/ui/sessions/{sid_a}/live",
                     f"/ui/sessions/{sid_a}/conversation", f"/ui/sessions/{sid_a}/feed",
                     f"/ui/sessions/{sid_a}/stream", f"/ui/sessions/{sid_a}/artifacts/x.md"):
            assert (await b.get(path)).status_code == 404, path
        csrf = csrf_of(page)
        for action in ("pause", "cancel", "resume"):
            r = await b.post(f"/ui/sessions/{sid_a}/{action}", data={"csrf": csrf})
            assert r.status_code == 404, (action, r.text)
        assert (await b.get("/ui/fleet")).status_code == 403
        r = await b.post("/ui/fleet/requeue", data={"csrf": csrf})
        assert r.status_code == 403
        r = await b.post("/ui/namespace", data={"csrf": csrf, "namespace": "team-a"})
        assert r.status_code == 403
        r = await b.post("/ui/namespace", data={"csrf": csrf, "namespace": "Bad NS"})
        assert r.status_code == 422
    assert await redis_snapshot(store) == before
    async with console_as(tenants.app, tenants.tokens["all_operate"]) as every:
        csrf = csrf_of((await every.get("/ui")).text)
        r = await every.post("/ui/namespace", data={"csrf": csrf, "namespace": "team-a"})
        assert r.status_code == 303
        page = (await every.get("/ui")).text
        assert sid_a in page and sid_b not in page


async def test_a_read_token_signs_in_but_cannot_act_and_revocation_signs_it_out(
        tenants: Tenants, store: Store) -> None:
    sid = tenants.sessions["team-a"]
    async with console_as(tenants.app, tenants.tokens["a_read"]) as reader:
        page = (await reader.get(f"/ui/sessions/{sid}")).text
        assert sid in page
        r = await reader.post(f"/ui/sessions/{sid}/pause", data={"csrf": csrf_of(page)})
        assert r.status_code == 403 and "operate" in r.text
        assert (await store.get_session(sid)).status.value == "running"
        token_id = tenants.tokens["a_read"].split("_")[1]
        async with tenants.client(TOKEN) as admin:
            assert (await admin.delete(f"/v1/tokens/{token_id}")).status_code == 204
        revoked_at = time.monotonic()
        await asyncio.sleep(max(0.0, revoked_at + 1.0 - time.monotonic()))
        r = await reader.get(f"/ui/sessions/{sid}")
        assert r.status_code == 303 and r.headers["location"].startswith("/ui/login")


async def test_the_console_acts_and_audits_for_an_operator(tenants: Tenants,
                                                           store: Store) -> None:
    sid = tenants.sessions["team-a"]
    async with console_as(tenants.app, tenants.tokens["a_operate"]) as operator:
        csrf = csrf_of((await operator.get("/ui")).text)
        r = await operator.post("/ui/namespace", data={"csrf": csrf, "namespace": "team-a"})
        assert r.status_code == 303
        r = await operator.post(f"/ui/sessions/{sid}/pause", data={"csrf": csrf})
        assert r.status_code == 303, r.text
    assert (await store.get_session(sid)).status.value == "paused"
    trail = await store.audit_page("team-a", 10)
    assert (trail[0].action, trail[0].target, trail[0].actor) == (
        "pause", sid, tenants.tokens["a_operate"].split("_")[1])


async def test_scoped_tokens_close_an_api_and_console_that_had_no_token(
        settings: DurableSettings, store: Store) -> None:
    from strands_durable.sessions.access import create_token

    open_app = make_app(settings)  # no DURABLE_API_TOKEN
    async with asgi_client(open_app) as anonymous:
        assert (await anonymous.get("/v1/sessions")).status_code == 200
        issued = await create_token(store, "read", ["default"], actor="test", source="test")
        await asyncio.sleep(REVOCATION_S + 0.1)  # the open API's cached "no tokens"
        assert error_of(await anonymous.get("/v1/sessions"), 401)
        r = await anonymous.get("/ui", headers={"accept": "text/html"})
        assert r.status_code == 303 and r.headers["location"].startswith("/ui/login")
        r = await anonymous.get("/openapi.json")
        assert r.status_code == 401
        headers = {"Authorization": f"Bearer {issued.token}"}
        assert (await anonymous.get("/v1/sessions", headers=headers)).status_code == 200


async def test_a_stream_opened_with_a_token_ends_when_it_is_revoked(
        tenants: Tenants, settings: DurableSettings) -> None:
    """Both SSE routes (events followed, the live stream) of an idle running session:
    open, then the token is revoked, then each ends with an `error` frame."""
    from helpers.api import uvicorn_server

    sid = tenants.sessions["team-a"]
    token_id = tenants.tokens["a_read"].split("_")[1]
    headers = {"Authorization": f"Bearer {tenants.tokens['a_read']}",
               NAMESPACE_HEADER: "team-a"}
    paths = (f"/v1/sessions/{sid}/events?follow=1", f"/v1/sessions/{sid}/stream")
    async with uvicorn_server(tenants.app) as url, \
            httpx.AsyncClient(base_url=url, timeout=30) as http, \
            http.stream("GET", paths[0], headers=headers) as events, \
            http.stream("GET", paths[1], headers=headers) as live:
        streams = [events.aiter_lines(), live.aiter_lines()]
        for lines, response in zip(streams, (events, live), strict=True):
            assert response.status_code == 200
            assert (await anext(lines)).startswith("retry:")  # open and following
        async with tenants.client(TOKEN) as admin:
            assert (await admin.delete(f"/v1/tokens/{token_id}")).status_code == 204
        for lines in streams:
            seen: list[str] = []
            async with asyncio.timeout(30):
                async for line in lines:
                    seen.append(line)
                    if line.startswith("data:") and "unauthorized" in line:
                        break
            assert "event: error" in seen, seen


async def test_schedules_in_the_console_operators_act_readers_look_all_audited(
        tenants: Tenants, store: Store) -> None:
    async with tenants.client(TOKEN) as admin:
        r = await admin.post("/v1/schedules", json={
            "name": "nightly", "spec": chain_spec(1, name="nightly"), "cron": "0 3 * * *"})
        assert r.status_code == 201, r.text
        async with tenants.client("all_operate", "team-a") as elsewhere:
            assert error_of(await elsewhere.get("/v1/schedules"), 403)
    async with console_as(tenants.app, tenants.tokens["all_operate"]) as operator:
        page = (await operator.get("/ui/schedules")).text
        assert "/ui/schedules/nightly/pause" in page
        csrf = csrf_of(page)
        r = await operator.post("/ui/schedules/nightly/pause", data={"csrf": csrf})
        assert r.status_code == 303, r.text
        assert (await store.get_schedule("nightly")).paused
        r = await operator.post("/ui/schedules/nightly/trigger", data={"csrf": csrf})
        assert r.status_code == 303
        r = await operator.post("/ui/schedules/nightly/explode", data={"csrf": csrf})
        assert r.status_code == 404
        r = await operator.post("/ui/schedules/nightly/delete", data={"csrf": "forged"})
        assert r.status_code == 403 and await store.get_schedule("nightly") is not None
    async with console_as(tenants.app, tenants.tokens["a_read"]) as reader:
        page = (await reader.get("/ui/schedules")).text
        assert "/ui/schedules/nightly/pause" not in page
        r = await reader.post("/ui/schedules/nightly/delete", data={"csrf": csrf_of(page)})
        assert r.status_code == 403
    trail = await store.audit_page("default", 20)
    done = [(e.action, e.target) for e in trail if e.target == "nightly"]
    assert done == [("schedule_trigger", "nightly"), ("schedule_pause", "nightly"),
                    ("schedule_create", "nightly")]
