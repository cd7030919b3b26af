"""The scripts of operators (control, requeue, fork, delete), locks and the fleet's
upkeep (retiring consumers, flagging stuck sessions), with their KEYS/ARGV contracts
(fields in order; an `index` field is the six status index keys, always last), and
their replies decoded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from strands_durable.store.codec import as_str
from strands_durable.store.liveness import Declaration
from strands_durable.store.script_gate import pairs
from strands_durable.store.script_library import IndexKeys, ScriptLibrary, Verdict
from strands_durable.store.script_step import StreamKeys


# -- control.lua --------------------------------------------------------------------
@dataclass(slots=True)
class ControlKeys:
    meta: str
    events: str
    stream: str
    held: str
    failed_jobs: str
    spec_index: str  # of the spec hash a resume sets (a key never written if none)
    index: IndexKeys


@dataclass(slots=True)
class ControlArgs:
    session_id: str
    action: str  # pause | resume | cancel
    now_iso: str
    now_ms: int
    reason: str
    events: str  # JSON array of event field maps
    sets: str  # meta fields a resume sets, JSON object ('{}' for none)
    events_max: int


# -- requeue.lua --------------------------------------------------------------------
@dataclass(slots=True)
class RequeueKeys:
    meta: str
    events: str
    stream: str
    failed_jobs: str
    held: str
    results: str
    dead: str
    index: IndexKeys


@dataclass(slots=True)
class RequeueArgs:
    session_id: str
    steps: str  # JSON array of [step, failed job JSON as read, job JSON to enqueue]
    dead_ids: str  # dead-letter entry ids to drop, JSON array
    now_iso: str
    now_ms: int
    events: str  # the steps' events, JSON array
    resumed_events: str  # written if the session resumes, JSON array
    events_max: int


# -- fork.lua -----------------------------------------------------------------------
@dataclass(slots=True)
class ForkKeys:
    meta: str
    results: str
    order: str
    events: str
    stream: str
    conversations: str
    checkpoints: str
    held: str
    timers: str
    spec_index: str
    lanes: tuple[str, ...]  # one conversation key per lane, in ForkArgs.lanes' order
    index: IndexKeys


@dataclass(slots=True)
class ForkArgs:
    session_id: str
    fields: str  # meta hash fields, JSON object
    results: str  # JSON array of [step, result JSON]
    checkpoints: str  # JSON array of checkpoint JSON texts
    lanes: str  # JSON array of [lane, [message JSON, ...]]
    jobs: str  # JSON array of job JSON texts
    events: str
    status: str
    now_ms: int
    timers: str  # JSON array of [due ms, job JSON]
    events_max: int


# -- delete.lua ---------------------------------------------------------------------
@dataclass(slots=True)
class DeleteKeys:
    meta: str
    conversations: str
    journals: str  # the set of steps with a journal
    idempotency: str  # the idempotency key's record (or a dummy)
    spec_index: str  # the spec-hash index it is in (or a dummy)
    others: tuple[str, ...]  # the session's other keys
    lanes: tuple[str, ...]  # each conversation lane's key (the set's members, as read)
    journal_keys: tuple[str, ...]  # each step journal's key (the set's members, as read)
    index: IndexKeys


@dataclass(slots=True)
class DeleteArgs:
    session_id: str
    conversation_prefix: str
    others_count: int
    journal_prefix: str
    lanes_count: int
    journals_count: int


# -- ack.lua, lane_page.lua ---------------------------------------------------------
@dataclass(slots=True)
class AckArgs:
    group: str
    entry_id: str


@dataclass(slots=True)
class LaneKeys:
    lane: str


@dataclass(slots=True)
class LanePageArgs:
    page: int


# -- results_page.lua ----------------------------------------------------------------
@dataclass(slots=True)
class ResultsKeys:
    order: str
    results: str


@dataclass(slots=True)
class ResultsPageArgs:
    first: int
    last: int  # inclusive; -1: the end


# -- live_append.lua -----------------------------------------------------------------
@dataclass(slots=True)
class LiveAppendKeys:
    # Per session, its meta hash and its live stream (sessions of one shard: one slot).
    sessions: tuple[str, ...]


@dataclass(slots=True)
class LiveAppendArgs:
    maxlen: int
    ttl_s: int
    # Per session, in the order of its keys: its number of entries, then each entry as
    # its number of strings and its field, value, field, value, ...
    batches: tuple[str, ...]


# -- lock_release.lua, lock_extend.lua ------------------------------------------------
@dataclass(slots=True)
class LockKeys:
    lock: str


@dataclass(slots=True)
class LockReleaseArgs:
    token: str


@dataclass(slots=True)
class LockExtendArgs:
    token: str
    ttl_ms: int


# -- retire_consumer.lua ------------------------------------------------------------
@dataclass(slots=True)
class RetireConsumerArgs:
    group: str
    consumer: str
    min_idle_ms: int  # 0: any


# -- flag_stuck.lua -----------------------------------------------------------------
@dataclass(slots=True)
class FlagStuckKeys:
    meta: str
    running_index: str
    events: str


@dataclass(slots=True)
class FlagStuckArgs:
    session_id: str
    score: str  # the running index's score when the session was found stuck
    event_type: str  # no second flag while this is the last event
    events: str  # JSON array of event field maps
    events_max: int


# -- beat.lua, declare_dead.lua, claim_orphans.lua (fast failover) --------------------
@dataclass(slots=True)
class BeatKeys:
    beats: str
    deaths: str
    stream: str


@dataclass(slots=True)
class BeatArgs:
    consumer: str  # '' to look only (the scheduler)
    seq: int  # the beat's number: it changes with every beat
    group: str
    holder: str  # the consumer a dead one's entries wait under (store/liveness.py)


@dataclass(slots=True)
class DeclareDeadKeys:
    beats: str
    deaths: str
    orphans: str
    stream: str
    unwritten: str  # the session events spelled inside are in this slot


@dataclass(slots=True)
class DeclareDeadArgs:
    consumer: str
    seq: str  # its beat as the caller saw it last: any other and it is alive
    group: str
    holder: str
    idle_ms: int  # given to its entries, so that any re-claim takes them
    declared_by: str
    silent_ms: int  # how long the caller saw no beat from it
    now_iso: str
    events_max: int
    session_prefix: str
    events_suffix: str
    keep_ms: int  # declarations older than this are dropped
    detail: str  # the worker_declared_dead events' detail


@dataclass(slots=True)
class ClaimOrphansKeys:
    stream: str
    orphans: str
    deaths: str


@dataclass(slots=True)
class ClaimOrphansArgs:
    group: str
    consumer: str
    holder: str
    count: int


# -- the failover scripts' replies -------------------------------------------------------
@dataclass(frozen=True)
class BeatReply:
    """beat.lua: {flat beats, own declaration JSON or '', 1 if orphans wait}."""

    beats: dict[str, str]  # every consumer's beat number on the shard
    declared: Declaration | None  # we were declared dead since our last beat
    orphans_waiting: bool  # entries of a dead consumer wait for a worker

    @classmethod
    def decode(cls, reply: Any, consumer: str) -> BeatReply:
        raw = as_str(reply[1])
        return cls(pairs(reply[0]), Declaration.parse(consumer, raw) if raw else None,
                   bool(int(reply[2])))


@dataclass(frozen=True)
class Declared:
    """declare_dead.lua's {'declared', n, ids...} ({'alive'} decodes to None)."""

    entries: tuple[str, ...]  # taken from the dead consumer

    @classmethod
    def decode(cls, reply: Any) -> Declared | None:
        if as_str(reply[0]) != "declared":
            return None
        return cls(tuple(as_str(x) for x in reply[2:]))


