"""What the scheduler watches over running sessions: runtime.budgets.max_duration_s, and
sessions that stopped making progress. Pure decisions first, then their reads and writes.

Workers check budgets when a step commits; a session whose step never ends (or whose
last step vanished) commits nothing, so only a clock-driven check catches it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from strands_durable.errors import LockNotAcquired
from strands_durable.models import Event, EventType, SessionStatus, now_iso
from strands_durable.planning.budgets import Spend, exceeded, limits
from strands_durable.sessions.control import session_lock
from strands_durable.spec.model import parse_spec
from strands_durable.store.store import RunningFields, Store

log = logging.getLogger("durable.scheduler")

SCHEDULER = "scheduler"  # the `worker` of the events the scheduler writes
STUCK_EVENT = EventType.SESSION_STUCK
PAGE = 500  # running sessions read per round trip
MAX_STUCK_CANDIDATES = 1_000  # per shard and check
MAX_SCAN = 20_000  # stream entries or timers looked through per shard and check
SCAN_PAGE = 1_000


# -- pure decisions ----------------------------------------------------------------
def duration_over(started_ms: int, limit_s: int | None, now_ms: int) -> str | None:
    """The pause reason if a session started at `started_ms` (paused time excluded) has
    run past `limit_s`; the wording is the commit-time budget check's."""
    if limit_s is None or not started_ms:
        return None
    spend = Spend(tokens=0, steps=0, duration_s=(now_ms - started_ms) / 1000)
    return exceeded(spend, {"max_duration_s": limit_s})


def stuck_among(candidates: Iterable[tuple[str, float]], busy: set[str]
                ) -> list[tuple[str, float]]:
    """Candidates (no commit for long enough) with nothing queued, in flight or timed."""
    return [(sid, score) for sid, score in candidates if sid not in busy]


def stuck_detail(idle_s: float) -> str:
    return (f"running, but no commit for {idle_s:.0f}s and no step of it is queued, "
            f"in flight or waiting on a timer; it will not progress by itself "
            f"(inspect it with `durable history SID`; `durable cancel SID` ends it)")


def session_of(job_json: str) -> str:
    try:
        return str(json.loads(job_json).get("session_id") or "")
    except (ValueError, AttributeError):
        return ""


# -- max_duration_s ------------------------------------------------------------------
@dataclass(frozen=True)
class _Running:
    session_id: str
    started_ms: int
    spec_digest: str
    overrides: dict[str, int]

    @classmethod
    def of(cls, fields: RunningFields) -> _Running:
        try:
            parsed = {k: int(v) for k, v in json.loads(fields.budget_overrides or "{}").items()}
        except (ValueError, AttributeError, TypeError):
            parsed = {}
        return cls(fields.session_id, fields.started_ms, fields.spec_digest, parsed)


