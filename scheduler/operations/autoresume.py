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
        spec_index = store.keys.index_spec(shard, spec_hash)
        for status in RESUMABLE:
            # Weight 0 for the spec index: the score is the status index's (update time).
            rows = await store.redis.zinter({store.keys.index_status(shard, status): 1,
                                             spec_index: 0}, withscores=True)
            for member, score in rows:
                sid = member.decode() if isinstance(member, bytes) else str(member)
                if best is None or float(score) > best[0]:
                    best = (float(score), sid)
    return best[1] if best else None
