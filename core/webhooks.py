"""Webhooks, the pure part: a subscription and its checks, the Standard Webhooks
signature, the retry schedule and a secret's fingerprint. No I/O: the scheduler's
leader finds the events and delivers them (scheduler/webhooks.py, store/webhooks.py).

A URL is checked twice. Here, statically, when it is given (submit, the fleet
setting): http(s), a host, no credentials in it, and no literal private, loopback or
link-local address unless the operator's DURABLE_WEBHOOK_ALLOW lists it. Then at each
delivery by the same network guard as the HTTP tools (every address the host resolves
to, checked where the socket is opened).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
from collections.abc import Sequence
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from strands_durable.addresses import literal_address, refused_address
from strands_durable.errors import InvalidInput

__all__ = ["ALLOW_SETTING", "WEBHOOK_EVENTS", "InvalidWebhook", "WebhookSubscription",
           "backoff_ms", "check_secret", "check_url", "fingerprint", "sign", "without_secret"]

# What a subscription may ask to hear about (`events`; none given: all of them).
WEBHOOK_EVENTS = ("completed", "failed", "cancelled", "paused", "waiting_for_human")
ALLOW_SETTING = "DURABLE_WEBHOOK_ALLOW"
MAX_URL_CHARS = 2048
SECRET_PREFIX = "whsec_"
# Standard Webhooks: a secret of 24 to 64 random bytes; we take 16 to 128.
SECRET_BYTES = (16, 128)


class InvalidWebhook(InvalidInput):
    """A webhook subscription that cannot be used (its URL, events or secret)."""

    code = "invalid_webhook"


def _allowed(host: str, allow: Sequence[str]) -> bool:
    """The host is listed by name, or is an address inside a listed IP or CIDR."""
    name = host.strip("[]").rstrip(".").lower()
    addr = literal_address(name)
    for entry in allow:
        entry = entry.strip()
        try:
            network = ipaddress.ip_network(entry.strip("[]"), strict=False)
        except ValueError:
            if entry.rstrip(".").lower() == name:
                return True
            continue
        if addr is not None and addr.version == network.version and addr in network:
            return True
    return False


def check_url(url: str, allow: Sequence[str] = ()) -> str:
    """`url` when a webhook may be sent there (statically); InvalidWebhook otherwise."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_CHARS:
        raise InvalidWebhook(f"a webhook URL is 1 to {MAX_URL_CHARS} characters")
    if any(ord(c) < 0x21 or c == "\x7f" for c in url):
        raise InvalidWebhook("a webhook URL has no spaces or control characters")
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        _ = parts.port  # a port that is not a number fails here
    except ValueError:
        raise InvalidWebhook("the webhook URL cannot be parsed") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidWebhook("a webhook URL is http:// or https://")
    if not host:
        raise InvalidWebhook("the webhook URL has no host")
    if parts.username is not None or parts.password is not None:
        raise InvalidWebhook("a webhook URL carries no credentials (user:password@); "
                             "sign with a secret instead")
    addr = literal_address(host)
    local_name = host.rstrip(".").lower() in ("localhost", "localhost.localdomain") \
        or host.rstrip(".").lower().endswith(".localhost")
    if (local_name or (addr is not None and refused_address(addr))) \
            and not _allowed(host, allow):
        raise InvalidWebhook(
            f"the webhook host {host} is a private, loopback or link-local address; "
            f"the operator may allow it in {ALLOW_SETTING} (host, IP or CIDR)")
    return url


