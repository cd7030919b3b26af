"""The session store: every read and atomic write of session state in Redis.

Writes that must be atomic are Lua scripts (sessions/lua/); this module builds their
arguments from typed requests and decodes their answers.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from strands_durable.errors import ConfigError, IdempotencyConflict, SessionNotFound
from strands_durable.models import Event, EventType, SessionStatus, StepJob, StepResult, TokenUsage
from strands_durable.store.keys import (
    CONSUMER_GROUP,
    Keys,
    check_session_id,
    check_token,
    new_session_id,
    shard_for_key,
)
from strands_durable.store.scripts import Scripts

JSON_SEPARATORS = (",", ":")


def dumps(value: Any) -> str:
    return json.dumps(value, separators=JSON_SEPARATORS)


@dataclass(frozen=True)
class NewSession:
    workflow_name: str
    pattern_type: str
    spec_hash: str
    spec_text: str
    spec_json: str
    spec_digest: str
    source: str
    variables: dict[str, Any]
    state: dict[str, Any]
    jobs: Sequence[StepJob]
    status: SessionStatus
    created_at: str
    created_ms: int
    idempotency_key: str | None = None
    request_digest: str = ""  # what the idempotency key is bound to (scheduler/start.py)
    error: str = ""
    paused_reason: str = ""
    waiting: Sequence[dict[str, Any]] = ()
    timers: Sequence[tuple[int, StepJob]] = ()


@dataclass(frozen=True)
class SessionRecord:
    """A session's metadata hash, decoded."""

    session_id: str
    status: SessionStatus
    workflow_name: str
    pattern_type: str
    spec_hash: str
    created_at: str
    updated_at: str
    error: str | None
    paused_reason: str | None
    version: int
    state: dict[str, Any]
    variables: dict[str, Any]
    token_usage: TokenUsage
    steps_committed: int
    spec_digest: str
    started_ms: int
    raw: dict[str, str] = field(repr=False)

    @classmethod
    def from_hash(cls, session_id: str, h: dict[str, str]) -> SessionRecord:
        by_agent = {k[4:]: int(v) for k, v in h.items() if k.startswith("tok:")}
        return cls(
            session_id=session_id,
            status=SessionStatus(h["status"]),
            workflow_name=h.get("workflow_name", ""),
            pattern_type=h.get("pattern_type", ""),
            spec_hash=h.get("spec_hash", ""),
            created_at=h.get("created_at", ""),
            updated_at=h.get("updated_at", ""),
            error=h.get("error") or None,
            paused_reason=h.get("paused_reason") or None,
            version=int(h.get("version", 0)),
            state=json.loads(h.get("state") or "{}"),
            variables=json.loads(h.get("variables") or "{}"),
            token_usage=TokenUsage(
                total_input_tokens=int(h.get("tokens_in", 0)),
                total_output_tokens=int(h.get("tokens_out", 0)),
                by_agent=by_agent,
            ),
            steps_committed=int(h.get("steps", 0)),
            spec_digest=h.get("spec_digest", ""),
            started_ms=int(h.get("started_ms", 0)),
            raw=h,
        )


# Fields the worker needs to run and plan a step (returned by the gate script).
GATE_FIELDS = ("version", "state", "variables", "spec_digest", "pattern_type", "started_ms",
               "tokens_in", "tokens_out", "steps", "waiting", "budget_overrides")


@dataclass(frozen=True)
class GateOutcome:
    verdict: Literal["run", "stale", "gone", "committed", "terminal", "held"]
    fields: dict[str, str] = field(default_factory=dict)
    new_results: list[StepResult] = field(default_factory=list)


@dataclass(frozen=True)
class CommitRequest:
    job: StepJob
    entry_id: str
    consumer: str
    expected_version: int
    result: StepResult
    state: dict[str, Any]
    status: SessionStatus
    reason: str = ""
    new_messages: Sequence[dict[str, Any]] = ()
    replace_conversation: bool = False
    next_jobs: Sequence[StepJob] = ()
    artifacts: dict[str, str] = field(default_factory=dict)
    events: Sequence[Event] = ()
    now_iso: str = ""
    now_ms: int = 0
    # Human-in-the-loop steps still unanswered after this commit, and their timeouts.
    waiting: Sequence[dict[str, Any]] = ()
    timers: Sequence[tuple[int, StepJob]] = ()


