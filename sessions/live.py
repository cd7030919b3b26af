"""Following a session's live stream (worker/live.py writes it, store/live.py keeps it):
its entries as typed documents, and a follower that waits for new ones (XREAD BLOCK)
until the session has ended and nothing more is there."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal

from pydantic import BaseModel, Field

from strands_durable.sessions.history import Idle, _ended
from strands_durable.store.store import Store

LiveKind = Literal["attempt", "text", "tool", "turn_end"]


class LiveEntry(BaseModel):
    """One entry of a session's live stream."""

    id: str = Field(description="Its stream id: Last-Event-ID resumes after it.")
    kind: LiveKind
    step: str
    attempt: int
    agent: str = ""
    turn: int = Field(default=0, description="The model turn within the step (text, tool, "
                      "turn_end).")
    text: str = Field(default="", description="What the model wrote (text).")
    tool: str = Field(default="", description="The tool the model asked for (tool).")
    stop: str = Field(default="", description="The provider's stop reason (turn_end).")
    replayed: int = Field(default=0, description="Model turns this attempt replays from "
                          "its journal instead of asking again (attempt).")
    worker: str = Field(default="", description="The worker that runs it (attempt): a step "
                        "run again after its worker died opens another attempt.")
    at_ms: int = Field(default=0, description="When the model wrote the first of its text, "
                       "ms since the epoch (text).")

    @classmethod
    def of(cls, entry_id: str, f: dict[str, str]) -> LiveEntry | None:
        """None for an entry this version does not know (a newer worker's)."""
        kind = f.get("kind", "")
        if kind not in ("attempt", "text", "tool", "turn_end"):
            return None
        return cls(id=entry_id, kind=kind, step=f.get("step", ""),  # type: ignore[arg-type]
                   attempt=int(f.get("attempt") or 0), agent=f.get("agent", ""),
                   turn=int(f.get("turn") or 0), text=f.get("text", ""),
                   tool=f.get("tool", ""), stop=f.get("stop", ""),
                   replayed=int(f.get("replayed") or 0), worker=f.get("worker", ""),
                   at_ms=int(f.get("at_ms") or 0))


async def follow_live(store: Store, session_id: str, after: str = "0-0", *,
                      block_ms: int = 1_000, count: int = 500
                      ) -> AsyncIterator[LiveEntry | Idle]:
    """The live entries after `after`, then each new one as it is written, until the
    session has ended and the stream holds nothing newer; Idle after a quiet block."""
    last = after
    while True:
        ended = await _ended(store, session_id)  # read before the entries: none is missed
        entries = (await store.live_entries(session_id, last, count) if ended
                   else await store.live_wait(session_id, last, count, block_ms))
        for entry_id, fields in entries:
            last = entry_id
            doc = LiveEntry.of(entry_id, fields)
            if doc is not None:
                yield doc
        if ended and len(entries) < count:
            return
        if not entries:
            yield Idle()
