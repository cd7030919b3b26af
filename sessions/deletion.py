"""Delete a session and everything it stored (`durable sessions delete`, DELETE
/v1/sessions/{id}, cleanup), under the session's operator lock so it never interleaves
with a pause, resume or requeue of the same session."""

from __future__ import annotations

from strands_durable.sessions.control import session_lock
from strands_durable.store.store import Store


async def delete_locked(store: Store, session_id: str) -> None:
    """For a caller that holds the session's lock: the session's keys, then its lock's
    fencing counter, which would otherwise outlive it. SessionNotFound if none."""
    await store.delete_session(session_id)
    await store.forget_lock(f"session:{session_id}", store.keys.shard(session_id))
    await store.forget_lock(f"runner:{session_id}", store.keys.shard(session_id))  # runner_lock.py


async def delete_session(store: Store, session_id: str) -> None:
    """Take the session's lock and delete it. SessionNotFound if there is no such session."""
    async with session_lock(store, session_id):
        await delete_locked(store, session_id)
