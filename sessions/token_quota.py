"""Namespaces' quotas of model tokens per UTC day.

The worker counts each committed step's tokens (input + output, as the provider
reported them) in its namespace's counter of the day (store: `quota:<ns>:tokens:<day>`,
kept two days), after the commit, added up in the worker and written once a second
(worker/token_tally.py): a crash before the write misses those steps' tokens;
a step is never counted twice (only a commit that answered `ok` counts, and a replayed
journal's turns are in the one commit of the step). A submit in a namespace whose day
is spent is refused (TokensExceeded: HTTP 429 with Retry-After to the next UTC
midnight, CLI exit 1) or, with `over: queue`, queued paused until the day turns.
Running sessions are not stopped: their steps go on, and may take the day's count
past its quota.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime

from strands_durable.access import NamespaceQuota
from strands_durable.errors import Conflict
from strands_durable.store.store import Store

DAY_MS = 86_400_000


def utc_day(at_ms: int) -> str:
    """The UTC day of a time in ms: YYYY-MM-DD."""
    return _day_text(at_ms // DAY_MS)


@functools.lru_cache(maxsize=4)
def _day_text(day: int) -> str:  # a worker asks at every commit: one day's text, kept
    return datetime.fromtimestamp(day * (DAY_MS // 1000), UTC).strftime("%Y-%m-%d")


def next_midnight_ms(at_ms: int) -> int:
    """The next UTC midnight after `at_ms` (when the day's count starts again)."""
    return (at_ms // DAY_MS + 1) * DAY_MS


class TokensExceeded(Conflict):
    """The namespace's steps used its quota of model tokens for the day."""

    code = "quota_exceeded"

    def __init__(self, quota: NamespaceQuota, used: int, now_ms: int) -> None:
        self.quota = quota
        self.used = used
        self.resets_ms = next_midnight_ms(now_ms)
        self.retry_after_s = max(1, (self.resets_ms - now_ms + 999) // 1000)
        resets = datetime.fromtimestamp(self.resets_ms / 1000, UTC).isoformat()
        super().__init__(f"namespace {quota.namespace!r} used {used} model token(s) today, "
                         f"its quota of {quota.tokens_per_day} per day; it resets at {resets}")

    def details(self) -> dict[str, object]:
        return {"namespace": self.quota.namespace, "quota": "tokens_per_day",
                "tokens_per_day": self.quota.tokens_per_day, "used": self.used,
                "resets_at_ms": self.resets_ms}


async def tokens_spent(store: Store, quota: NamespaceQuota, now_ms: int) -> int | None:
    """Today's tokens when they reach the namespace's quota, else None."""
    if quota.tokens_per_day is None:
        return None
    used = await store.tokens_used(quota.namespace, utc_day(now_ms))
    return used if used >= quota.tokens_per_day else None
