"""`durable run SPEC --auto-resume` (seed 000, 4.3): find the latest failed or paused
session of the same spec (by hash) to resume instead of starting anew.

Every session is added to its shard's spec-hash index when created (or forked); the
per-status indexes are scored by last update. Their intersection (ZINTER) costs the
size of the smaller set, so finding the candidate never scans all sessions.
"""

from __future__ import annotations

from strands_durable.models import SessionStatus
from strands_durable.store.store import Store

RESUMABLE = (SessionStatus.FAILED, SessionStatus.PAUSED)


async def find_resumable(store: Store, spec_hash: str) -> str | None:
    """The most recently updated failed or paused session with this spec hash, or None."""
    best: tuple[float, str] | None = None
    for shard in range(store.keys.shards):
        for status in RESUMABLE:
            for sid, score in await store.spec_sessions(shard, spec_hash, status):
                if best is None or score > best[0]:
                    best = (score, sid)
    return best[1] if best else None
