"""What a provider says of its limits on every answer, not only on a 429.

OpenAI sends `x-ratelimit-limit-requests` (and Anthropic
`anthropic-ratelimit-requests-limit`) with each reply: the account's requests a minute. A
fleet that hears it from its first answer paces itself under the limit before it ever
meets it, instead of learning it from the first burst of 429s (each one a whole
Retry-After of the whole fleet). A provider's client reports what it heard through an
httpx response hook (`hear`) to whoever listens in this task (`listening`: the capacity
model around the request, worker/capacity_model.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from strands_durable.worker.providers.transient import limit_rpm_of

__all__ = ["Told", "hear", "listening"]


@dataclass
class Told:
    """What the provider named while this request ran (None: nothing)."""

    limit_rpm: int | None = None


# A holder, not the value: a task started inside the request (a copied context) still
# reports into the same one.
_listener: ContextVar[Told | None] = ContextVar("durable_told_limits", default=None)


@contextmanager
def listening() -> Iterator[Told]:
    """Collect what the provider names during the block (this task and those it starts)."""
    told, before = Told(), _listener.get()
    _listener.set(told)
    try:
        yield told
    finally:
        # set, not reset: an async generator may be closed from another context.
        _listener.set(before)


async def hear(response: Any) -> None:
    """An httpx response hook: note the requests-per-minute limit a reply names."""
    told = _listener.get()
    if told is None:
        return
    headers = getattr(response, "headers", None)
    if headers is None:
        return
    limit = limit_rpm_of({str(k).lower(): str(v)[:200]
                          for k, v in list(headers.items())[:200]})
    if limit is not None:
        told.limit_rpm = limit
