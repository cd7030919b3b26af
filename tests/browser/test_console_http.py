"""The console and the offline docs over HTTP (the ASGI app, a real redis-server): the
sign-in cookie, CSRF, hostile ids and fields, open redirects, and /docs and /redoc
loading nothing from another host. No browser needed here."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI
from helpers import REPO
from helpers.api import asgi_client, chain_spec, make_app, submit, wait_status
from helpers.console import TOKEN

from strands_durable.api.console import auth
from strands_durable.settings import DurableSettings
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

HOSTILE = """
version: 0
name: "<script>alert('wf')</script>"
runtime: {provider: scripted}
agents:
  "<b>agent</b>": {prompt: "You echo."}
pattern:
  type: chain
  config:
    steps:
      - {agent: "<b>agent</b>", input: "<img src=x onerror=alert(1)>"}
"""


@pytest.fixture
def app(settings: DurableSettings) -> FastAPI:
    return make_app(settings, api_token=TOKEN)


@pytest.fixture
async def browser(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """A client that behaves like a signed-in browser (the cookie, Accept: text/html)."""
    async with asgi_client(app) as c:
        c.headers["accept"] = "text/html"
        r = await c.post("/ui/login", data={"token": TOKEN, "next": "/ui"})
        assert r.status_code == 303 and r.headers["location"] == "/ui"
        yield c


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found, "no CSRF field on the page"
    return found.group(1)


async def test_sign_in_sets_a_strict_http_only_cookie_without_the_token(app: FastAPI) -> None:
    async with asgi_client(app) as c:
        r = await c.get("/ui", headers={"accept": "text/html"})
        assert r.status_code == 303 and r.headers["location"] == "/ui/login?next=/ui"
        r = await c.post("/ui/login", data={"token": "nope", "next": "/ui"})
        assert r.status_code == 401 and "not the server" in r.text
        r = await c.post("/ui/login", data={"token": TOKEN, "next": "/ui"})
        cookie = r.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and TOKEN not in cookie
        assert (await c.get("/ui")).status_code == 200


@pytest.mark.parametrize("target", ["//evil.example/x", "https://evil.example/",
                                    "/ui\r\nSet-Cookie: x=1", "/v1/sessions", "javascript:1"])
def test_sign_in_never_redirects_off_the_console(target: str) -> None:
    assert auth.safe_next(target) == "/ui"


def test_a_forged_or_expired_cookie_is_refused() -> None:
    good = auth.issue("k", now=1000.0)
    assert auth.verify("k", good, now=1000.0).csrf
    nonce, expiry, mac = good.split(".")
    for bad in (f"{nonce}.{int(expiry) + 1}.{mac}", f"x{nonce}.{expiry}.{mac}", good + "0",
                "", "a.b", "a" * 500):
        with pytest.raises(auth.SignInRequired):
            auth.verify("k", bad, now=1000.0)
    with pytest.raises(auth.SignInRequired):
        auth.verify("other token", good, now=1000.0)
    with pytest.raises(auth.SignInRequired):
        auth.verify("k", good, now=1000.0 + auth.LIFETIME_S + 1)


async def completed(app: FastAPI, spec: str) -> str:
    """A session submitted through the API (with the bearer token), run to its end."""
    async with asgi_client(app, token=TOKEN) as api:
        sid = await submit(api, spec)
        await wait_status(api, sid, "completed")
    return sid


async def test_forms_need_this_browsers_csrf_token(app: FastAPI, browser: httpx.AsyncClient,
                                                   consumer: StepConsumer) -> None:
    sid = await completed(app, HOSTILE)
    html = (await browser.get(f"/ui/sessions/{sid}")).text
    for form in ({"reason": "x"}, {"csrf": "0" * 64}):
        r = await browser.post(f"/ui/sessions/{sid}/cancel", data=form)
        assert r.status_code == 403 and "csrf_failed" in r.text
    r = await browser.post(f"/ui/sessions/{sid}/cancel", data={"csrf": csrf_of(html)})
    assert r.status_code == 409 and "invalid_transition" in r.text  # completed: refused


async def test_hostile_fields_are_escaped(app: FastAPI, browser: httpx.AsyncClient,
                                          consumer: StepConsumer) -> None:
    sid = await completed(app, HOSTILE)
    for path in (f"/ui/sessions/{sid}", f"/ui/sessions/{sid}/live", "/ui"):
        html = (await browser.get(path)).text
        assert "<script>alert" not in html and "<img src=x" not in html, path
        assert "&lt;b&gt;agent&lt;/b&gt;" in html or path == "/ui", path
    assert "&lt;script&gt;alert(&#39;wf&#39;)&lt;/script&gt;" in (await browser.get("/ui")).text


@pytest.mark.parametrize("path", ["/ui/sessions/not-a-uuid", "/ui/sessions/%3Cscript%3E",
                                  "/ui/sessions/00000000-0000-4000-8000-000000000000",
                                  "/ui/sessions/00000000-0000-4000-8000-000000000000/live"])
async def test_unknown_or_bad_session_ids_are_a_clear_404_page(browser: httpx.AsyncClient,
                                                               path: str) -> None:
    r = await browser.get(path)
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html")
    assert "<script>" not in r.text and ("session" in r.text)


async def test_bad_filters_and_forms_say_what_is_wrong(browser: httpx.AsyncClient) -> None:
    r = await browser.get("/ui", params={"status": "<x>"})
    assert r.status_code == 422 and "status: &#39;&lt;x&gt;&#39; is not one of" in r.text
    r = await browser.get("/ui", params={"after": "yesterday"})
    assert r.status_code == 422 and "updated after" in r.text
    r = await browser.get("/ui", params={"cursor": "!!"})
    assert r.status_code == 422 and "invalid_cursor" in r.text
    csrf = csrf_of((await browser.get("/ui")).text)
    sid = "00000000-0000-4000-8000-000000000000"
    r = await browser.post(f"/ui/sessions/{sid}/fork",
                           data={"csrf": csrf, "checkpoint": "x"})
    assert r.status_code == 422 and "checkpoint" in r.text
    r = await browser.post(f"/ui/sessions/{sid}/fork",
                           data={"csrf": csrf, "checkpoint": "1", "max_steps": "-3"})
    assert r.status_code == 422 and "budgets.max_steps" in r.text
    r = await browser.post(f"/ui/sessions/{sid}/pause", content=b"{}",
                           headers={"content-type": "application/json"})
    assert r.status_code == 415


async def test_docs_and_redoc_are_offline_and_take_the_cookie(app: FastAPI,
                                                              browser: httpx.AsyncClient
                                                              ) -> None:
    for path in ("/docs", "/redoc"):
        html = (await browser.get(path)).text
        assert "/docs-assets/" in html and "cdn" not in html.lower(), path
        assert not re.search(r"""(src|href)=["']?https?://""", html), path
    assert (await browser.get("/openapi.json")).json()["info"]["title"] == "strands-durable"
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js"):
        r = await browser.get(f"/docs-assets/{asset}")
        assert r.status_code == 200 and len(r.content) > 100_000, asset
    async with asgi_client(app) as anonymous:
        r = await anonymous.get("/docs", headers={"accept": "text/html"})
        assert r.status_code == 303 and r.headers["location"] == "/ui/login?next=/docs"
        assert (await anonymous.get("/redoc")).status_code == 401
        assert (await anonymous.get("/openapi.json")).status_code == 401


