"""Pages of sessions for GET /v1/sessions, most recently updated first, merged across
shards, filtered by status, workflow name and update time.

The order is (update time, session id), both descending; a cursor is the last position
a page looked at, so the next page starts strictly after it however many sessions were
created meanwhile. A session updated between two pages moves to the front and is not
seen again by the same walk: the order is by last update, like `durable sessions list`.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import UTC, datetime

from strands_durable.errors import SessionNotFound
from strands_durable.models import SessionStatus
from strands_durable.store.store import SessionRecord, Store

# Above any real update time (ms); a double holds it exactly, as Redis scores are.
MAX_SCORE = 2**62
# Above any session id (UUIDs), so the first page includes every tie on its top score.
MAX_SID = "\U0010ffff"
# A filtered walk reads at most this many index entries per request, then hands back a
# cursor (with a short or empty page) rather than scanning a huge index in one go.
MAX_SCANNED = 2_000


def epoch_ms(value: datetime | None) -> int | None:
    """An update-time filter as the index's score (ms since the epoch)."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)  # a time without a zone is UTC, as stored
    return int(value.timestamp() * 1000)


@dataclass(frozen=True, order=True)
class Cursor:
    score: int
    sid: str


class BadCursor(ValueError):
    pass


def encode_cursor(cursor: Cursor) -> str:
    raw = f"{cursor.score}:{cursor.sid}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(text: str) -> Cursor:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
        score, sid = raw.split(":", 1)
        if not (score.isascii() and score.isdigit()):  # int() takes " 5" and "1_000"
            raise ValueError(score)
        cursor = Cursor(int(score), sid)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise BadCursor(f"cursor {text!r} is not one this API handed out") from None
    if not 0 <= cursor.score <= MAX_SCORE or not cursor.sid:
        raise BadCursor(f"cursor {text!r} is not one this API handed out")
    return cursor


@dataclass(frozen=True)
class ListQuery:
    limit: int = 50
    status: SessionStatus | None = None
    workflow: str | None = None
    updated_after_ms: int | None = None  # inclusive
    updated_before_ms: int | None = None  # inclusive
    cursor: Cursor | None = None
    namespace: str | None = None  # None: every namespace

    @property
    def filtered(self) -> bool:
        return self.workflow is not None or self.namespace is not None

    def start(self) -> Cursor:
        top = Cursor(min(self.updated_before_ms, MAX_SCORE)
                     if self.updated_before_ms is not None else MAX_SCORE, MAX_SID)
        return min(self.cursor, top) if self.cursor is not None else top


@dataclass(frozen=True)
class Page:
    records: list[SessionRecord]
    next_cursor: Cursor | None


async def _after(store: Store, shard: int, status: SessionStatus | None, cursor: Cursor,
                 floor: int, count: int) -> list[Cursor]:
    """The first `count` positions of one index strictly after `cursor` (and >= floor)."""
    found = [Cursor(int(score), sid) for sid, score in
             await store.index_at(shard, status, cursor.score)
             if sid < cursor.sid and cursor.score >= floor]
    found += [Cursor(int(score), sid) for sid, score in
              await store.index_below(shard, status, cursor.score, floor, count)]
    return found


async def _candidates(store: Store, q: ListQuery, cursor: Cursor, count: int) -> list[Cursor]:
    """The next `count` positions after `cursor` in the merged order of every shard."""
    floor = q.updated_after_ms if q.updated_after_ms is not None else 0
    merged: list[Cursor] = []
    for shard in range(store.keys.shards):
        merged += await _after(store, shard, q.status, cursor, floor, count)
    merged.sort(reverse=True)
    return merged[:count]


async def _matching(store: Store, q: ListQuery, positions: list[Cursor]) -> list[Cursor]:
    if not q.filtered or not positions:
        return positions
    labels = await store.session_labels([pos.sid for pos in positions])
    return [pos for pos, label in zip(positions, labels, strict=True)
            if label is not None and q.workflow in (None, label[0])
            and q.namespace in (None, label[1])]


async def list_page(store: Store, q: ListQuery) -> Page:
    records: list[SessionRecord] = []
    cursor = q.start()
    scanned = 0
    batch = max(q.limit, 100) if q.filtered else q.limit
    while True:
        positions = await _candidates(store, q, cursor, batch)
        scanned += len(positions)
        for pos in await _matching(store, q, positions):
            try:
                records.append(await store.get_session(pos.sid))
            except SessionNotFound:
                continue  # deleted between the index read and now
            if len(records) == q.limit:
                return Page(records, pos)
        if len(positions) < batch:
            return Page(records, None)  # the index has nothing after these
        cursor = positions[-1]
        if scanned >= MAX_SCANNED:
            return Page(records, cursor)