@dataclass(frozen=True)
class Orphan:
    """An entry of a consumer declared dead, now pending under the caller."""

    entry_id: str
    fields: dict[str, str]
    deliveries: int
    dead: str  # the consumer it was taken from ('' if its record is gone)
    since_last_beat_s: float | None  # from the dead consumer's last beat to now


@dataclass(frozen=True)
class Orphans:
    """claim_orphans.lua: {1 if more wait, {{id, flat fields, deliveries, dead, ms since
    its last beat (-1: unknown)}, ...}}."""

    entries: list[Orphan]
    more: bool

    @classmethod
    def decode(cls, reply: Any) -> Orphans:
        more, items = reply
        return cls([Orphan(as_str(entry_id), pairs(raw), int(deliveries), as_str(dead),
                           int(since_ms) / 1000 if int(since_ms) >= 0 else None)
                    for entry_id, raw, deliveries, dead, since_ms in items], bool(int(more)))


class OperatorScripts(ScriptLibrary):
    async def control(self, *, keys: ControlKeys, args: ControlArgs) -> Verdict:
        """'ok' and the status | 'invalid' and the status | 'nothing' and the error |
        'gone'."""
        return Verdict.decode(await self._call("control", keys, args))

    async def requeue(self, *, keys: RequeueKeys, args: RequeueArgs) -> Verdict:
        """'ok' and the status | 'gone' | 'invalid' and the status | 'changed' and the
        step."""
        return Verdict.decode(await self._call("requeue", keys, args))

    async def fork(self, *, keys: ForkKeys, args: ForkArgs) -> Verdict:
        """'created' and the session id | 'exists'."""
        return Verdict.decode(await self._call("fork", keys, args))
    async def delete(self, *, keys: DeleteKeys, args: DeleteArgs) -> int:
        """1 when deleted, 0 when there was no such session, -1 when its lanes or
        journals changed since they were read (nothing deleted: read again)."""
        return int(await self._call("delete", keys, args) or 0)

    async def ack(self, *, keys: StreamKeys, args: AckArgs) -> None:
        await self._call("ack", keys, args)

    async def lane_page(self, *, keys: LaneKeys, args: LanePageArgs) -> tuple[int, list[Any]]:
        """A lane's length and its newest `page` messages, read together."""
        length, newest = await self._call("lane_page", keys, args)
        return int(length), list(newest)

    async def results_page(self, *, keys: ResultsKeys, args: ResultsPageArgs
                           ) -> list[bytes | str | None]:
        """Committed results' JSON in commit order, positions `first` to `last` (None
        where a key of the order has no result)."""
        return list(await self._call("results_page", keys, args) or [])

    async def live_append(self, *, keys: LiveAppendKeys, args: LiveAppendArgs) -> int:
        """How many sessions' batches were appended (a gone session's: not written)."""
        return int(await self._call("live_append", keys, args) or 0)

    async def lock_release(self, *, keys: LockKeys, args: LockReleaseArgs) -> int:
        return int(await self._call("lock_release", keys, args) or 0)

    async def lock_extend(self, *, keys: LockKeys, args: LockExtendArgs) -> int:
        return int(await self._call("lock_extend", keys, args) or 0)

    async def retire_consumer(self, *, keys: StreamKeys, args: RetireConsumerArgs) -> int:
        return int(await self._call("retire_consumer", keys, args) or 0)

    async def flag_stuck(self, *, keys: FlagStuckKeys, args: FlagStuckArgs) -> str:
        """'flagged' | 'already' (the last event flags it) | 'moved' (not running, or
        touched since it was found)."""
        reply = await self._call("flag_stuck", keys, args)
        return reply.decode() if isinstance(reply, bytes) else str(reply)

    async def beat(self, *, keys: BeatKeys, args: BeatArgs) -> BeatReply:
        return BeatReply.decode(await self._call("beat", keys, args), args.consumer)

    async def declare_dead(self, *, keys: DeclareDeadKeys, args: DeclareDeadArgs
                           ) -> Declared | None:
        """None when the consumer beat since (it is alive)."""
        return Declared.decode(await self._call("declare_dead", keys, args))

    async def claim_orphans(self, *, keys: ClaimOrphansKeys, args: ClaimOrphansArgs
                            ) -> Orphans:
        return Orphans.decode(await self._call("claim_orphans", keys, args))