def check_secret(secret: str) -> str:
    """A `whsec_<base64>` secret of 16 to 128 bytes; InvalidWebhook (never echoing it)."""
    if not isinstance(secret, str) or not secret.startswith(SECRET_PREFIX):
        raise InvalidWebhook(f"a webhook secret is {SECRET_PREFIX}<base64 of 24 to 64 "
                             "random bytes>")
    try:
        raw = base64.b64decode(secret[len(SECRET_PREFIX):], validate=True)
    except (binascii.Error, ValueError):
        raise InvalidWebhook(f"a webhook secret is {SECRET_PREFIX} and base64") from None
    if not SECRET_BYTES[0] <= len(raw) <= SECRET_BYTES[1]:
        raise InvalidWebhook(f"a webhook secret holds {SECRET_BYTES[0]} to {SECRET_BYTES[1]} "
                             "bytes")
    return secret


class WebhookSubscription(BaseModel):
    """Where a session's events go: a URL, the events wanted (all when none are named),
    and the signing secret (`whsec_...`; none: the fleet's DURABLE_WEBHOOK_SECRET)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(min_length=1, max_length=MAX_URL_CHARS,
                     description="http(s) URL the events are POSTed to")
    events: list[str] | None = Field(
        default=None, max_length=len(WEBHOOK_EVENTS),
        description=f"events wanted, of {', '.join(WEBHOOK_EVENTS)} (default: all)")
    secret: str | None = Field(default=None, repr=False, max_length=256,
                               description="whsec_<base64> signing secret (never shown "
                                           "back; default: the fleet's)")

    @field_validator("events")
    @classmethod
    def _known_events(cls, value: list[str] | None) -> list[str] | None:
        unknown = [e for e in value or () if e not in WEBHOOK_EVENTS]
        if unknown:
            raise ValueError(f"unknown webhook event(s) {unknown[:3]}; expected some of "
                             f"{', '.join(WEBHOOK_EVENTS)}")
        return value

    @field_validator("secret")
    @classmethod
    def _secret_form(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return check_secret(value)
        except InvalidWebhook as exc:
            raise ValueError(str(exc)) from None

    def checked(self, allow: Sequence[str]) -> WebhookSubscription:
        """Itself once its URL passes the static check against the operator's allow list."""
        check_url(self.url, allow)
        return self

    def wants(self, event: str) -> bool:
        return self.events is None or event in self.events

    def stored(self) -> str:
        """The text a session keeps (NewSession.webhook): what the leader reads back."""
        return self.model_dump_json(exclude_none=True)

    @classmethod
    def from_stored(cls, text: str) -> WebhookSubscription | None:
        """A stored subscription, or None for none (or one no longer readable)."""
        if not text:
            return None
        try:
            return cls.model_validate_json(text)
        except ValueError:
            return None


def without_secret(stored: str) -> str:
    """A stored subscription (a session's `webhook` meta field) as it may leave the
    fleet (an export): still a subscription, without its secret (where it is imported,
    that fleet's DURABLE_WEBHOOK_SECRET signs); '' when unreadable."""
    sub = WebhookSubscription.from_stored(stored)
    return sub.model_copy(update={"secret": None}).stored() if sub is not None else ""


def sign(secret: str, msg_id: str, timestamp: int, body: str) -> str:
    """The `webhook-signature` header value (Standard Webhooks v1): HMAC-SHA256 of
    `{id}.{timestamp}.{body}` keyed with the secret's base64 part, base64-encoded."""
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    digest = hmac.new(key, f"{msg_id}.{timestamp}.{body}".encode(), hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def backoff_ms(attempt: int, base_ms: int, cap_ms: int, jitter: float) -> int:
    """The wait before attempt `attempt + 1` after `attempt` failures: base * 2^(n-1),
    at most cap, then spread over its upper half by `jitter` in [0, 1) (so a receiver
    that comes back is not hit by every entry at the same instant)."""
    delay = min(cap_ms, base_ms * 2 ** min(max(attempt - 1, 0), 40))
    return int(delay / 2 + delay / 2 * min(max(jitter, 0.0), 1.0))


def fingerprint(secret: str | None) -> str:
    """What may be shown of a secret: a short digest that tells two apart, or ''."""
    if not secret:
        return ""
    return "sha256:" + hashlib.sha256(secret.encode()).hexdigest()[:12]
