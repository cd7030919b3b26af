"""The webhook outbox over HTTP (`GET /v1/webhooks`, `POST /v1/webhooks/{id}/retry`):
what an entry shows. Never its secret: a fingerprint at most, and of the URL only its
scheme, host, port and path (a query string may carry a token)."""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from strands_durable.models import iso_of_ms
from strands_durable.store.webhooks import WebhookEntry
from strands_durable.webhooks import fingerprint

WebhookStateName = Literal["pending", "in_flight", "delivered", "dead"]


def shown_url(url: str) -> str:
    """The URL without credentials, query or fragment."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(unreadable)"
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _iso(ms: int) -> str | None:
    return iso_of_ms(ms) if ms > 0 else None


class WebhookOut(BaseModel):
    """One outbox entry: a session event to deliver, and how delivering it went."""

    id: str = Field(description="The `webhook-id` header: one per session event")
    state: WebhookStateName
    session_id: str
    event: str = Field(description="completed, failed, cancelled, paused or waiting_for_human")
    url: str = Field(description="Where it goes (scheme, host, port and path only)")
    signing: str = Field(description="`session` (its own secret), `fleet` "
                                     "(DURABLE_WEBHOOK_SECRET) or `none`")
    secret_fingerprint: str = Field(description="sha256 prefix of the secret; '' for none")
    attempts: int
    last_status: int | None = Field(description="The receiver's last HTTP status")
    last_error: str | None
    event_at: str | None
    recorded_at: str | None
    next_attempt_at: str | None = Field(description="When a pending entry is due")
    delivered_at: str | None

    @classmethod
    def of(cls, entry: WebhookEntry, state: WebhookStateName, fleet_secret: str | None
           ) -> WebhookOut:
        secret = entry.secret or fleet_secret or ""
        signing = "session" if entry.secret else "fleet" if fleet_secret else "none"
        return cls(id=entry.id, state=state, session_id=entry.session_id, event=entry.event,
                   url=shown_url(entry.url), signing=signing,
                   secret_fingerprint=fingerprint(secret), attempts=entry.attempts,
                   last_status=entry.last_status or None, last_error=entry.last_error or None,
                   event_at=_iso(entry.event_ms), recorded_at=_iso(entry.recorded_ms),
                   next_attempt_at=_iso(entry.next_ms) if state == "pending" else None,
                   delivered_at=_iso(entry.delivered_ms))


class WebhookListQuery(BaseModel):
    """What a listing asks (the Redis client's checks, as the route's query)."""

    status: WebhookStateName = "pending"
    limit: int = Field(default=50, ge=1, le=500)


class WebhookList(BaseModel):
    items: list[WebhookOut]


class WebhookRetried(BaseModel):
    """A retried entry: due now, with a fresh age budget."""

    id: str
    was: Literal["pending", "dead"]
    webhook: WebhookOut
