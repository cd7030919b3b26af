"""The step path's writes: create a session, gate and commit a step, fail or
dead-letter it, and the stream bookkeeping around them (leases, hand-backs, timers)."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

from strands_durable.errors import IdempotencyConflict
from strands_durable.models import Event, EventType, SessionStatus, StepJob
from strands_durable.store.base import StoreBase
from strands_durable.store.codec import dumps
from strands_durable.store.conversation import compaction_item
from strands_durable.store.keys import (
    CONSUMER_GROUP,
    check_session_id,
    check_token,
    new_session_id,
    shard_for_key,
)
from strands_durable.store.records import (
    GATE_FIELDS,
    CommitOutcome,
    CommitRequest,
    GateOutcome,
    NewSession,
    commit_bytes,
)
from strands_durable.store.script_gate import GateArgs, GateKeys
from strands_durable.store.script_step import (
    CommitArgs,
    CommitKeys,
    CreateArgs,
    CreateKeys,
    DeadLetterArgs,
    DeadLetterKeys,
    FailStepArgs,
    FailStepKeys,
    JournalArgs,
    JournalKeys,
    ParkEntryArgs,
    ParkEntryKeys,
    PromoteTimersArgs,
    PromoteTimersKeys,
    ReleaseArgs,
    RenewArgs,
    StreamKeys,
    event_values,
)
from strands_durable.store.streams import fair_args, take_spelling


class StepPath(StoreBase):
    async def create_session(self, new: NewSession) -> tuple[str, bool]:
        """Create the session and enqueue its first steps atomically.

        Returns (session id, created); an existing idempotency key returns its session
        when the request digest matches, and raises IdempotencyConflict when it does not.
        """
        k = self.keys
        if new.idempotency_key is not None:
            check_token("idempotency key", new.idempotency_key)
        # An idempotency key fixes the shard, so its lookup key lives beside the session.
        shard = (shard_for_key(new.idempotency_key, k.shards) if new.idempotency_key
                 else random.randrange(k.shards))
        sid = new_session_id(shard, k.shards)
        jobs = [StepJob(**{**job.__dict__, "session_id": sid}) for job in new.jobs]
        res = await self.scripts.create(
            keys=CreateKeys(
                meta=k.meta(sid), idempotency=k.idempotency(shard, new.idempotency_key or "-"),
                events=k.events(sid), stream=k.stream(shard), held=k.held(sid),
                timers=k.timers(shard), spec_index=k.index_spec(shard, new.spec_hash),
                fair_on=f"{k.fair(shard)}:on", index=self._index(shard)),
            args=CreateArgs(
                session_id=sid, fields=dumps(_meta_fields(new, sid, shard)),
                jobs=dumps([j.to_json() for j in jobs]),
                events=dumps(_creation_events(new, jobs)),
                idempotency=new.idempotency_key or "", now_ms=new.created_ms,
                status=new.status.value,
                timers=dumps([[due, _with_sid(j.to_json(), sid)] for due, j in new.timers]),
                request_digest=new.request_digest, events_max=self.events_max),
        )
        if res.verdict == "conflict":
            raise IdempotencyConflict(new.idempotency_key or "")
        return res.detail, res.verdict == "created"

    async def gate(self, job: StepJob, entry_id: str, consumer: str, known_results: int,
                   started: Event) -> GateOutcome:
        k, sid = self.keys, job.session_id
        return await self.scripts.gate(
            keys=GateKeys(meta=k.meta(sid), stream=k.stream(k.shard(sid)), held=k.held(sid),
                          results=k.results(sid), order=k.order(sid), events=k.events(sid),
                          journal=k.journal(sid, job.key)),
            args=GateArgs(group=CONSUMER_GROUP, consumer=consumer, entry_id=entry_id,
                          step=job.key, job=job.to_json(), known_results=known_results,
                          started=dumps([started.to_fields()]), wanted=dumps(list(GATE_FIELDS)),
                          kind=job.kind, events_max=self.events_max),
        )

    async def journal(self, job: StepJob, entry_id: str, consumer: str, field: str,
                      value: str, events: Sequence[Event] = (),
                      excluded_wait_ms: tuple[int, int] = (0, 0)) -> bool:
        """Journal a turn (`field` m<turn> or t<ordinal>, '' for events only) of the step
        `entry_id` carries; False when this consumer no longer holds the entry. With
        `excluded_wait_ms` (from, to), that capacity wait leaves the session's clock."""
        k, sid = self.keys, job.session_id
        written = await self.scripts.journal(
            keys=JournalKeys(stream=k.stream(k.shard(sid)), journal=k.journal(sid, job.key),
                             journals=k.journals(sid), events=k.events(sid),
                             meta=k.meta(sid)),
            args=JournalArgs(group=CONSUMER_GROUP, consumer=consumer, entry_id=entry_id,
                             step=job.key, field=field, value=value,
                             events=dumps([e.to_fields() for e in events]),
                             events_max=self.events_max, wait_from_ms=excluded_wait_ms[0],
                             wait_to_ms=excluded_wait_ms[1]))
        return written == 1

    async def commit(self, req: CommitRequest, take_next: int = 0) -> CommitOutcome:
        """Commit the planned step; with `take_next`, the same call takes and gates up to
        that many new entries of the step's stream for the worker (its free slots; 0
        when stopping): a busy worker's next step comes with its commit. Not part of
        the plan: the worker decides it as it commits."""
        k, job = self.keys, req.job
        sid = job.session_id
        shard = k.shard(sid)
        lane = job.conversation_lane
        # A compaction is one more lane item after the step's own messages (conversation.py).
        lane_items = [*req.new_messages,
                      *([compaction_item(req.compaction)] if req.compaction else [])]
        mode = "replace" if req.replace_conversation else "append" if lane_items else "none"
        # commit.lua appends the lane's length after this commit ("lane_len"), so a
        # fork from this checkpoint can cut the lane's conversation where it stood.
        checkpoint = dumps({"step": job.key, "attempt": job.attempt, "at": req.now_iso,
                            "status": req.status.value, "state": req.state,
                            "type": "step", "clean": True, "lane": lane})
        result_json, state_json = req.result.to_json(), dumps(req.state)
        messages = [dumps(m) for m in lane_items]
        jobs = [j.to_json() for j in req.next_jobs]
        events = event_values(req.events)
        res = await self.scripts.commit(
            keys=CommitKeys(
                meta=k.meta(sid), results=k.results(sid), order=k.order(sid),
                events=k.events(sid), stream=k.stream(shard),
                conversation=k.conversation(sid, lane), conversations=k.conversations(sid),
                artifacts=k.artifacts(sid), checkpoints=k.checkpoints(sid), held=k.held(sid),
                timers=k.timers(shard), journal=k.journal(sid, job.key),
                journals=k.journals(sid), took=k.took(shard, req.entry_id),
                unwritten=k.unwritten(shard), index=self._index(shard)),
            args=CommitArgs(
                session_id=sid, step=job.key, entry_id=req.entry_id, group=CONSUMER_GROUP,
                consumer=req.consumer, expected_version=req.expected_version,
                result=result_json, state=state_json, decided=req.status.value,
                reason=req.reason, input_tokens=req.result.input_tokens,
                output_tokens=req.result.output_tokens, agent=job.agent,
                now_iso=req.now_iso, now_ms=req.now_ms, conversation_mode=mode,
                messages=dumps(messages), lane=lane,
                artifacts=dumps(req.artifacts),
                events_count=len(events), checkpoint=checkpoint,
                waiting=dumps(list(req.waiting)),
                timers=dumps([[due, j.to_json()] for due, j in req.timers]),
                events_max=self.events_max, answers_human=int(req.answers_human),
                take=take_next, spelling=take_spelling(k, shard),
                fair=fair_args(self.fair_weights, self.fair_look.get(shard, True),
                               self.fair_limits),
                events=events,
                next_jobs=tuple(v for j, text in zip(req.next_jobs, jobs, strict=True)
                                for v in (*j.gate_fields(), text))),
        )
        if res.verdict == "ok":
            written = commit_bytes(result_json, state_json, messages, jobs, req.artifacts)
            return CommitOutcome("ok", res.version, res.status, written, res.position,
                                 res.taken, result_json)
        return CommitOutcome(res.verdict, res.version,  # type: ignore[arg-type]
                             taken=res.taken)

    async def fail_step(self, job: StepJob, entry_id: str, consumer: str, *,
                        retry_at_ms: int | None, error: str, events: Sequence[Event],
                        now_iso: str, now_ms: int) -> str:
        k, sid = self.keys, job.session_id
        shard = k.shard(sid)
        res = await self.scripts.fail_step(
            keys=FailStepKeys(meta=k.meta(sid), events=k.events(sid), stream=k.stream(shard),
                              timers=k.timers(shard), failed_jobs=k.failed_jobs(sid),
                              results=k.results(sid), index=self._index(shard)),
            args=FailStepArgs(
                session_id=sid, step=job.key, entry_id=entry_id, group=CONSUMER_GROUP,
                consumer=consumer, mode="retry" if retry_at_ms is not None else "fail",
                due_ms=retry_at_ms or 0, retry_job=job.retry().to_json(), job=job.to_json(),
                error_text=error, now_iso=now_iso, now_ms=now_ms,
                events=dumps([e.to_fields() for e in events]), events_max=self.events_max),
        )
        return res.verdict

    async def dead_letter(self, job: StepJob, entry_id: str, consumer: str, deliveries: int,
                          error: str, events: Sequence[Event], now_iso: str,
                          now_ms: int) -> str:
        k, sid = self.keys, job.session_id
        shard = k.shard(sid)
        res = await self.scripts.dead_letter(
            keys=DeadLetterKeys(meta=k.meta(sid), events=k.events(sid),
                                stream=k.stream(shard), dead=k.dead(shard),
                                failed_jobs=k.failed_jobs(sid), results=k.results(sid),
                                index=self._index(shard)),
            args=DeadLetterArgs(
                session_id=sid, step=job.key, entry_id=entry_id, group=CONSUMER_GROUP,
                consumer=consumer, job=job.to_json(), deliveries=deliveries, error_text=error,
                now_iso=now_iso, now_ms=now_ms,
                events=dumps([e.to_fields() for e in events]), events_max=self.events_max),
        )
        return res.verdict

    async def ack(self, shard: int, entry_id: str) -> None:
        """Drop an entry that has nothing left to do (XACK and XDEL in one script: a
        Redis Cluster client has no MULTI/EXEC)."""
        from strands_durable.store.script_operator import AckArgs

        await self.scripts.ack(keys=StreamKeys(self.keys.stream(shard)),
                               args=AckArgs(group=CONSUMER_GROUP, entry_id=entry_id))

    async def renew(self, shard: int, entry_id: str, consumer: str) -> bool:
        return bool(await self.scripts.renew(
            keys=StreamKeys(self.keys.stream(shard)),
            args=RenewArgs(group=CONSUMER_GROUP, consumer=consumer, entry_id=entry_id)))

    async def release(self, shard: int, entry_ids: Sequence[str], consumer: str,
                      idle_ms: int) -> int:
        """Hand entries we hold back to the group for immediate re-claim."""
        if not entry_ids:
            return 0
        return await self.scripts.release(
            keys=StreamKeys(self.keys.stream(shard)),
            args=ReleaseArgs(group=CONSUMER_GROUP, consumer=consumer, idle_ms=idle_ms,
                             entry_ids=tuple(entry_ids)))

    async def promote_timers(self, shard: int, now_ms: int, limit: int = 100,
                             session_id: str | None = None) -> int:
        """Move due timers onto the stream: every session's, or `session_id`'s alone."""
        only = check_session_id(session_id) if session_id else ""
        fair = self.keys.fair(shard)
        moved, self.fair_look[shard] = await self.scripts.promote_timers(
            keys=PromoteTimersKeys(timers=self.keys.timers(shard),
                                   stream=self.keys.stream(shard), fair_on=f"{fair}:on",
                                   fair_ready=f"{fair}:ready"),
            args=PromoteTimersArgs(now_ms=now_ms, limit=limit, only_session=only))
        return moved

    async def dead_letter_raw(self, shard: int, entry_id: str, fields: dict[str, str],
                              error: str, consumer: str) -> bool:
        """Park an entry that is not a step job at all (nothing to fail but the entry);
        False if `consumer` no longer owns it."""
        return bool(await self.scripts.park_entry(
            keys=ParkEntryKeys(stream=self.keys.stream(shard), dead=self.keys.dead(shard)),
            args=ParkEntryArgs(group=CONSUMER_GROUP, consumer=consumer, entry_id=entry_id,
                               error_text=error, fields=dumps(fields))))

    async def add_event(self, session_id: str, event: Event) -> None:
        await self.redis.xadd(self.keys.events(session_id), event.to_fields(),  # type: ignore[arg-type]
                              maxlen=self.events_max, approximate=True)