# Each example's pattern drawn as its shape: its title, and a pattern (regex) that shows
# the shape was read.
SHAPES = {
    "chain-research.yaml": ("Chain: steps in order", "analyst"),
    "workflow-release-notes.yaml": ("Workflow: task graph", "after features, fixes"),
    "parallel-market-scan.yaml": ("Parallel: branches, then reduce", "reduce"),
    "routing-support-triage.yaml": ("Routing: the router&#39;s choice", "billing"),
    "evaluator-optimizer-product-copy.yaml": ("Evaluator-optimizer: drafts and scores",
                                              "score 91"),
    "orchestrator-workers-vendor-review.yaml": ("Orchestrator-workers: rounds", "round 2"),
    "graph-code-review-loop.yaml": ("Graph: path taken", "loops of review"),
    # The accountant's step made two tool calls: the timeline counts them.
    "chain-calculator-tools.yaml": ("Chain: steps in order",
                                    r"<td>done</td><td>[\d.]+s</td><td>\d+</td><td>2</td>"),
}


@pytest.mark.parametrize("example", sorted(SHAPES))
async def test_every_example_pattern_is_drawn(app: FastAPI, browser: httpx.AsyncClient,
                                              consumer: StepConsumer, example: str) -> None:
    sid = await completed(app, (REPO / "examples" / example).read_text())
    html = (await browser.get(f"/ui/sessions/{sid}")).text
    title, detail = SHAPES[example]
    assert title in html and re.search(detail, html), example
    assert "raw state" not in html


