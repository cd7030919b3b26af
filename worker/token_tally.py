"""Committed steps' model tokens per namespace and UTC day, added up in the worker and
written at most once a second (one INCRBY per namespace and day), not once a step: the
quota of tokens per day (sessions/token_quota.py) needs a count, not one more round trip
on every step's path. A worker that stops writes what it holds; one that crashes loses
up to a second of counts (the count already comes after the commit)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref

from strands_durable.store.store import Store

log = logging.getLogger("durable.worker")

FLUSH_S = 1.0


class TokenTally:
    """One per store (a worker's): tokens held until the next write."""

    def __init__(self, store: Store, flush_s: float = FLUSH_S) -> None:
        self.store = store
        self.flush_s = flush_s
        self._counts: dict[tuple[str, str], int] = {}
        self._writer: asyncio.Task[None] | None = None

    def add(self, namespace: str, day: str, tokens: int) -> None:
        if tokens <= 0:
            return
        key = (namespace, day)
        self._counts[key] = self._counts.get(key, 0) + tokens
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_loop())

    async def _write_loop(self) -> None:
        while self._counts:
            await asyncio.sleep(self.flush_s)  # the batching window, by design
            await self.flush()

    async def flush(self) -> None:
        counts, self._counts = self._counts, {}
        for (namespace, day), tokens in counts.items():
            try:
                await self.store.add_tokens(namespace, day, tokens)
            except Exception as exc:  # the steps are committed: a missed count fails none
                log.warning("namespace %s: %d token(s) of committed steps not counted (%r)",
                            namespace, tokens, exc)

    async def close(self) -> None:
        if self._writer is not None and not self._writer.done():
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
        await self.flush()


_tallies: weakref.WeakKeyDictionary[Store, TokenTally] = weakref.WeakKeyDictionary()


def tally_of(store: Store) -> TokenTally:
    tally = _tallies.get(store)
    if tally is None:
        tally = _tallies[store] = TokenTally(store)
    return tally


async def close(store: Store) -> None:
    """Write what the store's tally holds (a worker stopping)."""
    tally = _tallies.get(store)
    if tally is not None:
        await tally.close()
