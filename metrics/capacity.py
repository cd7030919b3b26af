"""Provider capacity's metrics (worker/capacity.py): time model requests waited for their
key's turn, throttled answers, and the limits in force per key as this worker last saw
them (every worker exports its view: dashboards take `max by (provider, model)`)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from strands_durable.metrics.process import CappedLabels

# Model ids come from specs: capped like agent ids.
model_label = CappedLabels(64)

CAPACITY_WAIT_SECONDS = Histogram(
    "durable_capacity_wait_seconds", "Time a model request waited for its provider key's "
    "capacity (limits, the fleet's shared backoff) before it was sent",
    ["provider", "model"], buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300))
CAPACITY_THROTTLED = Counter(
    "durable_capacity_throttled", "Model requests the provider answered with a throttle "
    "(429, 529, ThrottlingException): each backs the whole fleet off for the key",
    ["provider", "model"])
CAPACITY_RPM = Gauge(
    "durable_capacity_requests_per_minute", "Requests per minute in force for a provider "
    "key (declared or learned; 0: none), as this worker last saw it", ["provider", "model"])
CAPACITY_IN_FLIGHT_LIMIT = Gauge(
    "durable_capacity_in_flight_limit", "Requests at once in force for a provider key "
    "(declared or learned; 0: none), as this worker last saw it", ["provider", "model"])

CAPACITY_LEARNED_RPM = Gauge(
    "durable_capacity_learned_requests_per_minute", "Requests per minute the fleet learned "
    "for a provider key from throttling (0: none learned), as this worker last saw it",
    ["provider", "model"])
CAPACITY_IN_FLIGHT = Gauge(
    "durable_capacity_in_flight_requests", "Model requests of this worker holding a lease "
    "on their provider key now (sum over workers: the key's limit in use)",
    ["provider", "model"])

CAPACITY_WAITING = Gauge(
    "durable_capacity_waiting_requests", "Model requests of this worker's steps waiting now "
    "for their provider key's capacity (sum over workers)", ["provider", "model"])


def capacity_waiting(provider: str, model: str, change: int) -> None:
    CAPACITY_WAITING.labels(provider, model_label(model)).inc(change)


def capacity_waited(provider: str, model: str, seconds: float) -> None:
    CAPACITY_WAIT_SECONDS.labels(provider, model_label(model)).observe(seconds)


def capacity_throttled(provider: str, model: str) -> None:
    CAPACITY_THROTTLED.labels(provider, model_label(model)).inc()


def capacity_state(provider: str, model: str, rpm: float, in_flight_limit: int,
                   learned_rpm: float = 0.0) -> None:
    label = model_label(model)
    CAPACITY_RPM.labels(provider, label).set(rpm)
    CAPACITY_IN_FLIGHT_LIMIT.labels(provider, label).set(in_flight_limit)
    CAPACITY_LEARNED_RPM.labels(provider, label).set(learned_rpm)


def capacity_in_flight(provider: str, model: str, change: int) -> None:
    CAPACITY_IN_FLIGHT.labels(provider, model_label(model)).inc(change)