async def test_sessions_are_paged_and_counted(app: FastAPI, browser: httpx.AsyncClient) -> None:
    async with asgi_client(app, token=TOKEN) as api:  # no worker: they stay running
        sids = [await submit(api, chain_spec(1, name=f"paged-{i % 2}")) for i in range(30)]
    first = (await browser.get("/ui")).text
    shown = re.findall(r'href="/ui/sessions/([0-9a-f-]{36})"', first)
    assert len(shown) == 25 and "Next page" in first and "First page" not in first
    cursor = re.search(r'cursor=([^"&]+)"', first)
    assert cursor
    second = (await browser.get(f"/ui?cursor={cursor.group(1)}")).text
    rest = re.findall(r'href="/ui/sessions/([0-9a-f-]{36})"', second)
    assert sorted(shown + rest) == sorted(sids) and "Next page" not in second
    assert "First page" in second
    counts = (await browser.get("/ui/counts")).text
    assert re.search(r'data-count="running">30<', counts)
    paged = (await browser.get("/ui", params={"workflow": "paged-1"})).text
    assert len(re.findall(r'href="/ui/sessions/[0-9a-f-]{36}"', paged)) == 15


@pytest.mark.parametrize("field", [{"checkpoint": "²"}, {"checkpoint": "1", "max_steps": "²"},
                                   {"checkpoint": "1", "max_tokens": "٣"}])
async def test_digits_python_reads_as_no_number_are_a_422_not_a_500(
        browser: httpx.AsyncClient, field: dict[str, str]) -> None:
    csrf = csrf_of((await browser.get("/ui")).text)
    sid = "00000000-0000-4000-8000-000000000000"
    r = await browser.post(f"/ui/sessions/{sid}/fork", data={"csrf": csrf, **field})
    assert r.status_code == 422 and r.headers["content-type"].startswith("text/html")


def test_a_cookie_or_csrf_token_with_odd_characters_is_refused_not_a_crash() -> None:
    for bad in ("a.1.é", "a.².x"):
        with pytest.raises(auth.SignInRequired):
            auth.verify("k", bad)
    key = auth._key(None)  # with no token set anyone can sign a cookie: its expiry is read
    with pytest.raises(auth.SignInRequired):
        auth.verify(None, "n.².{}".format(auth._mac(key, "n.²")))
    with pytest.raises(auth.BadCsrf):
        auth.check_csrf(auth.ConsoleUser("n", "0" * 64), "é")


async def test_a_non_ascii_csrf_field_is_a_403_page(browser: httpx.AsyncClient) -> None:
    sid = "00000000-0000-4000-8000-000000000000"
    r = await browser.post(f"/ui/sessions/{sid}/cancel", data={"csrf": "é" * 64})
    assert r.status_code == 403 and "csrf_failed" in r.text


async def test_the_fleet_page_shows_a_worker_declared_dead(
        store: Store, browser: httpx.AsyncClient) -> None:
    """Fast failover's declaration (store/lua/declare_dead.lua) on the fleet page: after
    how long a silence, by whom; the dead worker is not alive."""
    await store.redis.hset(store.keys.beats(0), "w-dead", "41")
    found = await store.declare_dead(0, "w-dead", "41", by="w-live", silent_ms=3_000,
                                     idle_ms=60_000, now_iso="2026-01-01T00:00:00.000Z",
                                     detail="no beat")
    assert found is not None and found.entries == ()
    html = (await browser.get("/ui/fleet")).text
    row = next(r for r in html.split("<tr>") if "w-dead" in r)
    assert "after 3.0s silent, by w-live" in row and "gone" in row
