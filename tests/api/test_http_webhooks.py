"""Webhooks over HTTP through the ASGI app on a real redis-server: a submit's `webhook`
(checked: a private or malformed URL, an unknown event or a bad secret is a 422 that
stores nothing), and the outbox's routes: list by state, retry a dead entry, 404 for an
unknown id, 422 for a malformed one, 409 while one is being delivered. No secret and no
URL query in any answer."""

from __future__ import annotations

import httpx
import pytest
from helpers.api import chain_spec, error_of, submit

from strands_durable.models import now_ms
from strands_durable.scheduler.service import SchedulerService
from strands_durable.settings import DurableSettings
from strands_durable.store.store import Store

pytestmark = pytest.mark.integration

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
URL = "https://hooks.example.com/in?token=sekrit-query"
UNKNOWN = "msg_00000000-0000-4000-8000-000000000000_1-0"
TOKEN = "webhooks-admin-token-0123456789"


@pytest.mark.parametrize("webhook", [
    {"url": "http://127.0.0.1:9/h"}, {"url": "http://169.254.169.254/latest"},
    {"url": "file:///etc/passwd"}, {"url": "https://u:p@example.com/"},
    {"url": "https://example.com/", "events": ["exploded"]},
    {"url": "https://example.com/", "secret": "whsec_c2hvcnQ="},
    {"url": "https://example.com/", "surprise": 1}, {"url": "x" * 5000}, "not an object"])
async def test_a_bad_webhook_is_refused_and_stores_nothing(
        client: httpx.AsyncClient, store: Store, webhook: object) -> None:
    r = await client.post("/v1/sessions", json={"spec": chain_spec(1), "webhook": webhook})
    err = error_of(r, 422)
    assert "whsec_c2hvcnQ=" not in r.text and len(err["message"]) < 1000
    assert (await client.get("/v1/sessions")).json()["items"] == []


async def test_list_retry_and_refusals(client: httpx.AsyncClient, store: Store,
                                       settings: DurableSettings) -> None:
    sid = await submit(client, chain_spec(3), webhook={"url": URL, "secret": SECRET})
    assert (await client.post(f"/v1/sessions/{sid}/cancel")).status_code == 200
    finder = SchedulerService(settings, store).webhooks.finder
    assert await finder.visit(sid, "cancelled", 1.0, now_ms()) == 1

    page = await client.get("/v1/webhooks")
    assert page.status_code == 200 and SECRET not in page.text and "sekrit" not in page.text
    [hook] = page.json()["items"]
    assert hook["event"] == "cancelled" and hook["state"] == "pending"
    assert hook["url"] == "https://hooks.example.com/in" and hook["signing"] == "session"
    assert hook["secret_fingerprint"].startswith("sha256:")

    shard = store.keys.shard(sid)
    [entry] = await store.claim_webhooks(shard, now_ms(), now_ms() + 60_000, 10)
    err = error_of(await client.post(f"/v1/webhooks/{hook['id']}/retry"), 409)
    assert "being delivered" in err["message"] or "in flight" in err["message"]
    leased = (await store.webhook_entry(entry.id))[0]
    lease = int(await store.redis.zscore(store.keys.webhooks(shard, "leased"), entry.id))
    assert await store.settle_webhook(leased, lease_until_ms=lease, outcome="dead", due_ms=0,
                                      now_ms=now_ms(), keep_delivered=10)
    dead = (await client.get("/v1/webhooks", params={"status": "dead"})).json()["items"]
    assert [d["id"] for d in dead] == [hook["id"]]

    r = await client.post(f"/v1/webhooks/{hook['id']}/retry")
    assert r.status_code == 200 and r.json()["was"] == "dead", r.text
    assert r.json()["webhook"]["state"] == "pending" and SECRET not in r.text
    assert (await client.get("/v1/webhooks", params={"status": "dead"})).json()["items"] == []

    assert error_of(await client.post(f"/v1/webhooks/{UNKNOWN}/retry"), 404)
    assert error_of(await client.post("/v1/webhooks/msg_nope/retry"), 422)
    assert error_of(await client.get("/v1/webhooks", params={"status": "gone"}), 422)
    assert error_of(await client.get("/v1/webhooks", params={"limit": 0}), 422)


@pytest.mark.parametrize("backend", ["http", "redis"])
async def test_both_client_backends_submit_list_and_retry(
        app: object, store: Store, settings: DurableSettings, backend: str) -> None:
    from strands_durable.client import AsyncClient
    from strands_durable.errors import InvalidInput, NotFound
    from strands_durable.webhooks import WebhookSubscription

    client = (AsyncClient("http://api", transport=httpx.ASGITransport(app=app))  # type: ignore[arg-type]
              if backend == "http" else
              AsyncClient.connect_redis(settings.redis_url, key_prefix=settings.key_prefix))
    async with client:
        hook = WebhookSubscription(url=URL, events=["cancelled"], secret=SECRET)
        sid = (await client.submit(chain_spec(3), webhook=hook)).session_id
        view = await store.session_webhook_view(sid)
        assert WebhookSubscription.from_stored(view.subscription) == hook
        with pytest.raises(InvalidInput) as refused:
            await client.submit(chain_spec(1), webhook=WebhookSubscription(
                url="http://10.1.1.1/x"))
        assert "DURABLE_WEBHOOK_ALLOW" in str(refused.value)
        await client.cancel(sid)
        finder = SchedulerService(settings, store).webhooks.finder
        assert await finder.visit(sid, "cancelled", 1.0, now_ms()) == 1
        [listed] = (await client.webhooks()).items
        assert listed.session_id == sid and listed.event == "cancelled"
        retried = await client.retry_webhook(listed.id)
        assert retried.was == "pending" and retried.webhook.id == listed.id
        with pytest.raises(NotFound):
            await client.retry_webhook(UNKNOWN)
        with pytest.raises(InvalidInput):
            await client.webhooks(status="exploded")


async def test_roles_and_namespaces(settings: DurableSettings, store: Store) -> None:
    """The outbox's routes need an admin over every namespace (api/auth.py: it holds
    every namespace's deliveries); each request still sees only its namespace's entries,
    and another namespace's entry is answered as absent (404)."""
    from helpers.api import asgi_client, make_app

    app = make_app(settings, api_token=TOKEN)
    async with asgi_client(app, token=TOKEN) as admin:
        r = await admin.post("/v1/tokens", json={"role": "operate", "namespaces": ["default"]})
        operator = str(r.json()["token"])
        sid = await submit(admin, chain_spec(3), webhook={"url": URL})
        assert (await admin.post(f"/v1/sessions/{sid}/cancel")).status_code == 200
        assert await SchedulerService(settings, store).webhooks.finder.visit(
            sid, "cancelled", 1.0, now_ms()) == 1
        listed = await admin.get("/v1/webhooks")
        assert listed.status_code == 200, listed.text
        [hook] = listed.json()["items"]
        admin.headers["X-Durable-Namespace"] = "team-a"
        assert (await admin.get("/v1/webhooks")).json()["items"] == []
        assert error_of(await admin.post(f"/v1/webhooks/{hook['id']}/retry"), 404)
    async with asgi_client(app, token=operator) as c:
        assert error_of(await c.get("/v1/webhooks"), 403)["details"]["needs"] == "admin"
        assert error_of(await c.post(f"/v1/webhooks/{hook['id']}/retry"), 403)
