"""Following a session's live stream (worker/live.py writes it, store/live.py keeps it):
its entries as typed documents, and the followers of one process, which wait for new
entries (one XREAD BLOCK per session, however many follow it) until the session has
ended and nothing more is there."""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import AsyncIterator
from typing import Literal

from pydantic import BaseModel, Field

from strands_durable.sessions.history import Idle
from strands_durable.store.store import Store

log = logging.getLogger("durable.api")

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


def id_order(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms or 0), int(seq or 0)


RECENT = 2_000  # entries a watch keeps for its followers to read without Redis


class _Watch:
    """One session's live stream, watched for all of this process's followers by one
    blocking read: a follower holds no Redis connection while it waits, and reads what
    is new from the entries the watch read (Redis only when it is further behind)."""

    def __init__(self, store: Store, session_id: str, block_ms: int) -> None:
        self.store = store
        self.session_id = session_id
        self.block_ms = block_ms
        self.newest = (0, 0)
        self.followers = 0
        self.changed = asyncio.Condition()
        self.task: asyncio.Task[None] | None = None
        # Every entry after `floor`, in order, as the watch read them (at most RECENT).
        self.floor: tuple[int, int] | None = None
        self.recent: collections.deque[tuple[tuple[int, int], str, dict[str, str]]] = \
            collections.deque()

    async def run(self) -> None:
        newest = await self.store.live_newest_id(self.session_id)
        self.floor = id_order(newest)
        await self._saw(newest)
        while True:
            try:
                entries = await self.store.live_wait(self.session_id, newest, 500,
                                                     self.block_ms)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis away: followers read on their own meanwhile
                log.debug("live watch of %s: %r", self.session_id, exc)
                await asyncio.sleep(self.block_ms / 1000)
                continue
            if entries:
                for entry_id, fields in entries:
                    self.recent.append((id_order(entry_id), entry_id, fields))
                while len(self.recent) > RECENT:
                    self.floor = self.recent.popleft()[0]
                newest = entries[-1][0]
                await self._saw(newest)

    def after(self, last: str) -> list[tuple[str, dict[str, str]]] | None:
        """The entries after `last` from what the watch read, or None when `last` is
        older than what it holds (the follower reads Redis)."""
        mark = id_order(last)
        if self.floor is None or mark < self.floor:
            return None
        return [(entry_id, fields) for order, entry_id, fields in self.recent
                if order > mark]

    async def _saw(self, newest: str) -> None:
        async with self.changed:
            self.newest = id_order(newest)
            self.changed.notify_all()

    async def newer_than(self, last: str, timeout_s: float) -> bool:
        """Wait until the stream has an entry after `last`; False after `timeout_s`."""
        mark = id_order(last)
        async with self.changed:
            try:
                await asyncio.wait_for(self.changed.wait_for(lambda: self.newest > mark),
                                       timeout_s)
            except TimeoutError:
                return False
        return True


class LiveFollowers:
    """The followers of live streams in one process (the API): each session's stream is
    read with one blocking read however many clients follow it, and each follower reads
    what is new (a short range read) when that read says there is some. 100 clients on
    20 sessions hold 20 blocking connections, not 100."""

    def __init__(self, store: Store, block_ms: int = 1_000, end_grace_s: float = 0.5) -> None:
        self.store = store
        self.block_ms = block_ms
        # A worker flushes its live buffer every DURABLE_LIVE_FLUSH_MS, apart from its
        # commit: a step's last text can land just after its session has ended. A
        # follower that finds the session ended waits this long once for more.
        self.end_grace_s = end_grace_s
        self._watches: dict[str, _Watch] = {}

    def _watch(self, session_id: str) -> _Watch:
        watch = self._watches.get(session_id)
        if watch is None:
            watch = self._watches[session_id] = _Watch(self.store, session_id, self.block_ms)
            watch.task = asyncio.get_running_loop().create_task(watch.run())
        watch.followers += 1
        return watch

    def _leave(self, watch: _Watch) -> None:
        watch.followers -= 1
        if watch.followers == 0:
            self._watches.pop(watch.session_id, None)
            if watch.task is not None:
                watch.task.cancel()

    async def follow(self, session_id: str, after: str = "0-0", count: int = 500
                     ) -> AsyncIterator[LiveEntry | Idle]:
        """The live entries after `after`, then each new one as it is written, until the
        session has ended and the stream holds nothing newer; Idle after a quiet while."""
        watch = self._watch(session_id)
        try:
            last = after
            graced = False
            looked = False  # at the session's status once its backlog was read
            while True:
                entries = watch.after(last)
                if entries is None:
                    entries = await self.store.live_entries(session_id, last, count)
                for entry_id, fields in entries:
                    last = entry_id
                    doc = LiveEntry.of(entry_id, fields)
                    if doc is not None:
                        yield doc
                if len(entries) == count:
                    continue
                if looked and await watch.newer_than(last, self.block_ms / 1000):
                    continue
                # Quiet for a while, or the backlog read: is the session over? (Looked at
                # only now, and with one field: with many followers, each new entry wakes
                # every one. A client that comes after the end waits no quiet while.)
                status = await self.store.status_of(session_id)
                if not looked:
                    looked = True
                    if status is not None and not status.is_terminal:
                        continue
                if status is not None and status.is_terminal and not graced:
                    graced = True
                    if await watch.newer_than(last, self.end_grace_s):
                        continue
                if status is None or status.is_terminal:
                    for entry_id, fields in await self.store.live_entries(session_id, last):
                        doc = LiveEntry.of(entry_id, fields)
                        if doc is not None:
                            yield doc
                    return
                yield Idle()
        finally:
            self._leave(watch)
