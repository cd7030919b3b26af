"""When a failed step runs again: pure decisions from the spec's runtime.failure_policy."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryDecision:
    retry: bool
    delay_s: float = 0.0


def backoff_s(strategy: str, attempt: int, wait_min: float, wait_max: float,
              rng: random.Random | None = None) -> float:
    """Delay before attempt `attempt + 1`, after `attempt` attempts failed (attempt >= 1)."""
    if strategy == "constant":
        return min(wait_min, wait_max) if wait_max else wait_min
    exponential = min(wait_max, wait_min * (2 ** (attempt - 1)))
    if strategy == "jittered":
        return (rng or random).uniform(min(wait_min, exponential), exponential)
    return exponential


def decide(*, retries: int, strategy: str, wait_min: float, wait_max: float, attempt: int,
           retryable: bool, rng: random.Random | None = None) -> RetryDecision:
    """`retries` extra attempts after the first; non-retryable errors fail at once."""
    if not retryable or attempt > retries:
        return RetryDecision(retry=False)
    return RetryDecision(retry=True,
                         delay_s=backoff_s(strategy, attempt, wait_min, wait_max, rng))
