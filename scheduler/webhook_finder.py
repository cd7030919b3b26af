"""Finding webhook events (the scheduler's leader): which sessions changed status, and
which of their events a subscription wants, recorded once into the outbox.

Cost: per shard and watched status, one range read of the status index from a little
before the newest score seen (DURABLE_WEBHOOK_LOOKBACK_MS, the allowance for writers'
clocks and late commits), one ZMSCORE over what it returns, and for each session not
looked at since its score changed: its subscription, its events after its cursor, one
script. Sessions whose status did not change cost nothing, however many there are.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from strands_durable.metrics import webhooks as metrics
from strands_durable.models import EventType
from strands_durable.planning.advance import WAITING_FOR_HUMAN
from strands_durable.settings import DurableSettings
from strands_durable.store.codec import dumps
from strands_durable.store.store import Store
from strands_durable.store.webhooks import (
    WATCHED_STATUSES,
    SessionWebhookView,
    WebhookEntry,
    webhook_id,
)
from strands_durable.webhooks import InvalidWebhook, WebhookSubscription, check_url

log = logging.getLogger("durable.webhooks")

PAGE = 500  # index entries and events read per call
MAX_VISITS = 2_000  # sessions read per shard and status in one round at most

_EVENTS = {EventType.SESSION_COMPLETED.value: "completed",
           EventType.SESSION_FAILED.value: "failed",
           EventType.SESSION_CANCELLED.value: "cancelled",
           EventType.SESSION_PAUSED.value: "paused"}


def event_of(fields: dict[str, str]) -> str | None:
    """The webhook event a session event is, or None: a pause for a human's answer is
    `waiting_for_human`, any other pause `paused`."""
    event = _EVENTS.get(fields.get("type", ""))
    if event == "paused" and fields.get("detail", "").startswith(WAITING_FOR_HUMAN):
        return "waiting_for_human"
    return event


def fleet_subscription(settings: DurableSettings) -> WebhookSubscription | None:
    """The fleet's default subscription (DURABLE_WEBHOOK_URL...), or None. ValueError
    (naming the setting, never its value) when it is set but unusable."""
    if not settings.webhook_url:
        return None
    events = [e.strip() for e in settings.webhook_events.split(",") if e.strip()] or None
    try:
        sub = WebhookSubscription(url=settings.webhook_url, events=events,
                                  secret=settings.webhook_secret)
        check_url(sub.url, settings.webhook_allow_list)
    except (ValueError, InvalidWebhook) as exc:
        raise ValueError(f"DURABLE_WEBHOOK_URL/_EVENTS/_SECRET: {_first_line(exc)}") from None
    return sub


def _first_line(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        message = str(first["msg"]).removeprefix("Value error, ")
        return f"{'.'.join(map(str, first['loc']))}: {message}"
    return str(exc).splitlines()[0]


def payload(session_id: str, workflow: str, event: str, event_id: str,
            fields: dict[str, str]) -> str:
    """The body sent (Standard Webhooks' `type`, `timestamp`, `data`)."""
    return dumps({"type": f"session.{event}", "timestamp": fields.get("at", ""),
                  "data": {"session_id": session_id, "workflow_name": workflow,
                           "event": event, "event_id": event_id,
                           "step": fields.get("step", ""),
                           "detail": fields.get("detail", "")[:2000]}})


@dataclass
class FinderRound:
    visited: int = 0
    recorded: int = 0


class WebhookFinder:
    def __init__(self, store: Store, settings: DurableSettings,
                 fleet: WebhookSubscription | None) -> None:
        self.store = store
        self.settings = settings
        self.fleet = fleet

    async def round(self, now: int) -> FinderRound:
        done = FinderRound()
        for shard in range(self.store.keys.shards):
            marks = await self.store.webhook_marks(shard)
            for status in WATCHED_STATUSES:
                await self._scan(shard, status, marks.get(status), now, done)
        return done

    async def _scan(self, shard: int, status: str, mark: float | None, now: int,
                    done: FinderRound) -> None:
        lookback = self.settings.webhook_lookback_ms
        if mark is None:  # the first round: from now on, not the keyspace's history
            mark = float(now)
            await self.store.set_webhook_mark(shard, status, mark)
        newest, offset, visits = mark, 0, 0
        while visits < MAX_VISITS:
            rows = await self.store.status_changes(shard, status, mark - lookback, offset, PAGE)
            seen = await self.store.seen_scores(shard, [f"{status}:{sid}" for sid, _ in rows])
            for (sid, score), was in zip(rows, seen, strict=True):
                if was != score:
                    done.recorded += await self.visit(sid, status, score, now)
                    visits += 1
                newest = max(newest, score)
                if visits >= MAX_VISITS:
                    break
            if len(rows) < PAGE:
                break
            offset += PAGE
        done.visited += visits
        # Never ahead of our own clock: a writer whose clock runs fast would otherwise
        # move the window past everyone else's changes (its own are deduped by `seen`).
        newest = min(newest, float(now))
        if newest > mark:
            await self.store.set_webhook_mark(shard, status, newest)
        await self.store.forget_seen(shard, newest - 2 * lookback - 1)

    async def visit(self, sid: str, status: str, score: float, now: int) -> int:
        """Record the session's wanted events since its cursor; returns how many."""
        view = await self.store.session_webhook_view(sid)
        sub = WebhookSubscription.from_stored(view.subscription) or self.fleet
        entries: list[WebhookEntry] = []
        cursor = view.cursor
        if not view.exists:
            pass
        elif sub is None:  # nothing wanted: move the cursor past what is there
            cursor = await self.store.last_event_id(sid) or view.cursor
        else:
            cursor = await self._collect(sid, view, sub, now, entries)
        verdict, added = await self.store.record_webhooks(
            sid, expected_cursor=view.cursor, new_cursor=cursor if cursor != view.cursor
            else "", seen_member=f"{status}:{sid}", seen_score=score, now_ms=now,
            entries=entries)
        if verdict == "ok" and added:
            for entry in entries:
                metrics.recorded(entry.event)
        return added

    async def _collect(self, sid: str, view: SessionWebhookView, sub: WebhookSubscription,
                       now: int, entries: list[WebhookEntry]) -> str:
        cursor = view.cursor
        # The fleet's secret is read at delivery (it may be rotated), never copied.
        secret = "" if sub is self.fleet else (sub.secret or "")
        while True:
            rows = await self.store.events_after(sid, cursor, PAGE)
            for event_id, fields in rows:
                cursor = event_id
                event = event_of(fields)
                if event is None or not sub.wants(event):
                    continue
                event_ms = int(event_id.split("-", 1)[0])
                entries.append(WebhookEntry(
                    id=webhook_id(sid, event_id), session_id=sid, event=event, url=sub.url,
                    body=payload(sid, view.workflow_name, event, event_id, fields),
                    event_ms=event_ms, recorded_ms=now, secret=secret, budget_from_ms=now,
                    next_ms=now, namespace=view.namespace))
            if len(rows) < PAGE:
                return cursor


__all__ = ["FinderRound", "WebhookFinder", "event_of", "fleet_subscription",
           "payload"]
