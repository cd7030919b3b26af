"""Model output as it is written, for clients that follow a running step (issue 27):
`LiveTurns` watches a provider model's stream events and `LivePublisher` writes what it
saw to the session's live stream (store/live.py), batched every DURABLE_LIVE_FLUSH_MS.

Never on the commit's path: publishing only appends to a bounded buffer, and a writer
task flushes it; a full buffer drops deltas (counted) rather than slow the model, and a
failed write is logged and dropped. What a client reads is therefore a view, not the
record: the committed result is. Each entry names its step, attempt, agent and model
turn; an `attempt` entry opens every run of a step and says how many model turns it
replays from its journal (those are not streamed again as new text).

`LiveTurns` is not a model wrapper: the step sets it as `WATCHING` for its model, whose
stop check (worker/model_wrapper.py) hands it each event it reads anyway.

Entry kinds and their fields (all strings):
- `attempt`: step, attempt, agent, replayed (model turns taken from the journal), worker
  (a step re-run after its worker died opens another `attempt`, from another worker)
- `text`: step, attempt, agent, turn, text (consecutive deltas of one turn joined),
  at_ms (when its first delta was written: clients can tell how late they read it)
- `tool`: step, attempt, agent, turn, tool (a tool call the model asked for)
- `turn_end`: step, attempt, agent, turn, stop (the provider's stop reason)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field

from strands.models.model import Model
from strands.types.streaming import StreamEvent

from strands_durable.models import StepJob
from strands_durable.store.live import LiveBatch
from strands_durable.store.store import Store

log = logging.getLogger("durable.worker")

MAX_PENDING = 10_000  # entries waiting for a flush, all sessions together


@dataclass
class _Text:
    """A text entry being gathered: one per model turn and flush, not one per token."""

    where: dict[str, str]  # the turn's fields; the same object for all of one turn
    at_ms: int
    parts: list[str]

    def fields(self) -> dict[str, str]:
        return {"kind": "text", **self.where, "text": "".join(self.parts),
                "at_ms": str(self.at_ms)}


@dataclass
class LivePublisher:
    """One per worker process: buffers entries per session, flushes them together."""

    store: Store
    flush_s: float = 0.05
    maxlen: int = 2_000
    ttl_s: int = 3_600
    dropped: int = 0
    # One more at every flush: a text entry gathered before it is written already.
    generation: int = 0
    _pending: dict[str, list[dict[str, str] | _Text]] = field(default_factory=dict)
    _count: int = 0
    _writer: asyncio.Task[None] | None = None

    def text(self, session_id: str, where: dict[str, str], text: str) -> list[str] | None:
        """Start a text entry of the turn `where` with its first delta. The turn adds its
        next deltas to the list returned, until the next flush (`generation` changes);
        None: dropped."""
        if self._count >= MAX_PENDING:
            self.dropped += 1  # Redis is slow or away: the view thins, the step goes on
            return None
        entry = _Text(where, int(time.time() * 1000), [text])
        self._add(session_id, entry)
        return entry.parts

    def publish(self, session_id: str, entry: dict[str, str]) -> None:
        """Buffer a marker entry (attempt, tool, turn_end); never waits, never dropped."""
        self._add(session_id, dict(entry))

    def _add(self, session_id: str, entry: dict[str, str] | _Text) -> None:
        self._pending.setdefault(session_id, []).append(entry)
        self._count += 1
        self._start()

    def _start(self) -> None:
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_loop())

    async def _write_loop(self) -> None:
        while self._pending:
            await asyncio.sleep(self.flush_s)  # the batching window, by design
            await self.flush()

    async def flush(self) -> None:
        """Write what is buffered now (also at shutdown)."""
        pending, self._pending, self._count = self._pending, {}, 0
        self.generation += 1
        batches = [LiveBatch(sid, [e.fields() if isinstance(e, _Text) else e for e in entries])
                   for sid, entries in pending.items()]
        try:
            await self.store.live_append(batches, self.maxlen, self.ttl_s)
        except Exception as exc:  # a view, not the record: the step must not notice
            log.warning("live stream: %d entries not written (%r)",
                        sum(len(b.entries) for b in batches), exc)

    async def close(self) -> None:
        if self._writer is not None and not self._writer.done():
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
        if self._pending:
            await self.flush()


def step_fields(job: StepJob) -> dict[str, str]:
    return {"step": job.key, "attempt": str(job.attempt), "agent": job.agent}


def attempt_started(publisher: LivePublisher, job: StepJob, replayed_turns: int,
                    worker: str) -> None:
    publisher.publish(job.session_id, {"kind": "attempt", **step_fields(job),
                                       "replayed": str(replayed_turns), "worker": worker})


class LiveTurn:
    """One model turn as it streams: its text, tool calls and end, to the publisher."""

    __slots__ = ("_generation", "_parts", "publisher", "session_id", "where")

    def __init__(self, publisher: LivePublisher, session_id: str,
                 where: dict[str, str]) -> None:
        self.publisher = publisher
        self.session_id = session_id
        self.where = where  # the turn's fields; one object for the whole turn
        self._parts: list[str] | None = None  # the text entry this turn adds to
        self._generation = -1

    def see(self, event: StreamEvent) -> None:  # per stream event: kept cheap
        delta = event.get("contentBlockDelta")
        if delta is not None:
            text = delta["delta"].get("text")
            if not text:
                return
            publisher = self.publisher
            if self._parts is not None and self._generation == publisher.generation:
                self._parts.append(text)  # the entry is not written yet: one entry a flush
            else:
                self._parts = publisher.text(self.session_id, self.where, text)
                self._generation = publisher.generation
        elif "contentBlockStart" in event:
            tool = event["contentBlockStart"].get("start", {}).get("toolUse")
            if tool:
                self._publish({"kind": "tool", **self.where, "tool": str(tool.get("name", ""))})
        elif "messageStop" in event:
            stop = str(event["messageStop"].get("stopReason", ""))
            self._publish({"kind": "turn_end", **self.where, "stop": stop})

    def _publish(self, entry: dict[str, str]) -> None:
        self._parts = None  # text after a marker is a new entry, after the marker
        self.publisher.publish(self.session_id, entry)


class LiveTurns:
    """A running step's model turns, numbered after those its journal replays; handed
    each stream event by the model itself (worker/model_wrapper.py `WATCHING`), below
    the journal: only turns asked of the provider now stream."""

    def __init__(self, model: Model, publisher: LivePublisher, job: StepJob,
                 first_turn: int) -> None:
        self.model = model
        self.publisher = publisher
        self.session_id = job.session_id
        self.base = step_fields(job)
        self.turn = first_turn - 1

    def next_turn(self) -> LiveTurn:
        self.turn += 1
        return LiveTurn(self.publisher, self.session_id, {**self.base, "turn": str(self.turn)})
