"""Operators' writes: pause, resume and cancel, changed settings, requeue, fork,
delete, and the watchdog's stuck flag. Each multi-key write is one script."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from strands_durable.errors import Conflict, SessionNotFound
from strands_durable.models import Event, SessionStatus
from strands_durable.store.base import StoreBase
from strands_durable.store.codec import as_str, dumps
from strands_durable.store.keys import new_session_id
from strands_durable.store.records import NewFork
from strands_durable.store.script_operator import (
    ControlArgs,
    ControlKeys,
    DeleteArgs,
    DeleteKeys,
    FlagStuckArgs,
    FlagStuckKeys,
    ForkArgs,
    ForkKeys,
    RequeueArgs,
    RequeueKeys,
)

NO_SPEC_HASH = "-"  # names the spec-index key of a script that has no spec hash to index
DELETE_ATTEMPTS = 5  # reads of a running session's lanes before delete gives up


class OperatorWrites(StoreBase):
    async def control(self, session_id: str, action: str, *, reason: str = "",
                      events: Sequence[Event] = (), sets: dict[str, Any] | None = None,
                      now_iso: str, now_ms: int) -> tuple[str, str]:
        """pause | resume | cancel; returns (verdict, status or detail). A resume that
        sets a new spec hash also indexes the session under it (`run --auto-resume`)."""
        k = self.keys
        shard = k.shard(session_id)
        spec_hash = str((sets or {}).get("spec_hash") or NO_SPEC_HASH)
        res = await self.scripts.control(
            keys=ControlKeys(meta=k.meta(session_id), events=k.events(session_id),
                             stream=k.stream(shard), held=k.held(session_id),
                             failed_jobs=k.failed_jobs(session_id),
                             spec_index=k.index_spec(shard, spec_hash),
                             index=self._index(shard)),
            args=ControlArgs(session_id=session_id, action=action, now_iso=now_iso,
                             now_ms=now_ms, reason=reason,
                             events=dumps([e.to_fields() for e in events]),
                             sets=dumps(sets or {}), events_max=self.events_max),
        )
        return res.verdict, res.detail

    async def set_fields(self, session_id: str, fields: dict[str, str]) -> None:
        """Write meta fields as they are (settings changed with a human's answer)."""
        if fields:
            await self.redis.hset(self.keys.meta(session_id), mapping=fields)

    async def requeue_steps(self, session_id: str, steps: Sequence[tuple[str, str, str]],
                            dead_ids: Sequence[str], *, events: Sequence[Event],
                            resumed: Sequence[Event], now_iso: str, now_ms: int,
                            ) -> tuple[str, str]:
        """Enqueue (step, failed job as read, job to enqueue) triples atomically; returns
        ('ok', status) | ('gone', '') | ('invalid', status) | ('changed', step)."""
        k = self.keys
        shard = k.shard(session_id)
        res = await self.scripts.requeue(
            keys=RequeueKeys(meta=k.meta(session_id), events=k.events(session_id),
                             stream=k.stream(shard), failed_jobs=k.failed_jobs(session_id),
                             held=k.held(session_id), results=k.results(session_id),
                             dead=k.dead(shard), index=self._index(shard)),
            args=RequeueArgs(session_id=session_id, steps=dumps([list(s) for s in steps]),
                             dead_ids=dumps(list(dead_ids)), now_iso=now_iso, now_ms=now_ms,
                             events=dumps([e.to_fields() for e in events]),
                             resumed_events=dumps([e.to_fields() for e in resumed]),
                             events_max=self.events_max),
        )
        return res.verdict, res.detail

    async def drop_dead_letters(self, shard: int, entry_ids: Sequence[str]) -> int:
        if not entry_ids:
            return 0
        return int(await self.redis.xdel(self.keys.dead(shard), *entry_ids))

    def fresh_session_id(self) -> str:
        shards = self.keys.shards
        return new_session_id(random.randrange(shards), shards)

    async def create_fork(self, session_id: str, fork: NewFork) -> None:
        k, sid = self.keys, session_id
        shard = k.shard(sid)
        lanes = list(fork.lanes)
        res = await self.scripts.fork(
            keys=ForkKeys(
                meta=k.meta(sid), results=k.results(sid), order=k.order(sid),
                events=k.events(sid), stream=k.stream(shard),
                conversations=k.conversations(sid), checkpoints=k.checkpoints(sid),
                held=k.held(sid), timers=k.timers(shard),
                spec_index=k.index_spec(shard, str(fork.fields["spec_hash"])),
                lanes=tuple(k.conversation(sid, lane) for lane, _ in lanes),
                index=self._index(shard)),
            args=ForkArgs(
                session_id=sid,
                fields=dumps({**fork.fields, "session_id": sid, "shard": shard}),
                results=dumps([list(r) for r in fork.results]),
                checkpoints=dumps(list(fork.checkpoints)),
                lanes=dumps([[lane, list(msgs)] for lane, msgs in lanes]),
                jobs=dumps([j.to_json() for j in fork.jobs]),
                events=dumps([e.to_fields() for e in fork.events]),
                status=fork.status.value, now_ms=fork.created_ms,
                timers=dumps([[due, j.to_json()] for due, j in fork.timers]),
                events_max=self.events_max),
        )
        if res.verdict != "created":
            raise Conflict(f"session id {sid} exists already; fork not created")

    async def delete_session(self, session_id: str) -> None:
        k = self.keys
        shard = k.shard(session_id)
        idem, spec_hash = await self.redis.hmget(k.meta(session_id),
                                                 ["idempotency_key", "spec_hash"])
        others = tuple(key for key in k.session_keys(session_id)
                       if key not in (k.meta(session_id), k.conversations(session_id),
                                      k.journals(session_id)))
        # Every key is declared (delete.lua): read the lanes and journals, and read again
        # if a step added one between this read and the script.
        for _ in range(DELETE_ATTEMPTS):
            lanes = sorted(as_str(m) for m in await self.redis.smembers(
                k.conversations(session_id)))
            steps = sorted(as_str(m) for m in await self.redis.smembers(
                k.journals(session_id)))
            lane_keys = tuple(k.conversation_prefix(session_id) + lane for lane in lanes)
            journal_keys = tuple(k.journal_prefix(session_id) + step for step in steps)
            deleted = await self.scripts.delete(
                keys=DeleteKeys(meta=k.meta(session_id),
                                conversations=k.conversations(session_id),
                                journals=k.journals(session_id),
                                idempotency=k.stored_idempotency(shard, as_str(idem) or "-"),
                                spec_index=k.index_spec(shard,
                                                        as_str(spec_hash) or NO_SPEC_HASH),
                                others=others, lanes=lane_keys, journal_keys=journal_keys,
                                index=self._index(shard)),
                args=DeleteArgs(session_id=session_id,
                                conversation_prefix=k.conversation_prefix(session_id),
                                others_count=len(others),
                                journal_prefix=k.journal_prefix(session_id),
                                lanes_count=len(lane_keys), journals_count=len(journal_keys)),
            )
            if deleted != -1:
                break
        else:
            raise Conflict(f"session {session_id} kept changing while it was deleted; "
                           "cancel it first, then delete it")
        if not deleted:
            raise SessionNotFound(session_id)

    async def forget_lock(self, name: str, shard: int | None = None) -> None:
        """Drop a lock's fencing counter (of a session deleted: it would outlive it)."""
        await self.redis.delete(self.keys.lock_fence(name, shard))

    async def flag_stuck(self, session_id: str, score: float, event: Event) -> bool:
        """Write `event` unless it is the last event already or the session moved (left
        running, or its running-index score is no longer `score`) since it was found."""
        k = self.keys
        verdict = await self.scripts.flag_stuck(
            keys=FlagStuckKeys(meta=k.meta(session_id),
                               running_index=k.index_status(k.shard(session_id),
                                                            SessionStatus.RUNNING),
                               events=k.events(session_id)),
            args=FlagStuckArgs(session_id=session_id, score=repr(float(score)),
                               event_type=str(event.to_fields()["type"]),
                               events=dumps([event.to_fields()]), events_max=self.events_max))
        return verdict == "flagged"

