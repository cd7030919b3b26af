"""Webhook metrics (scheduler/webhook_delivery.py, on the scheduler's leader): events
recorded into the outbox, deliveries, failed attempts, dead letters, and the outbox's
depth as the leader last read it."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

WEBHOOKS_RECORDED = Counter("durable_webhooks_recorded", "Session events written to the "
                            "webhook outbox, by event (completed, failed, cancelled, paused, "
                            "waiting_for_human)", ["event"])
WEBHOOKS_DELIVERED = Counter("durable_webhooks_delivered", "Webhook entries a receiver "
                             "accepted (a 2xx answer)")
WEBHOOK_ATTEMPTS_FAILED = Counter("durable_webhook_attempts_failed", "Webhook delivery "
                                  "attempts that failed (no answer, refused, not 2xx), each "
                                  "retried with backoff")
WEBHOOKS_DEAD = Counter("durable_webhooks_dead", "Webhook entries dead-lettered after "
                        "DURABLE_WEBHOOK_MAX_AGE_S of failed attempts")
WEBHOOK_OUTBOX = Gauge("durable_webhook_outbox", "Webhook entries in the outbox by state "
                       "(pending, in_flight, dead), read by the scheduler's leader; 0 on "
                       "standbys", ["state"])


def recorded(event: str, n: int = 1) -> None:
    WEBHOOKS_RECORDED.labels(event).inc(n)


def delivered() -> None:
    WEBHOOKS_DELIVERED.inc()


def attempt_failed() -> None:
    WEBHOOK_ATTEMPTS_FAILED.inc()


def dead() -> None:
    WEBHOOKS_DEAD.inc()


def outbox_depth(counts: dict[str, int]) -> None:
    for state in ("pending", "in_flight", "dead"):
        WEBHOOK_OUTBOX.labels(state).set(counts.get(state, 0))
