"""Webhooks, the pure parts: the signature against the `standardwebhooks` reference, the
retry schedule, hostile URLs and secrets refused with a clear message that never echoes
a secret, the event mapping, what an outbox entry shows, and the scripts' contracts."""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError
from standardwebhooks.webhooks import Webhook

from strands_durable.api.schemas_webhooks import WebhookOut, shown_url
from strands_durable.scheduler.webhook_delivery import Attempt, settle_plan, signed_headers
from strands_durable.scheduler.webhook_finder import event_of, fleet_subscription, payload
from strands_durable.settings import DurableSettings, describe_settings_error
from strands_durable.store.script_library import binding_header
from strands_durable.store.webhooks import (
    WEBHOOK_SCRIPTS,
    ClaimArgs,
    ClaimKeys,
    RecordArgs,
    RecordKeys,
    RetryArgs,
    RetryKeys,
    SettleArgs,
    SettleKeys,
    WebhookEntry,
    check_webhook_id,
    webhook_id,
)
from strands_durable.webhooks import (
    InvalidWebhook,
    WebhookSubscription,
    backoff_ms,
    check_secret,
    check_url,
    fingerprint,
    sign,
    without_secret,
)

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SID = "3b241101-e2bb-4255-8caf-4136c566a962"
LUA = Path(__file__).resolve().parents[2] / "store" / "lua"


def entry(**changes: object) -> WebhookEntry:
    fields: dict[str, object] = {
        "id": webhook_id(SID, "1700000000000-0"), "session_id": SID, "event": "completed",
        "url": "https://hooks.example.com/in?token=abc", "body": '{"type":"session.completed"}',
        "event_ms": 1_700_000_000_000, "recorded_ms": 1_700_000_000_100,
        "budget_from_ms": 1_700_000_000_100}
    return WebhookEntry(**{**fields, **changes})  # type: ignore[arg-type]


def test_the_signature_verifies_with_the_reference_and_matches_the_specs_example() -> None:
    # The Standard Webhooks specification's own example.
    assert sign(SECRET, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, '{"test": 2432232314}') \
        == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    e = entry()
    headers = signed_headers(e, SECRET, 1_700_000_000)
    reference = Webhook(SECRET)
    with pytest.raises(Exception, match="timestamp"):  # too old for the reference: checked
        reference.verify(e.body, headers)
    now = int(time.time())
    assert reference.verify(e.body, signed_headers(e, SECRET, now)) == json.loads(e.body)
    assert signed_headers(e, SECRET, now)["webhook-signature"] == reference.sign(
        e.id, datetime.fromtimestamp(now, tz=UTC), e.body)
    with pytest.raises(Exception):  # noqa: B017 - the reference's own error type
        Webhook("whsec_" + base64.b64encode(b"another secret of ours!!").decode()).verify(
            e.body, signed_headers(e, SECRET, now))
    assert "webhook-signature" not in signed_headers(e, None, now)  # no secret: unsigned


def test_the_backoff_doubles_to_its_cap_and_jitter_stays_in_the_upper_half() -> None:
    base, cap = 5_000, 3_600_000
    assert [backoff_ms(n, base, cap, 0.999999) for n in range(1, 6)] == \
        [4999, 9999, 19999, 39999, 79999]
    assert [backoff_ms(n, base, cap, 0.0) for n in range(1, 4)] == [2500, 5000, 10000]
    assert backoff_ms(30, base, cap, 1.0) == cap and backoff_ms(10_000, base, cap, 0.5) <= cap
    assert backoff_ms(0, base, cap, 0.0) == 2500  # never below half the base
    # Up to a day of attempts: about 30 at these defaults, not thousands.
    waited, attempts = 0, 0
    while waited < 86_400_000:
        attempts += 1
        waited += backoff_ms(attempts, base, cap, 1.0)
    assert 25 <= attempts <= 40