class DurationGuard:
    """Pauses running sessions past their max_duration_s, as a commit would."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._spec_limits: dict[str, int | None] = {}  # spec digest -> its own limit

    async def check(self, now_ms: int) -> list[str]:
        paused = []
        for shard in range(self.store.keys.shards):
            start = 0
            while True:
                sids = await self.store.index_page(shard, SessionStatus.RUNNING, start, PAGE)
                if not sids:
                    break
                for running in await self._read(sids):
                    reason = duration_over(running.started_ms, await self._limit(running),
                                           now_ms)
                    if reason and await self._pause(running.session_id, now_ms):
                        paused.append(running.session_id)
                start += PAGE
        return paused

    async def _read(self, sids: Sequence[str]) -> list[_Running]:
        # Sessions deleted since the index read are left out.
        return [_Running.of(fields) for fields in await self.store.running_fields(sids)]

    async def _limit(self, running: _Running) -> int | None:
        if "max_duration_s" in running.overrides:
            return running.overrides["max_duration_s"]
        if running.spec_digest not in self._spec_limits:
            try:
                spec = parse_spec(await self.store.spec_json(running.session_id))
            except Exception as exc:  # one unreadable spec must not stop the others
                log.warning("session %s: cannot read its spec (%s)", running.session_id, exc)
                return None
            self._spec_limits[running.spec_digest] = limits(spec, {}).get("max_duration_s")
            while len(self._spec_limits) > 1024:
                self._spec_limits.pop(next(iter(self._spec_limits)))
        return self._spec_limits[running.spec_digest]

    async def _pause(self, sid: str, now_ms: int) -> bool:
        """Under the session's operator lock, re-read and pause if still over."""
        try:
            async with session_lock(self.store, sid):
                rows = await self._read([sid])
                if not rows:
                    return False
                reason = duration_over(rows[0].started_ms, await self._limit(rows[0]), now_ms)
                if reason is None:
                    return False  # resumed with a higher limit meanwhile
                at = now_iso()
                verdict, _ = await self.store.control(
                    sid, "pause", reason=reason, now_iso=at, now_ms=now_ms,
                    events=[Event(EventType.SESSION_PAUSED, worker=SCHEDULER, at=at,
                                  detail=reason)])
        except LockNotAcquired:
            return False  # an operator is busy with it; next check
        if verdict == "ok":
            log.info("session %s paused: %s", sid, reason)
        return verdict == "ok"


# -- stopped making progress -----------------------------------------------------------
class StuckWatch:
    """Finds running sessions with no commit for `stuck_after_s` and nothing of theirs
    queued, in flight or timed, and writes one `session_stuck` event for each."""

    def __init__(self, store: Store, stuck_after_s: float) -> None:
        self.store = store
        self.stuck_after_ms = int(stuck_after_s * 1000)

    async def check(self, now_ms: int) -> tuple[int, int]:
        """(sessions stuck now, newly flagged)."""
        stuck: list[tuple[str, float]] = []
        for shard in range(self.store.keys.shards):
            candidates = await self.store.index_until(
                shard, SessionStatus.RUNNING, now_ms - self.stuck_after_ms,
                MAX_STUCK_CANDIDATES)
            if not candidates:
                continue
            busy = await self._busy(shard)
            if busy is None:
                log.info("shard %d: backlog too long to tell stuck sessions from queued "
                         "ones; skipped this check", shard)
                continue
            stuck += stuck_among(candidates, busy)
        flagged = 0
        for sid, score in stuck:
            flagged += await self._flag(sid, score, now_ms)
        return len(stuck), flagged

    async def _busy(self, shard: int) -> set[str] | None:
        """Sessions with a timer or a stream entry (queued or in flight) on `shard`, or
        None past MAX_SCAN. Timers first: a timer promoted meanwhile moves to the
        stream's end, which the stream scan has yet to reach."""
        timers = await self.store.timer_jobs(shard, MAX_SCAN)
        if len(timers) > MAX_SCAN:
            return None
        busy = {session_of(job) for job in timers}
        start, seen = "-", 0
        while True:
            entries = await self.store.stream_page(shard, start, SCAN_PAGE)
            for entry_id, fields in entries:
                busy.add(fields.get("sid", ""))
                start = f"({entry_id}"
            seen += len(entries)
            if len(entries) < SCAN_PAGE:
                return busy
            if seen >= MAX_SCAN:
                return None

    async def _flag(self, sid: str, score: float, now_ms: int) -> int:
        """One `session_stuck` event per episode: none if it is the last event already;
        none if the session moved (a commit or control writes its meta and touches its
        index score) meanwhile. The checks and the write are one script."""
        event = Event(STUCK_EVENT, worker=SCHEDULER, at=now_iso(),
                      detail=stuck_detail((now_ms - score) / 1000))
        if not await self.store.flag_stuck(sid, score, event):
            return 0
        log.warning("session %s: %s", sid, stuck_detail((now_ms - score) / 1000))
        return 1
