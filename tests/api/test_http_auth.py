"""Bearer-token auth: with DURABLE_API_TOKEN set every route but /healthz answers 401
without the right token; without one set nothing asks for it."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from helpers.api import TOKEN, asgi_client, error_of, make_app

from strands_durable.api.auth import token_matches
from strands_durable.settings import DurableSettings

pytestmark = pytest.mark.integration

UNKNOWN = "00000000-0000-4000-8000-000000000000"


def every_route(app: FastAPI) -> list[tuple[str, str]]:
    """(method, concrete path) for every route the app serves: the OpenAPI schema's, and
    the two that serve the schema itself."""
    found = [("GET", "/docs"), ("GET", "/openapi.json")]
    for path, operations in app.openapi()["paths"].items():
        concrete = (path.replace("{session_id}", UNKNOWN).replace("{name}", "x.md")
                    .replace("{n}", "1").replace("{token_id}", "0123456789ab")
                    .replace("{namespace}", "team-a"))
        found += [(method.upper(), concrete) for method in sorted(operations)]
    return found


def test_the_route_table_is_complete() -> None:
    routes = set(every_route(make_app(DurableSettings())))
    assert {("GET", "/docs"), ("GET", "/openapi.json"), ("GET", "/metrics"),
            ("POST", "/v1/sessions"), ("DELETE", f"/v1/sessions/{UNKNOWN}"),
            ("POST", f"/v1/sessions/{UNKNOWN}/signal")} <= routes
    assert len(routes) == 41


@pytest.fixture
def authed_app(settings: DurableSettings) -> FastAPI:
    return make_app(settings, api_token=TOKEN)


async def test_every_route_but_healthz_needs_the_token(authed_app: FastAPI) -> None:
    routes = every_route(authed_app)
    async with asgi_client(authed_app) as anonymous:
        for method, path in routes:
            r = await anonymous.request(method, path, json={})
            if path == "/healthz":
                assert r.status_code == 200, r.text
                continue
            err = error_of(r, 401)
            assert err["code"] == "unauthorized", (method, path)
            assert r.headers["www-authenticate"] == "Bearer"
        for header in (f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", f"Basic {TOKEN}", TOKEN,
                       "Bearer"):
            r = await anonymous.get("/v1/sessions", headers={"Authorization": header})
            assert error_of(r, 401)["code"] == "unauthorized", header
    async with asgi_client(authed_app, token=TOKEN) as allowed:
        for method, path in routes:
            r = await allowed.request(method, path, json={})
            assert r.status_code != 401, (method, path, r.text)
        assert (await allowed.get("/v1/sessions")).status_code == 200
        assert (await allowed.get("/metrics")).status_code == 200


async def test_no_token_configured_means_no_auth(client: httpx.AsyncClient,
                                                 app: FastAPI) -> None:
    for method, path in every_route(app):
        r = await client.request(method, path, json={})
        assert r.status_code != 401, (method, path)
    # A header sent anyway is ignored.
    r = await client.get("/v1/sessions", headers={"Authorization": "Bearer whatever"})
    assert r.status_code == 200


@pytest.mark.parametrize(("expected", "presented", "ok"), [
    (None, None, True), (None, "x", True), ("s3cret", None, False),
    ("s3cret", "s3cret", True), ("s3cret", "s3cre", False), ("s3cret", "s3cretx", False),
    ("s3cret", "", False), ("sécret", "sécret", True),
])
def test_token_matches(expected: str | None, presented: str | None, ok: bool) -> None:
    assert token_matches(expected, presented) is ok


def test_an_empty_token_setting_means_no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DURABLE_API_TOKEN", "")
    assert DurableSettings().api_token is None
    monkeypatch.setenv("DURABLE_API_TOKEN", "abc")
    assert DurableSettings().api_token == "abc"