def test_settle_plan_retries_until_the_age_budget_then_dead() -> None:
    s = DurableSettings(webhook_backoff_base_s=1, webhook_backoff_max_s=10,
                        webhook_max_age_s=60)
    e = entry(attempts=2, budget_from_ms=1_000_000)
    assert settle_plan(e, Attempt(True, 204), 1_000_500, s, 0.5) == ("delivered", 0)
    outcome, due = settle_plan(e, Attempt(False, 503, "HTTP 503"), 1_000_500, s, 0.0)
    assert outcome == "retry" and due == 1_000_500 + 2_000  # 3rd attempt: 4 s, lower half
    assert settle_plan(e, Attempt(False, 0, "x"), 1_060_000, s, 0.5) == ("dead", 0)


@pytest.mark.parametrize("url", [
    "file:///etc/passwd", "ftp://example.com/x", "gopher://example.com", "http://",
    "https:///path", "http://user:pass@example.com/", "http://127.0.0.1:8080/",
    "http://[::1]/", "http://169.254.169.254/latest/meta-data", "http://10.0.0.1/",
    "http://192.168.1.1/", "http://localhost/", "http://api.localhost/",
    "http://[::ffff:127.0.0.1]/", "http://[64:ff9b::7f00:1]/", "http://0.0.0.0/",
    "http://example.com:notaport/", "http://exa mple.com/", "http://example.com/\x00",
    "https://example.com/" + "a" * 3000, "", "javascript:alert(1)"])
def test_hostile_urls_are_refused_with_a_bounded_message(url: str) -> None:
    with pytest.raises(InvalidWebhook) as refused:
        check_url(url)
    assert len(str(refused.value)) < 300 and "\n" not in str(refused.value)


def test_private_hosts_pass_only_where_the_operator_allows_them() -> None:
    assert check_url("http://127.0.0.1:9000/h", ["127.0.0.1"])
    assert check_url("http://10.1.2.3/h", ["10.0.0.0/8"])
    assert check_url("http://localhost:9000/h", ["localhost"])
    assert check_url("https://hooks.example.com/in")  # a public name: checked at delivery
    assert check_url("https://93.184.216.34/in")
    with pytest.raises(InvalidWebhook, match="DURABLE_WEBHOOK_ALLOW"):
        check_url("http://10.1.2.3/h", ["192.168.0.0/16", "example.com"])


@pytest.mark.parametrize("secret", [
    "plain-text-secret", "whsec_!!!not base64!!!", "whsec_" + base64.b64encode(b"short").decode(),
    "whsec_" + base64.b64encode(b"x" * 200).decode()])
def test_bad_secrets_are_refused_without_echoing_them(secret: str) -> None:
    with pytest.raises(InvalidWebhook) as refused:
        check_secret(secret)
    assert secret not in str(refused.value)
    with pytest.raises(ValidationError) as invalid:
        WebhookSubscription(url="https://example.com/", secret=secret)
    # What the API and the CLI show of it (api/errors.py: loc, msg, type; never input).
    assert all(secret not in e["msg"] for e in invalid.value.errors())


def test_a_subscription_hides_its_secret_and_checks_its_events() -> None:
    sub = WebhookSubscription(url="https://example.com/h", secret=SECRET, events=["failed"])
    assert SECRET not in repr(sub) and sub.wants("failed") and not sub.wants("completed")
    assert WebhookSubscription.from_stored(sub.stored()) == sub
    assert WebhookSubscription.from_stored("not json") is None
    shown = without_secret(sub.stored())
    assert SECRET not in shown and WebhookSubscription.from_stored(shown) == \
        sub.model_copy(update={"secret": None})
    assert without_secret("garbage") == ""
    with pytest.raises(ValidationError, match="unknown webhook event"):
        WebhookSubscription(url="https://example.com/h", events=["exploded"])
    with pytest.raises(ValidationError):
        WebhookSubscription.model_validate({"url": "https://example.com/h", "extra": 1})