@dataclass(frozen=True)
class ClaimedEntries:
    cursor: str  # where the next call goes on
    entries: list[tuple[str, dict[str, str]]]  # (entry id, fields) now pending under us
    at_end: bool  # nothing left to look at after the cursor


@dataclass(frozen=True)
class CommitOutcome:
    verdict: Literal["ok", "stale", "gone", "duplicate", "conflict"]
    version: int = 0
    status: str = ""
    bytes_written: int = 0  # the checkpoint's size, when written (see commit_bytes)


def commit_bytes(result_json: str, state_json: str, messages: Sequence[str],
                 jobs: Sequence[str], artifacts: Mapping[str, str]) -> int:
    """What a commit writes: the result, the state (twice: meta and the checkpoint),
    the new conversation turns, the next jobs and the artifacts."""
    return (len(result_json) + 2 * len(state_json) + sum(map(len, messages))
            + sum(map(len, jobs)) + sum(len(k) + len(v) for k, v in artifacts.items()))


# A session's event stream keeps about this many of its newest events (DURABLE_EVENTS_MAX).
DEFAULT_EVENTS_MAX = 10_000


class Store:
    def __init__(self, redis: Redis, keys: Keys, events_max: int = DEFAULT_EVENTS_MAX
                 ) -> None:
        self.redis = redis
        self.keys = keys
        self.events_max = events_max
        self.scripts = Scripts.register(redis)

    # -- setup -------------------------------------------------------------------
    async def prepare(self) -> None:
        """Check the shard count against what this Redis was set up with; create groups."""
        recorded = await self.redis.hget(self.keys.config(), "shards")
        if recorded is None:
            await self.redis.hsetnx(self.keys.config(), "shards", str(self.keys.shards))
            recorded = await self.redis.hget(self.keys.config(), "shards")
        if int(recorded) != self.keys.shards:
            raise ConfigError(
                f"DURABLE_SHARDS={self.keys.shards} but the sessions under prefix "
                f"{self.keys.prefix!r} were created with {recorded} shards; set it back"
            )
        for stream in self.keys.streams():
            try:
                await self.redis.xgroup_create(stream, CONSUMER_GROUP, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    def _index_keys(self, shard: int) -> list[str]:
        return [self.keys.index_all(shard), *self.keys.index_statuses(shard)]

    # -- create ------------------------------------------------------------------
    async def create_session(self, new: NewSession) -> tuple[str, bool]:
        """Create the session and enqueue its first steps atomically.

        Returns (session id, created); an existing idempotency key returns its session
        when the request digest matches, and raises IdempotencyConflict when it does not.
        """
        k = self.keys
        shards = k.shards
        if new.idempotency_key is not None:
            check_token("idempotency key", new.idempotency_key)
        # An idempotency key fixes the shard, so its lookup key lives beside the session.
        shard = (shard_for_key(new.idempotency_key, shards) if new.idempotency_key
                 else random.randrange(shards))
        sid = new_session_id(shard, shards)
        jobs = [StepJob(**{**job.__dict__, "session_id": sid}) for job in new.jobs]
        fields = {
            "session_id": sid, "workflow_name": new.workflow_name,
            "pattern_type": new.pattern_type, "spec_hash": new.spec_hash,
            "spec_text": new.spec_text, "spec_json": new.spec_json,
            "spec_digest": new.spec_digest, "source": new.source,
            "variables": dumps(new.variables), "state": dumps(new.state),
            "created_at": new.created_at, "updated_at": new.created_at,
            "started_ms": new.created_ms, "error": new.error,
            "paused_reason": new.paused_reason,
            "waiting": dumps([{**w, "job": _with_sid(w["job"], sid)} for w in new.waiting]),
            "tokens_in": 0, "tokens_out": 0, "steps": 0, "shard": shard,
            "idempotency_key": new.idempotency_key or "",
        }
        events = [Event(EventType.SESSION_STARTED, at=new.created_at).to_fields()]
        events += [Event(EventType.STEP_SCHEDULED, step=j.key, attempt=j.attempt,
                         at=new.created_at).to_fields() for j in jobs]
        if new.status != SessionStatus.RUNNING:
            events.append(Event(EventType.session_became(new.status), at=new.created_at,
                                detail=new.error or new.paused_reason).to_fields())
        idem_key = k.idempotency(shard, new.idempotency_key or "-")
        res = await self.scripts.create(
            keys=[k.meta(sid), idem_key, k.events(sid), k.stream(shard), k.held(sid),
                  k.timers(shard), k.index_spec(shard, new.spec_hash),
                  *self._index_keys(shard)],
            args=[sid, dumps(fields), dumps([j.to_json() for j in jobs]), dumps(events),
                  new.idempotency_key or "", new.created_ms, new.status.value,
                  dumps([[due, _with_sid(j.to_json(), sid)] for due, j in new.timers]),
                  new.request_digest, self.events_max],
        )
        verdict, found = _decode(res[0]), _decode(res[1])
        if verdict == "conflict":
            raise IdempotencyConflict(new.idempotency_key or "")
        return found, verdict == "created"

    # -- the step path -------------------------------------------------------------
    async def gate(self, job: StepJob, entry_id: str, consumer: str, known_results: int,
                   started: Event) -> GateOutcome:
        k, sid = self.keys, job.session_id
        shard = k.shard(sid)
        res = await self.scripts.gate(
            keys=[k.meta(sid), k.stream(shard), k.held(sid), k.results(sid), k.order(sid),
                  k.events(sid)],
            args=[CONSUMER_GROUP, consumer, entry_id, job.key, job.to_json(), known_results,
                  dumps([started.to_fields()]), dumps(list(GATE_FIELDS)), job.kind,
                  self.events_max],
        )
        verdict = _decode(res[0])
        if verdict != "run":
            return GateOutcome(verdict)  # type: ignore[arg-type]
        values = [_decode(v) for v in res[1]]
        results = [StepResult.from_json(r) for r in res[3]]
        return GateOutcome("run", dict(zip(GATE_FIELDS, values, strict=True)), results)

    async def commit(self, req: CommitRequest) -> CommitOutcome:
        k, job = self.keys, req.job
        sid = job.session_id
        shard = k.shard(sid)
        lane = job.conversation_lane
        mode = "replace" if req.replace_conversation else "append" if req.new_messages else "none"
        # commit.lua appends the lane's length after this commit ("lane_len"), so a
        # fork from this checkpoint can cut the lane's conversation where it stood.
        checkpoint = dumps({"step": job.key, "attempt": job.attempt, "at": req.now_iso,
                            "status": req.status.value, "state": req.state,
                            "type": "step", "clean": True, "lane": lane})
        result_json, state_json = req.result.to_json(), dumps(req.state)
        messages = [dumps(m) for m in req.new_messages]
        jobs = [j.to_json() for j in req.next_jobs]
        res = await self.scripts.commit(
            keys=[k.meta(sid), k.results(sid), k.order(sid), k.events(sid), k.stream(shard),
                  k.conversation(sid, lane), k.conversations(sid), k.artifacts(sid),
                  k.checkpoints(sid), k.held(sid), k.timers(shard), *self._index_keys(shard)],
            args=[sid, job.key, req.entry_id, CONSUMER_GROUP, req.consumer,
                  req.expected_version, result_json, state_json,
                  req.status.value, req.reason, req.result.input_tokens,
                  req.result.output_tokens, job.agent, req.now_iso, req.now_ms, mode,
                  dumps(messages), lane, dumps(jobs), dumps(req.artifacts),
                  dumps([e.to_fields() for e in req.events]), checkpoint,
                  dumps(list(req.waiting)),
                  dumps([[due, j.to_json()] for due, j in req.timers]), self.events_max],
        )
        verdict = _decode(res[0])
        if verdict == "ok":
            written = commit_bytes(result_json, state_json, messages, jobs, req.artifacts)
            return CommitOutcome("ok", int(_decode(res[1])), _decode(res[2]), written)
        if verdict == "conflict":
            return CommitOutcome("conflict", int(_decode(res[1]) or 0))
        return CommitOutcome(verdict)  # type: ignore[arg-type]

    async def fail_step(self, job: StepJob, entry_id: str, consumer: str, *,
                        retry_at_ms: int | None, error: str, events: Sequence[Event],
                        now_iso: str, now_ms: int) -> str:
        k, sid = self.keys, job.session_id
        shard = k.shard(sid)
        res = await self.scripts.fail_step(
            keys=[k.meta(sid), k.events(sid), k.stream(shard), k.timers(shard),
                  k.failed_jobs(sid), k.results(sid), *self._index_keys(shard)],
            args=[sid, job.key, entry_id, CONSUMER_GROUP, consumer,
                  "retry" if retry_at_ms is not None else "fail", retry_at_ms or 0,
                  job.retry().to_json(), job.to_json(), error, now_iso, now_ms,
                  dumps([e.to_fields() for e in events]), self.events_max],
        )
        return _decode(res[0])

    async def dead_letter(self, job: StepJob, entry_id: str, consumer: str, deliveries: int,
                          error: str, events: Sequence[Event], now_iso: str,
                          now_ms: int) -> str:
        k, sid = self.keys, job.session_id
        shard = k.shard(sid)
        res = await self.scripts.dead_letter(
            keys=[k.meta(sid), k.events(sid), k.stream(shard), k.dead(shard),
                  k.failed_jobs(sid), k.results(sid), *self._index_keys(shard)],
            args=[sid, job.key, entry_id, CONSUMER_GROUP, consumer, job.to_json(), deliveries,
                  error, now_iso, now_ms, dumps([e.to_fields() for e in events]),
                  self.events_max],
        )
        return _decode(res[0])

    async def ack(self, shard: int, entry_id: str) -> None:
        """Drop an entry that has nothing left to do."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.xack(self.keys.stream(shard), CONSUMER_GROUP, entry_id)
            pipe.xdel(self.keys.stream(shard), entry_id)
            await pipe.execute()

    async def renew(self, shard: int, entry_id: str, consumer: str) -> bool:
        res = await self.scripts.renew(keys=[self.keys.stream(shard)],
                                       args=[CONSUMER_GROUP, consumer, entry_id])
        return bool(res)

    async def release(self, shard: int, entry_ids: Sequence[str], consumer: str,
                      idle_ms: int) -> int:
        """Hand entries we hold back to the group for immediate re-claim."""
        if not entry_ids:
            return 0
        res = await self.scripts.release(keys=[self.keys.stream(shard)],
                                         args=[CONSUMER_GROUP, consumer, idle_ms, *entry_ids])
        return int(res)

    async def retire_consumer(self, consumer: str, min_idle_ms: int = 0,
                              shards: Sequence[int] | None = None) -> int:
        """Drop `consumer` from each shard's group (every shard by default) where it holds
        nothing pending and has been idle `min_idle_ms`, so `durable workers` lists no
        long-gone workers."""
        retired = 0
        for shard in range(self.keys.shards) if shards is None else shards:
            retired += int(await self.scripts.retire_consumer(
                keys=[self.keys.stream(shard)], args=[CONSUMER_GROUP, consumer, min_idle_ms]))
        return retired

    async def promote_timers(self, shard: int, now_ms: int, limit: int = 100,
                             session_id: str | None = None) -> int:
        """Move due timers onto the stream: every session's, or `session_id`'s alone."""
        only = check_session_id(session_id) if session_id else ""
        res = await self.scripts.promote_timers(
            keys=[self.keys.timers(shard), self.keys.stream(shard)], args=[now_ms, limit, only])
        return int(res)

    # -- one session's entries (`durable run`, worker/embedded.py) -------------------------
    async def claim_new_entries(self, session_id: str, consumer: str, after: str, count: int,
                                scan: int = 500) -> ClaimedEntries:
        """Entries of `session_id` after `after` that nobody was handed yet, made pending
        under `consumer` (up to `count`; at most `scan` entries looked at)."""
        return await self._claim(session_id, consumer, "new", after, count, scan, 0)

    async def claim_idle_entries(self, session_id: str, consumer: str, cursor: str,
                                 count: int, min_idle_ms: int, scan: int = 100
                                 ) -> ClaimedEntries:
        """Entries of `session_id` pending under another consumer, idle `min_idle_ms`."""
        return await self._claim(session_id, consumer, "idle", cursor, count, scan, min_idle_ms)

    async def _claim(self, session_id: str, consumer: str, mode: str, cursor: str, count: int,
                     scan: int, min_idle_ms: int) -> ClaimedEntries:
        shard = self.keys.shard(session_id)
        res = await self.scripts.claim_session(
            keys=[self.keys.stream(shard)],
            args=[CONSUMER_GROUP, consumer, session_id, mode, cursor, max(1, count), scan,
                  min_idle_ms])
        entries = [(_decode(e[0]), {_decode(e[1][i]): _decode(e[1][i + 1])
                                    for i in range(0, len(e[1]), 2)}) for e in res[1]]
        return ClaimedEntries(_decode(res[0]), entries, bool(int(res[2])))

    async def wait_for_entries(self, shard: int, after: str, block_ms: int) -> bool:
        """Block until the shard's stream has an entry after `after` (a plain read: it
        takes nothing from the group); False when `block_ms` passed first."""
        reply = await self.redis.xread({self.keys.stream(shard): after}, count=1,
                                       block=block_ms)
        return bool(reply)

    async def dead_letter_raw(self, shard: int, entry_id: str, fields: dict[str, str],
                              error: str) -> None:
        """Park an entry that is not a step job at all (nothing to fail but the entry)."""
        async with self.redis.pipeline(transaction=True) as pipe:
            parked: dict[Any, Any] = {**fields, "entry": entry_id, "error": error}
            pipe.xadd(self.keys.dead(shard), parked)
            pipe.xack(self.keys.stream(shard), CONSUMER_GROUP, entry_id)
            pipe.xdel(self.keys.stream(shard), entry_id)
            await pipe.execute()

    async def add_event(self, session_id: str, event: Event) -> None:
        await self.redis.xadd(self.keys.events(session_id), event.to_fields(),  # type: ignore[arg-type]
                              maxlen=self.events_max, approximate=True)

    async def control(self, session_id: str, action: str, *, reason: str = "",
                      events: Sequence[Event] = (), sets: dict[str, Any] | None = None,
                      now_iso: str, now_ms: int) -> tuple[str, str]:
        """pause | resume | cancel; returns (verdict, status or detail)."""
        k = self.keys
        shard = k.shard(session_id)
        res = await self.scripts.control(
            keys=[k.meta(session_id), k.events(session_id), k.stream(shard),
                  k.held(session_id), k.failed_jobs(session_id), *self._index_keys(shard)],
            args=[session_id, action, now_iso, now_ms, reason,
                  dumps([e.to_fields() for e in events]), dumps(sets or {}), self.events_max],
        )
        return _decode(res[0]), _decode(res[1]) if len(res) > 1 else ""

    # -- reads ---------------------------------------------------------------------
    async def plan_fields(self, session_id: str) -> dict[str, str]:
        """The meta fields a commit is planned from (what the gate script returns)."""
        values = await self.redis.hmget(self.keys.meta(session_id), list(GATE_FIELDS))
        return {k: _decode(v) for k, v in zip(GATE_FIELDS, values, strict=True)}

    async def get_session(self, session_id: str) -> SessionRecord:
        h = await self.redis.hgetall(self.keys.meta(session_id))
        if not h or "status" not in h:
            raise SessionNotFound(session_id)
        return SessionRecord.from_hash(session_id, _decode_map(h))

    async def exists(self, session_id: str) -> bool:
        return bool(await self.redis.exists(self.keys.meta(session_id)))

    async def spec_json(self, session_id: str) -> str:
        value = await self.redis.hget(self.keys.meta(session_id), "spec_json")
        if value is None:
            raise SessionNotFound(session_id)
        return _decode(value)

    async def results(self, session_id: str, start: int = 0) -> list[StepResult]:
        keys = [_decode(x) for x in await self.redis.lrange(self.keys.order(session_id), start, -1)]
        if not keys:
            return []
        values = await self.redis.hmget(self.keys.results(session_id), keys)
        return [StepResult.from_json(v) for v in values if v is not None]

    async def events(self, session_id: str, after: str = "-", count: int | None = None
                     ) -> list[tuple[str, dict[str, str]]]:
        start = after if after == "-" else f"({after}"
        entries = await self.redis.xrange(self.keys.events(session_id), start, "+", count=count)
        return [(_decode(eid), _decode_map(f)) for eid, f in entries]

    async def conversation(self, session_id: str, lane: str, window: int) -> list[dict[str, Any]]:
        if window <= 0:
            return []
        raw = await self.redis.lrange(self.keys.conversation(session_id, lane), -window, -1)
        messages = [json.loads(m) for m in raw]
        # A restored history must open with a user turn: drop a dangling assistant head.
        while messages and messages[0].get("role") != "user":
            messages.pop(0)
        return messages

    async def failed_steps(self, session_id: str) -> list[str]:
        """Keys of the steps that failed past their retries and await a resume."""
        return [_decode(k) for k in await self.redis.hkeys(self.keys.failed_jobs(session_id))]

    async def artifacts(self, session_id: str) -> dict[str, str]:
        return _decode_map(await self.redis.hgetall(self.keys.artifacts(session_id)))

    async def checkpoints(self, session_id: str) -> list[dict[str, Any]]:
        raw = await self.redis.lrange(self.keys.checkpoints(session_id), 0, -1)
        return [{"n": i + 1, **json.loads(r)} for i, r in enumerate(raw)]

    async def list_sessions(self, status: SessionStatus | None = None, limit: int = 100,
                            ) -> list[SessionRecord]:
        """Most recently updated first, merged across shards."""
        scored: list[tuple[float, str]] = []
        for shard in range(self.keys.shards):
            key = (self.keys.index_status(shard, status) if status
                   else self.keys.index_all(shard))
            for sid, score in await self.redis.zrevrange(key, 0, limit - 1, withscores=True):
                scored.append((score, _decode(sid)))
        scored.sort(reverse=True)
        records = []
        for _, sid in scored[:limit]:
            try:
                records.append(await self.get_session(sid))
            except SessionNotFound:
                continue  # deleted between the index read and now
        return records

    # -- delete ------------------------------------------------------------------------
    async def delete_session(self, session_id: str) -> None:
        k = self.keys
        shard = k.shard(session_id)
        idem, spec_hash = await self.redis.hmget(k.meta(session_id),
                                                 ["idempotency_key", "spec_hash"])
        others = [key for key in k.session_keys(session_id)
                  if key not in (k.meta(session_id), k.conversations(session_id))]
        deleted = await self.scripts.delete(
            keys=[k.meta(session_id), k.conversations(session_id),
                  k.stored_idempotency(shard, _decode(idem) if idem else "-"), *others,
                  *self._index_keys(shard)],
            args=[session_id, k.conversation_prefix(session_id), len(others)],
        )
        if not deleted:
            raise SessionNotFound(session_id)
        if spec_hash:
            await self.redis.zrem(k.index_spec(shard, _decode(spec_hash)), session_id)

    # -- operator: requeue and fork (scheduler/requeue.py, scheduler/checkpoints.py) ------
    async def failed_jobs(self, session_id: str) -> dict[str, str]:
        """Step key -> the job JSON of each step that failed for good (or dead-lettered)."""
        return _decode_map(await self.redis.hgetall(self.keys.failed_jobs(session_id)))

    async def dead_letters(self, shard: int) -> list[tuple[str, dict[str, str]]]:
        entries = await self.redis.xrange(self.keys.dead(shard), "-", "+")
        return [(_decode(eid), _decode_map(f)) for eid, f in entries]

    async def drop_dead_letters(self, shard: int, entry_ids: Sequence[str]) -> int:
        if not entry_ids:
            return 0
        return int(await self.redis.xdel(self.keys.dead(shard), *entry_ids))

    async def committed_steps(self, session_id: str, steps: Sequence[str]) -> set[str]:
        if not steps:
            return set()
        async with self.redis.pipeline(transaction=False) as pipe:
            for step in steps:
                pipe.hexists(self.keys.results(session_id), step)
            found = await pipe.execute()
        return {step for step, hit in zip(steps, found, strict=True) if hit}

    async def requeue_steps(self, session_id: str, steps: Sequence[tuple[str, str, str]],
                            dead_ids: Sequence[str], *, events: Sequence[Event],
                            resumed: Sequence[Event], now_iso: str, now_ms: int,
                            ) -> tuple[str, str]:
        """Enqueue (step, failed job as read, job to enqueue) triples atomically; returns
        ('ok', status) | ('gone', '') | ('invalid', status) | ('changed', step)."""
        k = self.keys
        shard = k.shard(session_id)
        res = await self.scripts.requeue(
            keys=[k.meta(session_id), k.events(session_id), k.stream(shard),
                  k.failed_jobs(session_id), k.held(session_id), k.results(session_id),
                  k.dead(shard), *self._index_keys(shard)],
            args=[session_id, dumps([list(s) for s in steps]), dumps(list(dead_ids)), now_iso,
                  now_ms, dumps([e.to_fields() for e in events]),
                  dumps([e.to_fields() for e in resumed]), self.events_max],
        )
        return _decode(res[0]), _decode(res[1]) if len(res) > 1 else ""

    def fresh_session_id(self) -> str:
        shards = self.keys.shards
        return new_session_id(random.randrange(shards), shards)

    async def step_order(self, session_id: str, count: int) -> list[str]:
        """The first `count` committed step keys, in commit order."""
        if count <= 0:
            return []
        return [_decode(x) for x in
                await self.redis.lrange(self.keys.order(session_id), 0, count - 1)]

    async def results_of(self, session_id: str, steps: Sequence[str]) -> list[StepResult]:
        if not steps:
            return []
        values = await self.redis.hmget(self.keys.results(session_id), list(steps))
        return [StepResult.from_json(v) for v in values if v is not None]

    async def checkpoint_texts(self, session_id: str, count: int) -> list[str]:
        """The first `count` checkpoints as stored (JSON text)."""
        if count <= 0:
            return []
        return [_decode(x) for x in
                await self.redis.lrange(self.keys.checkpoints(session_id), 0, count - 1)]

    async def checkpoint_count(self, session_id: str) -> int:
        return int(await self.redis.llen(self.keys.checkpoints(session_id)))

    async def conversation_head(self, session_id: str, lane: str, length: int) -> list[str]:
        """The first `length` messages of a lane, as stored (JSON text)."""
        if length <= 0:
            return []
        return [_decode(x) for x in
                await self.redis.lrange(self.keys.conversation(session_id, lane), 0, length - 1)]

    async def create_fork(self, session_id: str, fork: NewFork) -> None:
        k, sid = self.keys, session_id
        shard = k.shard(sid)
        lanes = list(fork.lanes)
        res = await self.scripts.fork(
            keys=[k.meta(sid), k.results(sid), k.order(sid), k.events(sid), k.stream(shard),
                  k.conversations(sid), k.checkpoints(sid), k.held(sid), k.timers(shard),
                  k.index_spec(shard, str(fork.fields["spec_hash"])),
                  *[k.conversation(sid, lane) for lane, _ in lanes], *self._index_keys(shard)],
            args=[sid, dumps({**fork.fields, "session_id": sid, "shard": shard}),
                  dumps([list(r) for r in fork.results]), dumps(list(fork.checkpoints)),
                  dumps([[lane, list(msgs)] for lane, msgs in lanes]),
                  dumps([j.to_json() for j in fork.jobs]),
                  dumps([e.to_fields() for e in fork.events]), fork.status.value,
                  fork.created_ms, dumps([[due, j.to_json()] for due, j in fork.timers]),
                  self.events_max],
        )
        if _decode(res[0]) != "created":
            raise ConfigError(f"session id {sid} exists already; fork not created")


@dataclass(frozen=True)
class NewFork:
    """A session forked from a checkpoint, as fork.lua writes it."""

    fields: dict[str, Any]  # meta hash fields (spec snapshot, state, tokens, ...)
    results: Sequence[tuple[str, str]]  # (step, result JSON) in commit order
    checkpoints: Sequence[str]  # checkpoint JSON texts, 1..n
    lanes: Sequence[tuple[str, Sequence[str]]]  # (lane, message JSON texts)
    jobs: Sequence[StepJob]
    events: Sequence[Event]
    status: SessionStatus
    created_ms: int
    timers: Sequence[tuple[int, StepJob]] = ()


def _with_sid(job_json: str, sid: str) -> str:
    """Jobs planned before the session id existed get it filled in."""
    data = json.loads(job_json)
    data["session_id"] = sid
    return dumps(data)


def _decode(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode()
    return "" if value is None else str(value)


def _decode_map(h: dict[Any, Any]) -> dict[str, str]:
    return {_decode(k): _decode(v) for k, v in h.items()}
