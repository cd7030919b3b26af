"""Delivering webhooks (the scheduler's leader): lease due outbox entries, POST each
signed as Standard Webhooks says, and settle the attempt: delivered, retried after an
exponential backoff with jitter, or dead-lettered once DURABLE_WEBHOOK_MAX_AGE_S has
passed since the entry was recorded (or retried by an operator).

At least once: an attempt whose answer is lost, or whose deliverer dies before it
settles, is sent again with the same `webhook-id` once its lease lapses; receivers
dedupe on it. The HTTP transport is given by the process that starts the scheduler
(`durable scheduler`: the HTTP tools' network guard with DURABLE_WEBHOOK_ALLOW), so a
webhook reaches only public addresses and those the operator allowed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Literal

import httpx

from strands_durable.metrics import webhooks as metrics
from strands_durable.models import now_ms
from strands_durable.scheduler.webhook_finder import WebhookFinder, fleet_subscription
from strands_durable.settings import DurableSettings
from strands_durable.store.outage import REDIS_DOWN_IN_LOOP
from strands_durable.store.store import Store
from strands_durable.store.webhooks import WebhookEntry
from strands_durable.webhooks import WebhookSubscription, backoff_ms, sign

log = logging.getLogger("durable.webhooks")

MAX_CONCURRENT = 16  # requests in flight at once
# Entries leased per shard and round: as many as go out at once, so each one's lease
# (DURABLE_WEBHOOK_LEASE_S) runs from about when its attempt starts.
CLAIM_BATCH = MAX_CONCURRENT
MAX_ERROR_CHARS = 300
USER_AGENT = "strands-durable-webhooks"

TransportFactory = Callable[[], httpx.AsyncBaseTransport]


@dataclass(frozen=True)
class Attempt:
    """How one delivery attempt ended: a 2xx (`ok`), or why not."""

    ok: bool
    status: int = 0
    error: str = ""


def settle_plan(entry: WebhookEntry, attempt: Attempt, now: int, settings: DurableSettings,
                jitter: float) -> tuple[Literal["delivered", "retry", "dead"], int]:
    """(outcome, due ms for a retry): pure, so the schedule is tested alone."""
    if attempt.ok:
        return "delivered", 0
    attempts = entry.attempts + 1
    if now - (entry.budget_from_ms or entry.recorded_ms) >= settings.webhook_max_age_s * 1000:
        return "dead", 0
    wait = backoff_ms(attempts, int(settings.webhook_backoff_base_s * 1000),
                      int(settings.webhook_backoff_max_s * 1000), jitter)
    return "retry", now + wait


def check_settings(settings: DurableSettings) -> WebhookSubscription | None:
    """The fleet's default subscription; ValueError naming the setting (never a value)
    when the webhook settings cannot work."""
    if settings.webhook_lease_s <= settings.webhook_timeout_s:
        raise ValueError(f"DURABLE_WEBHOOK_LEASE_S ({settings.webhook_lease_s:g}) must "
                         f"exceed DURABLE_WEBHOOK_TIMEOUT_S ({settings.webhook_timeout_s:g})"
                         ": an attempt's lease would lapse while it runs")
    return fleet_subscription(settings)


def signed_headers(entry: WebhookEntry, secret: str | None, timestamp: int) -> dict[str, str]:
    headers = {"webhook-id": entry.id, "webhook-timestamp": str(timestamp),
               "content-type": "application/json", "user-agent": USER_AGENT}
    if secret:
        headers["webhook-signature"] = sign(secret, entry.id, timestamp, entry.body)
    return headers


class WebhookService:
    """The leader's webhook task: find events, deliver due entries, every scan period."""

    def __init__(self, store: Store, settings: DurableSettings,
                 transport: TransportFactory | None) -> None:
        self.store = store
        self.settings = settings
        self.finder = WebhookFinder(store, settings, check_settings(settings))
        self.transport = transport
        self.rounds = 0  # rounds run while leading (tests wait on it)
        self._limit = asyncio.Semaphore(MAX_CONCURRENT)
        if transport is None:
            log.warning("webhooks: this scheduler records events but delivers none "
                        "(no network guard given; `durable scheduler` gives one)")

    async def run(self, stopping: asyncio.Event, leading: Callable[[], bool],
                  on_outage: Callable[[BaseException], None]) -> None:
        """Finding and delivering in two loops: a slow receiver never delays the finding."""
        client = (httpx.AsyncClient(transport=self.transport(), trust_env=False,
                                    follow_redirects=False)
                  if self.transport is not None else None)

        async def find() -> None:
            await self.finder.round(now_ms())
            metrics.outbox_depth(await self.store.webhook_depth())
            self.rounds += 1

        async def deliver() -> None:
            assert client is not None
            for shard in range(self.store.keys.shards):
                if leading():
                    await self.deliver_shard(client, shard)

        loops = [self._every(find, stopping, leading, on_outage)]
        if client is not None:
            loops.append(self._every(deliver, stopping, leading, on_outage))
        try:
            await asyncio.gather(*loops)
        finally:
            if client is not None:
                await client.aclose()

    async def _every(self, work: Callable[[], Awaitable[None]], stopping: asyncio.Event,
                     leading: Callable[[], bool],
                     on_outage: Callable[[BaseException], None]) -> None:
        while not stopping.is_set():
            if leading():
                try:
                    await work()
                except REDIS_DOWN_IN_LOOP as exc:
                    on_outage(exc)
                except Exception:
                    log.exception("webhooks: round failed")
            else:
                metrics.outbox_depth({})
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), self.settings.webhook_scan_ms / 1000)

    async def deliver_shard(self, client: httpx.AsyncClient, shard: int) -> int:
        now = now_ms()
        lease_until = now + int(self.settings.webhook_lease_s * 1000)
        entries = await self.store.claim_webhooks(shard, now, lease_until, CLAIM_BATCH)
        await asyncio.gather(*(self.deliver(client, e, lease_until) for e in entries))
        return len(entries)

    async def deliver(self, client: httpx.AsyncClient, entry: WebhookEntry,
                      lease_until: int) -> None:
        async with self._limit:
            attempt = await self.attempt(client, entry)
        now = now_ms()
        outcome, due = settle_plan(entry, attempt, now, self.settings, random.random())
        done = replace(entry, attempts=entry.attempts + 1, last_status=attempt.status,
                       last_error=attempt.error, next_ms=due,
                       delivered_ms=now if outcome == "delivered" else entry.delivered_ms)
        settled = await self.store.settle_webhook(
            done, lease_until_ms=lease_until, outcome=outcome, due_ms=due, now_ms=now,
            keep_delivered=self.settings.webhook_keep_delivered)
        if not settled:
            return  # the lease lapsed first: another round owns the entry now
        if outcome == "delivered":
            metrics.delivered()
            return
        metrics.attempt_failed()
        if outcome == "dead":
            metrics.dead()
            log.warning("webhook %s dead after %d attempts: %s", entry.id, done.attempts,
                        attempt.error)

    async def attempt(self, client: httpx.AsyncClient, entry: WebhookEntry) -> Attempt:
        headers = signed_headers(entry, entry.secret or self.settings.webhook_secret,
                                 int(time.time()))
        try:
            response = await client.post(entry.url, content=entry.body.encode(),
                                         headers=headers,
                                         timeout=self.settings.webhook_timeout_s)
        except (httpx.HTTPError, OSError, ValueError) as exc:
            # ValueError: the network guard's refusal (ToolRefused) and bad URLs. The URL
            # (its query may hold a token) never goes into the entry's error.
            return Attempt(False, 0, _short(exc).replace(entry.url, "<url>"))
        if 200 <= response.status_code < 300:
            return Attempt(True, response.status_code)
        return Attempt(False, response.status_code, f"HTTP {response.status_code}")


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:MAX_ERROR_CHARS]


__all__ = ["Attempt", "TransportFactory", "WebhookService", "check_settings", "settle_plan",
           "signed_headers"]
