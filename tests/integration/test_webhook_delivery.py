"""Webhooks on a real redis-server, a real worker (in process) and a real HTTP receiver
on a loopback port that verifies each signature with the `standardwebhooks` reference
and dedupes on webhook-id: every event a session has is recorded once, delivered, and
retried with backoff through an outage; leases, dead letters and retries."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace

import pytest
from helpers import free_port, wait_for
from prometheus_client import REGISTRY
from standardwebhooks.webhooks import Webhook

from bench.webhook_receiver import WebhookReceiver
from strands_durable.errors import ConfigError
from strands_durable.models import now_ms
from strands_durable.scheduler.service import SchedulerService
from strands_durable.scheduler.webhook_delivery import TransportFactory
from strands_durable.sessions.control import cancel, pause
from strands_durable.sessions.start import new_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.connect import open_store
from strands_durable.store.store import Store
from strands_durable.store.webhooks import WebhookEntry, webhook_id
from strands_durable.webhooks import ALLOW_SETTING, WebhookSubscription
from strands_durable.worker.consumer import StepConsumer
from strands_durable.worker.tools.net_guard import Reach, guarded_async_transport

pytestmark = pytest.mark.integration

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
OTHER_SECRET = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY"


def spec(steps: int = 2, fail: bool = False, hitl: bool = False) -> str:
    body = "".join(f"      - {{agent: a, input: \"step {i}\"}}\n" for i in range(steps))
    if hitl:
        body += "      - {type: hitl, prompt: \"Approve?\"}\n"
    script = ("  failure_policy: {retries: 0}\n  script:\n    rules:\n      - {error: boom}\n"
              if fail else "")
    return f"""
version: 0
name: hooked
runtime:
  provider: scripted
{script}agents:
  a: {{prompt: "You are a."}}