def _meta_fields(new: NewSession, sid: str, shard: int) -> dict[str, Any]:
    return {
        "session_id": sid, "workflow_name": new.workflow_name,
        "pattern_type": new.pattern_type, "spec_hash": new.spec_hash,
        "spec_json": new.spec_json,
        "spec_digest": new.spec_digest, "source": new.source,
        "variables": dumps(new.variables), "state": dumps(new.state),
        "created_at": new.created_at, "updated_at": new.created_at,
        "started_ms": new.created_ms, "error": new.error,
        "paused_reason": new.paused_reason,
        "waiting": dumps([{**w, "job": _with_sid(w["job"], sid)} for w in new.waiting]),
        "tokens_in": 0, "tokens_out": 0, "steps": 0, "shard": shard,
        "idempotency_key": new.idempotency_key or "",
        **({"priority": new.priority} if new.priority is not None else {}),
        **({"namespace": new.namespace} if new.namespace != "default" else {}),
        **({"webhook": new.webhook} if new.webhook else {}),
    }


def _creation_events(new: NewSession, jobs: Sequence[StepJob]) -> list[dict[str, str]]:
    events = [Event(EventType.SESSION_STARTED, at=new.created_at).to_fields()]
    events += [Event(EventType.STEP_SCHEDULED, step=j.key, attempt=j.attempt,
                     at=new.created_at).to_fields() for j in jobs]
    if new.status != SessionStatus.RUNNING:
        events.append(Event(EventType.session_became(new.status), at=new.created_at,
                            detail=new.error or new.paused_reason).to_fields())
    return events


def _with_sid(job_json: str, sid: str) -> str:
    """Jobs planned before the session id existed get it filled in."""
    data = json.loads(job_json)
    data["session_id"] = sid
    return dumps(data)
