"""The Redis key schema: the only place key names are spelled.

Every key of a session carries its shard's hash tag, so a session's keys, its
shard's step stream, timers, indexes and dead letters share one Redis Cluster
slot and a commit is one single-slot script.
"""

from __future__ import annotations

import uuid
import zlib
from dataclasses import dataclass

from sessions.models import SessionStatus

CONSUMER_GROUP = "workers"


def shard_of(session_id: str, shards: int) -> int:
    return zlib.crc32(session_id.encode()) % shards


def new_session_id(shard: int, shards: int) -> str:
    """A UUID4 whose shard is `shard` (rejection sampling keeps ids plain UUIDs)."""
    while True:
        candidate = str(uuid.uuid4())
        if shard_of(candidate, shards) == shard:
            return candidate


def shard_for_key(key: str, shards: int) -> int:
    return zlib.crc32(key.encode()) % shards


@dataclass(frozen=True)
class Keys:
    prefix: str
    shards: int = 1

    def tag(self, shard: int) -> str:
        return f"{self.prefix}:{{s{shard}}}"

    # -- per shard -----------------------------------------------------------
    def stream(self, shard: int) -> str:
        return f"{self.tag(shard)}:steps"

    def dead(self, shard: int) -> str:
        return f"{self.tag(shard)}:dead"

    def timers(self, shard: int) -> str:
        return f"{self.tag(shard)}:timers"

    def index_all(self, shard: int) -> str:
        return f"{self.tag(shard)}:idx:all"

    def index_status(self, shard: int, status: SessionStatus | str) -> str:
        return f"{self.tag(shard)}:idx:{SessionStatus(status).value}"

    def index_statuses(self, shard: int) -> list[str]:
        return [self.index_status(shard, s) for s in SessionStatus]

    def idempotency(self, shard: int, key: str) -> str:
        return f"{self.tag(shard)}:idem:{key}"

    def index_spec(self, shard: int, spec_hash: str) -> str:
        """Sessions of one spec (by hash), for `run --auto-resume`: intersected with the
        failed and paused indexes, it finds the latest resumable one in O(small)."""
        return f"{self.tag(shard)}:idx:spec:{spec_hash}"

    def streams(self) -> list[str]:
        return [self.stream(k) for k in range(self.shards)]

    # -- per session ---------------------------------------------------------
    def shard(self, session_id: str) -> int:
        return shard_of(session_id, self.shards)

    def _s(self, session_id: str) -> str:
        return f"{self.tag(self.shard(session_id))}:s:{session_id}"

    def meta(self, session_id: str) -> str:
        return self._s(session_id)

    def results(self, session_id: str) -> str:
        return f"{self._s(session_id)}:results"

    def order(self, session_id: str) -> str:
        """Step keys in commit order: lets readers fetch only what they miss."""
        return f"{self._s(session_id)}:order"

    def events(self, session_id: str) -> str:
        return f"{self._s(session_id)}:events"

    def conversation(self, session_id: str, lane: str) -> str:
        return f"{self._s(session_id)}:conv:{lane}"

    def conversations(self, session_id: str) -> str:
        """Set of conversation lanes, so delete finds them all."""
        return f"{self._s(session_id)}:convs"

    def artifacts(self, session_id: str) -> str:
        return f"{self._s(session_id)}:artifacts"

    def checkpoints(self, session_id: str) -> str:
        return f"{self._s(session_id)}:checkpoints"

    def failed_jobs(self, session_id: str) -> str:
        return f"{self._s(session_id)}:failed"

    def held(self, session_id: str) -> str:
        """Jobs held back while the session is paused."""
        return f"{self._s(session_id)}:held"

    def session_keys(self, session_id: str) -> list[str]:
        return [
            self.meta(session_id),
            self.results(session_id),
            self.order(session_id),
            self.events(session_id),
            self.conversations(session_id),
            self.artifacts(session_id),
            self.checkpoints(session_id),
            self.failed_jobs(session_id),
            self.held(session_id),
        ]

    # -- global (never part of a commit) ---------------------------------------
    def workers(self) -> str:
        return f"{self.prefix}:workers"

    def config(self) -> str:
        return f"{self.prefix}:config"

    def lock(self, name: str, shard: int | None = None) -> str:
        base = self.tag(shard) if shard is not None else self.prefix
        return f"{base}:lock:{name}"

    def lock_fence(self, name: str, shard: int | None = None) -> str:
        return f"{self.lock(name, shard)}:fence"
