"""Delete ended sessions older than N days (`durable sessions cleanup`): completed,
failed and cancelled ones (completed kept on request), never running or paused ones.

Candidates come from the per-status indexes (scored by last update), so a cleanup
reads only what it deletes. Each is re-checked and deleted under its session's lock,
so a session resumed meanwhile is left alone.
"""

from __future__ import annotations

import math

from strands_durable.errors import InvalidInput, SessionNotFound
from strands_durable.models import SessionStatus, now_ms
from strands_durable.sessions.control import session_lock
from strands_durable.sessions.deletion import delete_locked
from strands_durable.store.store import Store

DAY_MS = 86_400_000


def cutoff_ms(max_age_days: float, now: int) -> int:
    """Sessions last updated at or before this are old enough to delete."""
    if not math.isfinite(max_age_days) or max_age_days < 0:
        raise InvalidInput(f"max age (days) {max_age_days}: must be a number of days >= 0")
    return now - int(max_age_days * DAY_MS)


def statuses_to_clean(keep_completed: bool) -> tuple[SessionStatus, ...]:
    ended = (SessionStatus.COMPLETED, SessionStatus.FAILED, SessionStatus.CANCELLED)
    return tuple(s for s in ended if not (keep_completed and s == SessionStatus.COMPLETED))


async def _candidates(store: Store, statuses: tuple[SessionStatus, ...], cutoff: int,
                      limit: int | None = None) -> list[tuple[float, str]]:
    found: list[tuple[float, str]] = []
    for shard in range(store.keys.shards):
        for status in statuses:
            found += [(score, sid) for sid, score in
                      await store.index_until(shard, status, cutoff, limit)]
    return sorted(found)[:limit]  # oldest first


async def cleanup_sessions(store: Store, *, max_age_days: float, keep_completed: bool = False,
                           dry_run: bool = False, now: int | None = None,
                           limit: int | None = None, wait_s: float = 10) -> list[str]:
    """The ids deleted (or, with dry_run, that would be), oldest first: the `limit`
    oldest when given (the scheduler's retention deletes a batch per round). `now`
    (epoch ms) defaults to the clock; LockNotAcquired when another cleanup keeps running
    past `wait_s`."""
    cutoff = cutoff_ms(max_age_days, now_ms() if now is None else now)
    statuses = statuses_to_clean(keep_completed)
    found = await _candidates(store, statuses, cutoff, limit)
    if dry_run:
        return [sid for _, sid in found]
    deleted: list[str] = []
    # One cleanup at a time; each session is also locked against a concurrent resume.
    async with store.locked("cleanup", wait_s=wait_s):
        for _, sid in found:
            try:
                async with session_lock(store, sid):
                    record = await store.get_session(sid)
                    shard = store.keys.shard(sid)
                    score = await store.index_score(shard, record.status, sid)
                    if record.status not in statuses or score is None or score > cutoff:
                        continue  # resumed (or touched) since it was listed
                    await delete_locked(store, sid)
            except SessionNotFound:
                continue  # deleted by someone else meanwhile
            deleted.append(sid)
    return deleted