def test_the_fleet_default_is_checked_and_its_secret_never_shown() -> None:
    assert fleet_subscription(DurableSettings()) is None
    sub = fleet_subscription(DurableSettings(webhook_url="https://example.com/h",
                                             webhook_secret=SECRET,
                                             webhook_events="completed,failed"))
    assert sub is not None and sub.events == ["completed", "failed"]
    bad = "whsec_c2hvcnQ="
    with pytest.raises(ValueError) as refused:
        fleet_subscription(DurableSettings(webhook_url="https://example.com/h",
                                           webhook_secret=bad))
    assert bad not in str(refused.value) and "DURABLE_WEBHOOK" in str(refused.value)
    with pytest.raises(ValueError, match="private"):
        fleet_subscription(DurableSettings(webhook_url="http://127.0.0.1/h"))
    assert SECRET not in repr(DurableSettings(webhook_secret=SECRET))
    with pytest.raises(ValidationError) as invalid:
        DurableSettings(webhook_url="x" * 3000, webhook_secret=SECRET)
    assert "x" * 100 not in describe_settings_error(invalid.value)


def test_events_map_to_webhook_events() -> None:
    assert event_of({"type": "session_completed"}) == "completed"
    assert event_of({"type": "session_failed"}) == "failed"
    assert event_of({"type": "session_cancelled"}) == "cancelled"
    assert event_of({"type": "session_paused", "detail": "paused by operator"}) == "paused"
    assert event_of({"type": "session_paused",
                     "detail": "waiting for human input at step:1: ok?"}) == "waiting_for_human"
    assert event_of({"type": "step_completed"}) is None
    body = json.loads(payload(SID, "wf", "failed", "1-0", {"at": "t", "detail": "boom"}))
    assert body == {"type": "session.failed", "timestamp": "t", "data": {
        "session_id": SID, "workflow_name": "wf", "event": "failed", "event_id": "1-0",
        "step": "", "detail": "boom"}}


def test_an_entry_shows_no_secret_no_query_and_no_credentials() -> None:
    shown = WebhookOut.of(entry(secret=SECRET), "pending", None).model_dump_json()
    assert SECRET not in shown and "token=abc" not in shown
    assert fingerprint(SECRET) in shown and '"signing":"session"' in shown
    fleet = WebhookOut.of(entry(), "dead", SECRET)
    assert fleet.signing == "fleet" and fleet.secret_fingerprint == fingerprint(SECRET)
    assert WebhookOut.of(entry(), "dead", None).signing == "none"
    assert shown_url("https://u:p@[::1]:8443/a/b?x=1#f") == "https://[::1]:8443/a/b"


def test_webhook_ids_round_trip_and_hostile_ids_are_refused() -> None:
    assert check_webhook_id(webhook_id(SID, "17-3")) == (SID, "17-3")
    for bad in ["", "msg_x_1-0", f"msg_{SID}_1-0; DEL *", f"msg_{SID}", "a" * 10_000,
                f"msg_{SID.upper()}_1-0"]:
        with pytest.raises(Exception, match="expected msg_") as refused:
            check_webhook_id(bad)
        assert len(str(refused.value)) < 300


@pytest.mark.parametrize(("name", "keys", "args"), [
    ("webhook_record", RecordKeys, RecordArgs), ("webhook_claim", ClaimKeys, ClaimArgs),
    ("webhook_settle", SettleKeys, SettleArgs), ("webhook_retry", RetryKeys, RetryArgs)])
def test_each_script_opens_with_its_contract(name: str, keys: type, args: type) -> None:
    assert name in WEBHOOK_SCRIPTS
    assert binding_header(keys, args) in (LUA / f"{name}.lua").read_text()


async def test_an_attempt_sends_signed_json_and_keeps_no_url_in_its_error() -> None:
    import httpx

    from strands_durable.scheduler.webhook_delivery import WebhookService

    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/down":
            raise httpx.ConnectError(f"cannot reach {request.url}")
        return httpx.Response(204 if request.url.path == "/ok" else 500)

    service = WebhookService(None, DurableSettings(webhook_secret=SECRET), None)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        ok = await service.attempt(client, entry(url="https://hooks.example.com/ok?token=t"))
        failed = await service.attempt(client, entry(url="https://hooks.example.com/500"))
        down = await service.attempt(client, entry(url="https://hooks.example.com/down?token=t"))
    assert ok == Attempt(True, 204) and failed == Attempt(False, 500, "HTTP 500")
    assert not down.ok and "token=t" not in down.error and "<url>" in down.error
    request = seen[0]
    assert request.headers["content-type"] == "application/json"
    assert Webhook(SECRET).verify(request.content, dict(request.headers)) == \
        json.loads(entry().body)
