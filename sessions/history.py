"""A session's event history: as documents (`durable history --json`, GET .../events) and
followed live until the session ends (GET .../events?follow=1, `durable watch`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from strands_durable.errors import SessionNotFound
from strands_durable.models import EventType
from strands_durable.store.store import Store

# The event a status change to a terminal status writes, atomically with it.
ENDING_EVENTS = frozenset({EventType.SESSION_COMPLETED, EventType.SESSION_FAILED,
                           EventType.SESSION_CANCELLED})
Entry = tuple[str, dict[str, str]]


def event_doc(entry_id: str, f: dict[str, str]) -> dict[str, Any]:
    doc: dict[str, Any] = {"id": entry_id, "type": f.get("type", ""), "step": f.get("step", ""),
                           "attempt": int(f.get("attempt") or 0), "worker": f.get("worker", ""),
                           "at": f.get("at", "")}
    if f.get("detail"):
        doc["detail"] = f["detail"]
    if f.get("tool"):  # a tool call's event
        doc.update(tool=f["tool"], call=int(f.get("call") or 0), outcome=f.get("outcome", ""))
        if f.get("duration_ms"):
            doc["duration_ms"] = float(f["duration_ms"])
    return doc


def event_docs(entries: list[Entry]) -> list[dict[str, Any]]:
    return [event_doc(entry_id, f) for entry_id, f in entries]


@dataclass(frozen=True)
class Idle:
    """Nothing new for a whole block: lets a follower send a keep-alive."""


async def _ended(store: Store, session_id: str) -> bool:
    """The session is over (terminal) or gone: nothing more will be written."""
    try:
        return (await store.get_session(session_id)).status.is_terminal
    except SessionNotFound:
        return True


async def follow_events(store: Store, session_id: str, after: str = "0-0", *,
                        block_ms: int = 5_000, count: int = 100,
                        ) -> AsyncIterator[Entry | Idle]:
    """The session's events after `after`, then each new one as it is written, until the
    session ends. Waits with XREAD BLOCK on the events stream (no polling sleeps);
    yields Idle when a block passes with nothing new. SessionNotFound if it never existed.
    """
    if (await store.get_session(session_id)).status.is_terminal:
        # Over already: what is there is all there will be; no need to wait for more.
        for entry in await store.events(session_id, after=after):
            yield entry
        return
    last = after
    while True:
        entries: list[Entry] = await store.wait_events(session_id, last, count, block_ms)
        for entry in entries:
            last = entry[0]
            yield entry
        ending = any(f.get("type") in ENDING_EVENTS for _, f in entries)
        if not entries:
            if await _ended(store, session_id):
                # Ended before we started waiting; one read without blocking drains it.
                for entry in await store.events(session_id, after=last):
                    yield entry
                return
            yield Idle()
        elif ending and await _ended(store, session_id) and len(entries) < count:
            return  # (a full batch may have more after the ending event: read on)

