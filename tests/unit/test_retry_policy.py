import random

import pytest

from strands_durable.worker.retry_policy import backoff_s, decide


@pytest.mark.parametrize(("strategy", "attempt", "expected"), [
    ("constant", 1, 2), ("constant", 5, 2),
    ("exponential", 1, 2), ("exponential", 2, 4), ("exponential", 3, 8), ("exponential", 9, 30),
])
def test_backoff(strategy: str, attempt: int, expected: float) -> None:
    assert backoff_s(strategy, attempt, 2, 30) == expected


def test_jittered_stays_within_bounds() -> None:
    rng = random.Random(7)
    delays = [backoff_s("jittered", 3, 1, 60, rng) for _ in range(200)]
    assert all(1 <= d <= 4 for d in delays) and len(set(delays)) > 100


@pytest.mark.parametrize(("retries", "attempt", "retryable", "retry"), [
    (2, 1, True, True), (2, 2, True, True), (2, 3, True, False),
    (0, 1, True, False), (5, 1, False, False),
])
def test_decide(retries: int, attempt: int, retryable: bool, retry: bool) -> None:
    d = decide(retries=retries, strategy="exponential", wait_min=1, wait_max=60,
               attempt=attempt, retryable=retryable)
    assert d.retry is retry
    if retry:
        assert d.delay_s == 2 ** (attempt - 1)