pattern:
  type: chain
  config:
    steps:
{body}"""


@pytest.fixture
def hooked(settings: DurableSettings) -> DurableSettings:
    return settings.model_copy(update={
        "scheduler_lock_ttl_ms": 600, "metrics_port": 0, "webhook_scan_ms": 50,
        "webhook_allow": "127.0.0.1", "webhook_secret": SECRET,
        "webhook_backoff_base_s": 0.2, "webhook_backoff_max_s": 1.0,
        "webhook_lease_s": 10.0, "webhook_timeout_s": 5.0})


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    reference = Webhook(SECRET)
    r = WebhookReceiver(free_port(), lambda body, headers: reference.verify(body, headers))
    yield r.start()
    r.stop()


def guard(settings: DurableSettings) -> TransportFactory:
    """The network guard `durable scheduler` gives (api/cli/serve.py)."""
    reach = Reach(settings.webhook_allow_list, ALLOW_SETTING)
    return lambda: guarded_async_transport(reach)


@asynccontextmanager
async def scheduler(settings: DurableSettings) -> AsyncIterator[SchedulerService]:
    store = open_store(settings)
    service = SchedulerService(settings, store, webhook_transport=guard(settings))
    task = asyncio.create_task(service.run())
    try:
        yield service
    finally:
        service.stop()
        await asyncio.gather(task, return_exceptions=True)
        await store.redis.aclose()


@asynccontextmanager
async def worker(settings: DurableSettings, store: Store) -> AsyncIterator[StepConsumer]:
    c = StepConsumer(settings, store)
    await c.start()
    try:
        yield c
    finally:
        await c.stop(grace_s=0)


async def submit(store: Store, url: str, text: str, **sub: object) -> str:
    planned = new_session(load_spec_text(text))
    hook = WebhookSubscription(url=url, **sub)  # type: ignore[arg-type]
    sid, _ = await store.create_session(replace(planned, webhook=hook.stored()))
    return sid


async def test_a_completed_session_is_delivered_once_signed(
        hooked: DurableSettings, store: Store, receiver: WebhookReceiver) -> None:
    before = REGISTRY.get_sample_value("durable_webhooks_delivered_total") or 0
    async with scheduler(hooked), worker(hooked, store):
        sid = await submit(store, receiver.url, spec())
        entries = await wait_for(lambda: store.list_webhooks("delivered", 10), 60,
                                 what="the completed event delivered")

        async def outbox_emptied() -> bool:
            # The gauge is set by the finding loop's next round after the delivery.
            return REGISTRY.get_sample_value("durable_webhook_outbox",
                                             {"state": "pending"}) == 0

        await wait_for(outbox_emptied, 30, what="the outbox gauge to show nothing pending")
    assert receiver.events_of(sid) == ["session.completed"]
    assert [e.event for e, _ in entries] == ["completed"]
    entry = entries[0][0]
    assert entry.id.startswith(f"msg_{sid}_") and entry.attempts == 1
    assert receiver.refused == 0 and receiver.repeats == 0
    assert REGISTRY.get_sample_value("durable_webhooks_delivered_total") == before + 1


async def test_each_status_event_and_the_filter(
        hooked: DurableSettings, store: Store, receiver: WebhookReceiver) -> None:
    async with scheduler(hooked), worker(hooked, store):
        failed = await submit(store, receiver.url, spec(fail=True))
        human = await submit(store, receiver.url, spec(steps=1, hitl=True))
        only_done = await submit(store, receiver.url, spec(steps=1, hitl=True),
                                 events=["completed"])
        await wait_for(lambda: _async(receiver.events_of(failed) == ["session.failed"]
                                      and receiver.events_of(human)
                                      == ["session.waiting_for_human"]),
                       60, what="failed and waiting_for_human events")
        paused = await submit(store, receiver.url, spec(steps=50))
        await pause(store, paused)
        await wait_for(lambda: _async("session.paused" in receiver.events_of(paused)), 60,
                       what="the paused event")
        await cancel(store, paused)
        await wait_for(lambda: _async(receiver.events_of(paused)
                                      == ["session.cancelled", "session.paused"]),
                       60, what="the cancelled event")
        assert receiver.events_of(only_done) == []  # its filter wants none of these


async def test_an_outage_is_ridden_out_with_backoff_each_event_processed_once(
        hooked: DurableSettings, store: Store, receiver: WebhookReceiver) -> None:
    receiver.stop()  # down: connection refused
    async with scheduler(hooked), worker(hooked, store):
        sids = [await submit(store, receiver.url, spec(steps=1)) for _ in range(4)]

        async def retried() -> bool:
            pending = await store.list_webhooks("pending", 20)
            return len(pending) == 4 and all(e.attempts >= 2 for e, _ in pending)

        await wait_for(retried, 60, what="every entry failed and retried at least once")
        pending = await store.list_webhooks("pending", 20)
        assert all(e.last_error and e.next_ms > 0 for e, _ in pending)
        receiver.start()
        await wait_for(lambda: _async(all(receiver.events_of(s) == ["session.completed"]
                                          for s in sids)), 60, what="all four delivered")
    assert len(receiver.processed) == 4 and receiver.refused == 0


async def test_a_wrong_secret_is_refused_and_retried_then_dead_then_retried(
        hooked: DurableSettings, store: Store, receiver: WebhookReceiver) -> None:
    short = hooked.model_copy(update={"webhook_max_age_s": 0.5})
    async with scheduler(short), worker(short, store):
        sid = await submit(store, receiver.url, spec(steps=1), secret=OTHER_SECRET)
        dead = await wait_for(lambda: store.list_webhooks("dead", 5), 60,
                              what="the entry dead-lettered")
    entry = dead[0][0]
    assert entry.session_id == sid and entry.last_status == 401 and receiver.refused >= 1
    assert OTHER_SECRET not in entry.last_error
    _retried, was = await store.retry_webhook(entry.id, now_ms())
    assert was == "dead" and (await store.webhook_entry(entry.id))[1] == "pending"


async def test_two_leaders_recording_one_session_record_each_event_once(
        hooked: DurableSettings, store: Store, receiver: WebhookReceiver) -> None:
    async with worker(hooked, store):
        sid = await submit(store, receiver.url, spec(steps=1))
        await wait_for(lambda: _status(store, sid, "completed"), 60, what="completion")
    a = SchedulerService(hooked, store).webhooks.finder
    b = SchedulerService(hooked, store).webhooks.finder
    score = float(now_ms())
    added = await asyncio.gather(*(f.visit(sid, "completed", score, now_ms())
                                   for f in (a, b, a, b)))
    assert sum(added) == 1
    assert await a.visit(sid, "completed", score + 1, now_ms()) == 0  # the cursor moved on
    depth = await store.webhook_depth()
    assert depth["pending"] == 1
    with pytest.raises(ConfigError, match="DURABLE_WEBHOOK_LEASE_S"):
        SchedulerService(hooked.model_copy(update={"webhook_lease_s": 4.0}), store)
    with pytest.raises(ConfigError, match="DURABLE_WEBHOOK_URL") as refused:
        SchedulerService(hooked.model_copy(update={"webhook_url": "http://10.9.9.9/",
                                                   "webhook_allow": ""}), store)
    assert SECRET not in str(refused.value)


async def test_a_lapsed_lease_is_claimed_again_and_a_stale_settle_is_refused(
        store: Store) -> None:
    sid = "3b241101-e2bb-4255-8caf-4136c566a962"
    shard = store.keys.shard(sid)
    entry = WebhookEntry(id=webhook_id(sid, "1-0"), session_id=sid, event="completed",
                         url="http://127.0.0.1:1/", body="{}", event_ms=1, recorded_ms=1)
    await store.redis.hset(store.keys.meta(sid), "status", "completed")
    verdict, added = await store.record_webhooks(sid, expected_cursor="", new_cursor="1-0",
                                                 seen_member=f"completed:{sid}",
                                                 seen_score=1.0, now_ms=100, entries=[entry])
    assert (verdict, added) == ("ok", 1)
    first = await store.claim_webhooks(shard, 100, 200, 10)
    assert [e.id for e in first] == [entry.id]
    assert await store.claim_webhooks(shard, 150, 250, 10) == []  # leased until 200
    again = await store.claim_webhooks(shard, 201, 300, 10)  # the first deliverer died
    assert [e.id for e in again] == [entry.id]
    assert not await store.settle_webhook(entry, lease_until_ms=200, outcome="delivered",
                                          due_ms=0, now_ms=202, keep_delivered=10)
    assert await store.settle_webhook(entry, lease_until_ms=300, outcome="delivered",
                                      due_ms=0, now_ms=202, keep_delivered=10)
    assert (await store.webhook_entry(entry.id))[1] == "delivered"


async def _async(value: bool) -> bool:
    return value


async def _status(store: Store, sid: str, status: str) -> bool:
    return (await store.get_session(sid)).status.value == status


async def test_writers_clocks_fast_or_slow_lose_no_event(
        hooked: DurableSettings, store: Store, receiver: WebhookReceiver) -> None:
    async with worker(hooked, store):
        fast, slow = [await submit(store, receiver.url, spec(steps=1)) for _ in range(2)]
        for sid in (fast, slow):
            await wait_for(lambda sid=sid: _status(store, sid, "completed"), 60,
                           what="completion")
    finder = SchedulerService(hooked, store).webhooks.finder
    shard, now = store.keys.shard(fast), now_ms()
    index = store.keys.index_status(shard, "completed")
    await store.redis.zrem(index, slow)  # it lands later, from a slow clock
    await store.redis.zadd(index, {fast: now + 3_600_000})  # a clock an hour ahead
    assert (await finder.round(now)).recorded == 1
    await store.redis.zadd(index, {slow: now - 30_000})
    assert (await finder.round(now + 1_000)).recorded == 1
    assert (await finder.round(now + 2_000)).recorded == 0
    assert {e.session_id for e, _ in await store.list_webhooks("pending", 10)} == {fast, slow}


async def test_deleting_a_session_drops_its_webhook_cursor_and_records_nothing_after(
        hooked: DurableSettings, store: Store, receiver: WebhookReceiver) -> None:
    from strands_durable.sessions.deletion import delete_session

    async with worker(hooked, store):
        sid = await submit(store, receiver.url, spec(steps=1))
        await wait_for(lambda: _status(store, sid, "completed"), 60, what="completion")
    finder = SchedulerService(hooked, store).webhooks.finder
    assert await finder.visit(sid, "completed", 1.0, now_ms()) == 1
    assert await store.redis.exists(store.keys.webhook_cursor(sid))
    await delete_session(store, sid)
    assert not await store.redis.exists(store.keys.webhook_cursor(sid))
    assert await finder.visit(sid, "completed", 2.0, now_ms()) == 0
    assert not await store.redis.exists(store.keys.webhook_cursor(sid))  # not written back


async def test_an_export_carries_the_subscription_but_never_its_secret(
        hooked: DurableSettings, store: Store, receiver: WebhookReceiver) -> None:
    from strands_durable.sessions.transfer import export_session, export_text

    sid = await submit(store, receiver.url, spec(steps=1), secret=OTHER_SECRET,
                       events=["failed"])
    text = export_text(await export_session(store, sid))
    assert OTHER_SECRET not in text and OTHER_SECRET.removeprefix("whsec_") not in text
    doc = json.loads(text)
    meta = dict(doc["meta"])
    kept = WebhookSubscription.from_stored(meta["webhook"])
    assert kept == WebhookSubscription(url=receiver.url, events=["failed"])


async def test_the_network_guard_refuses_a_private_receiver_at_delivery(
        hooked: DurableSettings, store: Store, receiver: WebhookReceiver) -> None:
    """A URL that passed the submit-time check (or was stored before the operator's
    DURABLE_WEBHOOK_ALLOW changed) still goes through the HTTP tools' network guard at
    each delivery: a loopback receiver not allowed gets nothing."""
    closed = hooked.model_copy(update={"webhook_allow": ""})
    async with scheduler(closed), worker(closed, store):
        await submit(store, receiver.url, spec(steps=1))

        async def refused() -> list[WebhookEntry]:
            return [e for e, _ in await store.list_webhooks("pending", 5) if e.attempts >= 1]

        [entry] = await wait_for(refused, 60, what="a refused attempt")
    assert "refused" in entry.last_error and "DURABLE_WEBHOOK_ALLOW" in entry.last_error
    assert receiver.requests == 0
