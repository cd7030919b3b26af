"""/v1/schedules through the ASGI app on a real redis-server: the life of a schedule,
hostile input answered 4xx in the error envelope, roles (read reads, operate changes) and
namespaces, and the clients' schedule methods on both backends."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from helpers.api import TOKEN, asgi_client, make_app

from strands_durable.client import AsyncClient
from strands_durable.client.errors import ClientError
from strands_durable.errors import InvalidInput, NotFound
from strands_durable.settings import DurableSettings

SPEC = """
version: 0
name: {name}
runtime: {{provider: scripted}}
agents:
  a: {{prompt: "You are a."}}
pattern:
  type: chain
  config:
    steps:
      - {{agent: a, input: "about {{{{ topic }}}}"}}
inputs:
  values: {{topic: tides}}
"""


def body(name: str = "hourly", **extra: Any) -> dict[str, Any]:
    return {"name": name, "spec": SPEC.format(name="report"), "cron": "0 * * * *", **extra}


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    return error


async def test_the_life_of_a_schedule(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/schedules", json=body(variables={"topic": "moons"},
                                                     timezone="Europe/Paris", jitter_s=5))
    assert r.status_code == 201, r.text
    made = r.json()
    assert r.headers["location"] == "/v1/schedules/hourly"
    assert made["variables"] == {"topic": "moons"} and made["timezone"] == "Europe/Paris"
    assert len(made["next_fire_ms"]) == 5 and "spec_json" not in made
    assert [s["name"] for s in (await client.get("/v1/schedules")).json()["items"]] == ["hourly"]
    patched = await client.patch("/v1/schedules/hourly", json={"cron": "@daily",
                                                               "overlap": "allow"})
    assert patched.status_code == 200 and patched.json()["cron"] == "@daily"
    assert (await client.post("/v1/schedules/hourly/pause")).json()["paused"] is True
    assert (await client.get("/v1/schedules/hourly")).json()["next_fire_ms"] == []
    run = await client.post("/v1/schedules/hourly/trigger")
    assert run.status_code == 200 and run.json()["outcome"] == "started"
    sid = run.json()["session_id"]
    session = (await client.get(f"/v1/sessions/{sid}")).json()
    assert session["workflow_name"] == "report" and session["variables"]["topic"] == "moons"
    new_spec = {"spec": SPEC.format(name="renamed"), "variables": {"topic": "stars"}}
    assert (await client.patch("/v1/schedules/hourly", json=new_spec)).status_code == 200
    assert (await client.post("/v1/schedules/hourly/resume")).json()["paused"] is False
    shown = (await client.get("/v1/schedules/hourly")).json()
    assert shown["workflow_name"] == "renamed" and shown["recent_runs"][0]["session_id"] == sid
    assert (await client.delete("/v1/schedules/hourly")).status_code == 204
    assert error_of(await client.get("/v1/schedules/hourly"), 404)["code"] == \
        "schedule_not_found"
    assert error_of(await client.delete("/v1/schedules/hourly"), 404)


@pytest.mark.parametrize(("payload", "code", "named"), [
    (body(cron="99 * * * *"), "invalid_schedule", "--cron"),
    (body(cron="0 0 30 2 *"), "invalid_schedule", "never matches"),
    (body(cron="* " * 100), "invalid_request", "cron"),
    (body(timezone="Mars/Base"), "invalid_schedule", "time zone"),
    (body(timezone="../../etc/passwd"), "invalid_schedule", "time zone"),
    (body(overlap="sometimes"), "invalid_request", "overlap"),
    (body(jitter_s=-1), "invalid_schedule", "--jitter"),
    (body(jitter_s="5"), "invalid_request", "jitter_s"),
    (body(catchup_window_s=10**12), "invalid_schedule", "--catchup-window"),
    (body(name="a:b"), "invalid_request", "schedule name"),
    (body(name="x" * 65), "invalid_request", "name"),
    (body(name="\u202e"), "invalid_request", "schedule name"),
    (body(spec="version: 0\nname: broken\n"), "invalid_spec", "spec"),
    (body(unknown=1), "invalid_request", "unknown"),
    ({"name": "x", "spec": SPEC.format(name="r")}, "invalid_request", "cron"),
])
async def test_hostile_requests_are_refused_in_the_envelope(
        client: httpx.AsyncClient, payload: dict[str, Any], code: str, named: str) -> None:
    error = error_of(await client.post("/v1/schedules", json=payload), 422)
    assert error["code"] == code and named in str(error), error
    assert (await client.get("/v1/schedules")).json()["items"] == []  # nothing stored


async def test_paths_and_conflicts(client: httpx.AsyncClient) -> None:
    assert error_of(await client.get("/v1/schedules/a:b"), 422)
    assert error_of(await client.get("/v1/schedules/" + "x" * 300), 422)
    assert error_of(await client.post("/v1/schedules/nope/trigger"), 404)["code"] == \
        "schedule_not_found"
    assert (await client.post("/v1/schedules", json=body())).status_code == 201
    assert error_of(await client.post("/v1/schedules", json=body()), 409)["code"] == \
        "schedule_exists"
    assert error_of(await client.patch("/v1/schedules/hourly", json={"cron": "x"}),
                    422)["code"] == "invalid_schedule"
    assert error_of(await client.patch("/v1/schedules/nope", json={"cron": "@daily"}), 404)


@pytest.fixture
def authed(settings: DurableSettings) -> FastAPI:
    return make_app(settings, api_token=TOKEN)


async def token(app: FastAPI, role: str, namespaces: list[str]) -> str:
    async with asgi_client(app, token=TOKEN) as admin:
        r = await admin.post("/v1/tokens", json={"role": role, "namespaces": namespaces})
        assert r.status_code == 201, r.text
        return str(r.json()["token"])


async def test_read_reads_operate_changes_and_other_namespaces_see_nothing(
        authed: FastAPI) -> None:
    reader = await token(authed, "read", ["default"])
    operator = await token(authed, "operate", ["default"])
    team = await token(authed, "operate", ["team-a"])
    async with asgi_client(authed, token=operator) as c:
        assert (await c.post("/v1/schedules", json=body())).status_code == 201
    async with asgi_client(authed, token=reader) as c:
        assert (await c.get("/v1/schedules/hourly")).status_code == 200
        for method, path in [("POST", "/v1/schedules/hourly/trigger"),
                             ("POST", "/v1/schedules/hourly/pause"),
                             ("DELETE", "/v1/schedules/hourly")]:
            assert error_of(await c.request(method, path), 403)["details"]["needs"] == \
                "operate"
    async with asgi_client(authed, token=team) as c:
        c.headers["X-Durable-Namespace"] = "team-a"
        assert error_of(await c.get("/v1/schedules"), 403)["code"] == "forbidden"
        assert error_of(await c.post("/v1/schedules/hourly/trigger"), 403)


async def test_both_clients_manage_schedules(app: FastAPI, settings: DurableSettings) -> None:
    async with asgi_client(app):  # runs the app's lifespan: the store is prepared
        http = AsyncClient("http://api.test", transport=httpx.ASGITransport(app=app),
                           retries=0)
        redis = AsyncClient.connect_redis(settings.redis_url, key_prefix=settings.key_prefix)
        for n, client in enumerate((http, redis)):
            name = f"by-client-{n}"
            made = await client.create_schedule(name, SPEC.format(name="report"),
                                                cron="*/5 * * * *", overlap="buffer_one")
            assert made.overlap == "buffer_one"
            assert (await client.update_schedule(name, jitter_s=7)).jitter_s == 7
            assert (await client.pause_schedule(name)).paused
            assert not (await client.resume_schedule(name)).paused
            run = await client.trigger_schedule(name)
            assert run.outcome == "started" and run.session_id
            assert (await client.schedule(name)).recent_runs[0].session_id == run.session_id
            assert name in [s.name for s in (await client.schedules()).items]
            await client.delete_schedule(name)
            with pytest.raises(NotFound):
                await client.schedule(name)
            with pytest.raises(InvalidInput):
                await client.create_schedule("bad", SPEC.format(name="r"), cron="nope")
            with pytest.raises(ClientError):
                await client.schedule("a:b")
        await http.aclose()
        await redis.aclose()



async def test_the_console_lists_schedules_escaped(authed: FastAPI) -> None:
    async with asgi_client(authed, token=TOKEN) as api:
        hostile = SPEC.format(name="report").replace("name: report",
                                                     "name: \"<script>alert(1)</script>\"")
        r = await api.post("/v1/schedules", json={**body(), "spec": hostile})
        assert r.status_code == 201, r.text
        sid = (await api.post("/v1/schedules/hourly/trigger")).json()["session_id"]
    async with asgi_client(authed) as browser:
        browser.headers["accept"] = "text/html"
        signed = await browser.post("/ui/login", data={"token": TOKEN, "next": "/ui"})
        assert signed.status_code == 303
        page = await browser.get("/ui/schedules")
    assert page.status_code == 200 and "hourly" in page.text and "0 * * * *" in page.text
    assert f"/ui/sessions/{sid}" in page.text
    assert "<script>alert(1)" not in page.text and "&lt;script&gt;alert(1)" in page.text
    assert 'href="/ui/schedules"' in page.text  # in the console's navigation


async def test_a_schedule_s_webhook_goes_to_its_runs_and_its_secret_never_back(
        client: httpx.AsyncClient, app: FastAPI) -> None:
    secret = "whsec_" + base64.b64encode(b"s" * 32).decode()
    hook = {"url": "https://hooks.example.com/durable", "events": ["completed"],
            "secret": secret}
    r = await client.post("/v1/schedules", json=body(webhook=hook))
    assert r.status_code == 201, r.text
    assert r.json()["webhook_url"] == hook["url"] and secret not in r.text
    listed = await client.get("/v1/schedules")
    assert secret not in listed.text and secret not in (await client.get(
        "/v1/schedules/hourly")).text
    sid = (await client.post("/v1/schedules/hourly/trigger")).json()["session_id"]
    record = await app.state.store.get_session(sid)
    assert json.loads(record.raw["webhook"])["url"] == hook["url"]
    refused = await client.patch("/v1/schedules/hourly",
                                 json={"webhook": {"url": "http://127.0.0.1:9/x"}})
    assert error_of(refused, 422)["code"] == "invalid_webhook"
    moved = await client.patch("/v1/schedules/hourly",
                               json={"webhook": {"url": "https://other.example.com/h"}})
    assert moved.json()["webhook_url"] == "https://other.example.com/h"
