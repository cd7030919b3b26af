"""The runner lock: the one process running a session in-process (`durable run`,
`durable run --resume`, `durable resume` with no fleet) holds `<T>:lock:runner:<sid>`.

Its value names the holder (host, pid, since), so a second runner is refused with
who to wait for. It is a lease: renewed every third of its TTL while the runner lives,
gone a TTL after it dies; on the holder's own host a dead pid frees it at once, so
`durable run --resume` right after a kill -9 needs no wait. The lock keeps no commit
safe by itself: a runner taking over also takes the session's pending stream entries,
and a commit is fenced by the entry it owns (commit.lua), so a stale runner that wakes
up commits nothing. Its fencing counter outlives the holder on purpose: it marks the
session as run by a runner, whose death makes it resumable (`run --auto-resume`).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
from dataclasses import asdict, dataclass
from enum import StrEnum

from strands_durable.errors import Conflict
from strands_durable.models import now_iso
from strands_durable.store.codec import as_str
from strands_durable.store.local_server import pid_alive
from strands_durable.store.locks import Lock
from strands_durable.store.script_operator import LockKeys, LockReleaseArgs
from strands_durable.store.store import Store

RUNNER_TTL_MS = 15_000


@dataclass(frozen=True)
class Holder:
    host: str
    pid: int
    since: str
    token: str = ""

    @classmethod
    def me(cls) -> Holder:
        return cls(socket.gethostname(), os.getpid(), now_iso(), secrets.token_hex(8))

    @classmethod
    def parse(cls, raw: str) -> Holder:
        try:
            doc = json.loads(raw)
            return cls(str(doc["host"]), int(doc["pid"]), str(doc["since"]),
                       str(doc.get("token", "")))
        except (ValueError, KeyError, TypeError):
            return cls("?", 0, "?")  # not ours to read: a live holder of unknown shape

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host} (since {self.since})"

    def dead(self) -> bool:
        """Known dead: on this host, and its pid is gone. Elsewhere only the TTL tells."""
        return self.host == socket.gethostname() and self.pid > 0 and not pid_alive(self.pid)


class SessionAlreadyRunning(Conflict):
    code = "session_running"

    def __init__(self, session_id: str, holder: Holder) -> None:
        self.session_id, self.holder = session_id, holder
        super().__init__(f"session {session_id} is already being run by "
                         f"{holder.describe()}; wait for it, or stop that process first")

    def details(self) -> dict[str, object]:
        return {"session_id": self.session_id, "holder": asdict(self.holder)}


class RunnerState(StrEnum):
    NONE = "none"  # never run by a runner (a fleet session), or deleted
    LIVE = "live"  # a runner holds it
    DEAD = "dead"  # a runner ran it and is gone: resumable


class RunnerLock:
    def __init__(self, store: Store, session_id: str, ttl_ms: int = RUNNER_TTL_MS) -> None:
        self.session_id = session_id
        self.lock: Lock = store.new_lock(f"runner:{session_id}", ttl_ms=ttl_ms,
                                         shard=store.keys.shard(session_id))

    @property
    def fence_key(self) -> str:
        key = self.lock.fence_key
        assert key is not None  # a lock of new_lock keeps its fence
        return key

    async def holder(self) -> tuple[Holder, str] | None:
        raw = await self.lock.redis.get(self.lock.key)
        return None if raw is None else (Holder.parse(as_str(raw)), as_str(raw))

    async def acquire(self) -> Holder:
        """Take the lock, or SessionAlreadyRunning naming the live holder. A holder known
        dead is removed (compare-and-delete: only that holder's value) and taken over."""
        me = Holder.me()
        value = json.dumps(asdict(me))
        for _ in range(5):
            if await self.lock.redis.set(self.lock.key, value, nx=True, px=self.lock.ttl_ms):
                self.lock.token = value
                self.lock.fence = int(await self.lock.redis.incr(self.fence_key))
                return me
            current = await self.holder()
            if current is None:
                continue  # it expired between the two calls
            if not current[0].dead():
                raise SessionAlreadyRunning(self.session_id, current[0])
            await self.lock.scripts.lock_release(keys=LockKeys(self.lock.key),
                                                 args=LockReleaseArgs(current[1]))
        raise SessionAlreadyRunning(self.session_id, Holder("?", 0, "?"))

    async def extend(self) -> None:
        await self.lock.extend()  # LockLost when taken over or expired

    async def release(self) -> None:
        await self.lock.release()

    async def state(self) -> RunnerState:
        current = await self.holder()
        if current is not None:
            return RunnerState.DEAD if current[0].dead() else RunnerState.LIVE
        ran = await self.lock.redis.exists(self.fence_key)
        return RunnerState.DEAD if ran else RunnerState.NONE
