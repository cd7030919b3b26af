"""`durable run SPEC --auto-resume` (seed 000, 4.3): find the latest resumable session of
the same spec (by hash) to continue instead of starting anew: a failed or paused one,
or one still `running` whose runner died (its runner lock is gone: kill -9, OOM, a
closed laptop). While such a session exists, or a live runner holds one, auto-resume
never starts a second one.

Every session is added to its shard's spec-hash index when created (or forked); the
per-status indexes are scored by last update. Their intersection (ZINTER) costs the
size of the smaller set, so finding the candidate never scans all sessions.
"""

from __future__ import annotations

from strands_durable.models import SessionStatus
from strands_durable.store.runner_lock import RunnerLock, RunnerState, SessionAlreadyRunning
from strands_durable.store.store import Store

RESUMABLE = (SessionStatus.FAILED, SessionStatus.PAUSED, SessionStatus.RUNNING)


async def resumable_now(store: Store, session_id: str, status: SessionStatus,
                        local: bool) -> bool:
    """No runner lives for it, and (when running) one has died: a session a runner ran
    (its lock's counter says so), or any running one of the local store, which has no
    fleet to run it. A running session submitted to a fleet is the fleet's. One a live
    runner holds is refused (SessionAlreadyRunning, naming it): another run, or another
    --auto-resume that got there first, continues it, and a second session would
    spend the same tokens again."""
    lock = RunnerLock(store, session_id)
    state = await lock.state()
    if state == RunnerState.LIVE:
        current = await lock.holder()
        if current is not None:
            raise SessionAlreadyRunning(session_id, current[0])
    return status != SessionStatus.RUNNING or state == RunnerState.DEAD or local


async def find_resumable(store: Store, spec_hash: str, local: bool = False) -> str | None:
    """The most recently updated resumable session with this spec hash, or None;
    SessionAlreadyRunning when a live runner holds a more recent one."""
    found: list[tuple[float, str, SessionStatus]] = []
    for shard in range(store.keys.shards):
        for status in RESUMABLE:
            found += [(score, sid, status)
                      for sid, score in await store.spec_sessions(shard, spec_hash, status)]
    for _, sid, status in sorted(found, reverse=True):
        if await resumable_now(store, sid, status, local):
            return sid
    return None
