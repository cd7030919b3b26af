"""The step path's scripts and their KEYS/ARGV contracts (fields in order; an
`index` field is the six status index keys, always last among KEYS), and their replies
decoded (gate.lua and take.lua: script_gate.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from strands_durable.models import Event
from strands_durable.store.codec import as_str, flat_maps
from strands_durable.store.records import ClaimedEntries, TakenEntry
from strands_durable.store.script_gate import FairArgs, TakeSpelling, decode_taken, pairs
from strands_durable.store.script_library import IndexKeys, ScriptLibrary, Verdict


# -- create.lua ---------------------------------------------------------------------
@dataclass(slots=True)
class CreateKeys:
    meta: str
    idempotency: str  # the idempotency key's record (a dummy in the same slot if none)
    events: str
    stream: str
    held: str
    timers: str
    spec_index: str  # `run --auto-resume` finds the latest session of a spec here
    fair_on: str  # namespaces other than default seen lately (Keys.fair + ':on')
    index: IndexKeys


@dataclass(slots=True)
class CreateArgs:
    session_id: str
    fields: str  # meta hash fields, JSON object
    jobs: str  # JSON array of job JSON texts
    events: str  # JSON array of event field maps
    idempotency: str  # the idempotency key itself, '' for none
    now_ms: int
    status: str
    timers: str  # JSON array of [due ms, job JSON]
    request_digest: str
    events_max: int


# -- commit.lua ---------------------------------------------------------------------
@dataclass(slots=True)
class CommitKeys:
    meta: str
    results: str
    order: str
    events: str
    stream: str
    conversation: str  # the lane's conversation list
    conversations: str  # the set of the session's lanes
    artifacts: str
    checkpoints: str
    held: str
    timers: str
    journal: str  # the step's journal, dropped with the commit
    journals: str  # the set of steps with a journal
    took: str  # what the commit took, for a retry whose first reply was lost
    unwritten: str  # never written: keeps the take off a half-moved slot (Keys.unwritten)
    index: IndexKeys


@dataclass(slots=True)
class CommitArgs:
    session_id: str
    step: str
    entry_id: str  # '' for a step no stream entry carried (a human's answer)
    group: str
    consumer: str
    expected_version: int
    result: str  # result JSON
    state: str  # new pattern state JSON
    decided: str  # the status the planner decided
    reason: str  # error or pause reason
    input_tokens: int
    output_tokens: int
    agent: str  # whose token count (`tok:<agent>`) grows
    now_iso: str
    now_ms: int
    conversation_mode: str  # none | append | replace
    messages: str  # JSON array of message JSON texts
    lane: str
    artifacts: str  # JSON object
    events_count: int  # how many values `events` holds
    checkpoint: str  # checkpoint JSON (the script appends the lane's length)
    waiting: str  # steps waiting for a human, JSON array
    timers: str  # JSON array of [due ms, job JSON]
    events_max: int
    answers_human: int  # 1: a human's answer, which resumes a session paused for it
    take: int  # new entries to take and gate after an 'ok' (the worker's free slots)
    spelling: TakeSpelling
    fair: FairArgs
    events: tuple[str, ...]  # each event: its count of fields and values, then those
    # The steps it schedules, five values each: what their stream entries carry beside
    # the job (step, attempt, conversation lane, kind; StepJob.to_fields), its JSON last.
    next_jobs: tuple[str, ...]


def event_values(events: Sequence[Event]) -> tuple[str, ...]:
    """Events as commit.lua reads them, with nothing to decode (codec.flat_maps)."""
    return tuple(flat_maps([], (event.to_fields() for event in events)))


# -- fail_step.lua ------------------------------------------------------------------
@dataclass(slots=True)
class FailStepKeys:
    meta: str
    events: str
    stream: str
    timers: str
    failed_jobs: str
    results: str
    index: IndexKeys


@dataclass(slots=True)
class FailStepArgs:
    session_id: str
    step: str
    entry_id: str
    group: str
    consumer: str
    mode: str  # retry | fail
    due_ms: int
    retry_job: str  # job JSON of the next attempt
    job: str  # this attempt's job JSON
    error_text: str
    now_iso: str
    now_ms: int
    events: str  # JSON array of event field maps
    events_max: int


# -- dead_letter.lua ----------------------------------------------------------------
@dataclass(slots=True)
class DeadLetterKeys:
    meta: str
    events: str
    stream: str
    dead: str
    failed_jobs: str
    results: str
    index: IndexKeys


@dataclass(slots=True)
class DeadLetterArgs:
    session_id: str
    step: str
    entry_id: str
    group: str
    consumer: str
    job: str
    deliveries: int
    error_text: str
    now_iso: str
    now_ms: int
    events: str
    events_max: int


# -- journal.lua ----------------------------------------------------------------------
@dataclass(slots=True)
class JournalKeys:
    stream: str
    journal: str
    journals: str  # the set of steps with a journal
    events: str
    meta: str


@dataclass(slots=True)
class JournalArgs:
    group: str
    consumer: str
    entry_id: str
    step: str
    field: str  # m<turn> | t<ordinal>; '' writes only the events
    value: str
    events: str  # JSON array of event field maps
    events_max: int
    wait_from_ms: int = 0  # a capacity wait to leave out of the session's clock
    wait_to_ms: int = 0  # (0: none)


# -- one stream: renew.lua, release.lua, promote_timers.lua, claim_session.lua ---------
@dataclass(slots=True)
class StreamKeys:
    stream: str


@dataclass(slots=True)
class RenewArgs:
    group: str
    consumer: str
    entry_id: str


@dataclass(slots=True)
class ReleaseArgs:
    group: str
    consumer: str
    idle_ms: int  # the idle time to set, so the next XAUTOCLAIM takes them at once
    entry_ids: tuple[str, ...]


@dataclass(slots=True)
class PromoteTimersKeys:
    timers: str
    stream: str
    fair_on: str  # the shard's fair-dispatch keys (Keys.fair): whether takes must look
    fair_ready: str


@dataclass(slots=True)
class PromoteTimersArgs:
    now_ms: int
    limit: int
    only_session: str  # '' for every session's timers


@dataclass(slots=True)
class ClaimSessionArgs:
    group: str
    consumer: str
    session_id: str
    mode: str  # new | idle
    cursor: str
    count: int
    scan: int  # entries looked at, at most
    min_idle_ms: int


# -- park_entry.lua -----------------------------------------------------------------
@dataclass(slots=True)
class ParkEntryKeys:
    stream: str
    dead: str  # the shard's dead-letter stream


@dataclass(slots=True)
class ParkEntryArgs:
    group: str
    consumer: str
    entry_id: str
    error_text: str
    fields: str  # the entry's own fields, JSON object


# -- replies ----------------------------------------------------------------------------
class CommitReply(NamedTuple):
    """commit.lua's reply: {'ok', version, status, place in commit order, taken} |
    {'conflict', version} | {'stale', taken} (what a commit applied before took, its
    reply lost) | {'gone'} | {'duplicate'}; `taken` as take.lua's. A typed NamedTuple,
    not a frozen dataclass: one is made on every step, and it costs 2 us less."""

    verdict: str
    version: int = 0
    status: str = ""
    position: int = 0
    taken: tuple[TakenEntry, ...] = ()

    @classmethod
    def decode(cls, reply: Any) -> CommitReply:
        verdict = as_str(reply[0])
        if verdict == "ok":
            return cls(verdict, int(as_str(reply[1])), as_str(reply[2]), int(reply[3]),
                       tuple(map(decode_taken, reply[4])))
        if verdict == "conflict":
            return cls(verdict, int(as_str(reply[1]) or 0))
        if verdict == "stale" and len(reply) > 1:
            return cls(verdict, taken=tuple(map(decode_taken, reply[1])))
        return cls(verdict)


def decode_claimed(reply: Any) -> ClaimedEntries:
    """claim_session.lua: {next cursor, {{entry id, flat fields}, ...}, at end 0|1}."""
    return ClaimedEntries(as_str(reply[0]), [(as_str(e[0]), pairs(e[1])) for e in reply[1]],
                          bool(int(reply[2])))


class StepScripts(ScriptLibrary):
    async def create(self, *, keys: CreateKeys, args: CreateArgs) -> Verdict:
        """'created' | 'exists' | 'conflict', and the session id."""
        return Verdict.decode(await self._call("create", keys, args))

    async def commit(self, *, keys: CommitKeys, args: CommitArgs) -> CommitReply:
        return CommitReply.decode(await self._call("commit", keys, args))

    async def fail_step(self, *, keys: FailStepKeys, args: FailStepArgs) -> Verdict:
        """'ok' and the session's status | 'stale' | 'gone' | 'duplicate'."""
        return Verdict.decode(await self._call("fail_step", keys, args))

    async def dead_letter(self, *, keys: DeadLetterKeys, args: DeadLetterArgs) -> Verdict:
        """'ok' | 'stale' | 'gone' | 'duplicate'."""
        return Verdict.decode(await self._call("dead_letter", keys, args))

    async def renew(self, *, keys: StreamKeys, args: RenewArgs) -> int:
        return int(await self._call("renew", keys, args) or 0)

    async def release(self, *, keys: StreamKeys, args: ReleaseArgs) -> int:
        return int(await self._call("release", keys, args) or 0)

    async def promote_timers(self, *, keys: PromoteTimersKeys, args: PromoteTimersArgs
                             ) -> tuple[int, bool]:
        """(timers moved, whether the shard's takes must look for fairness state)."""
        moved, fair = await self._call("promote_timers", keys, args)
        return int(moved or 0), bool(fair)

    async def journal(self, *, keys: JournalKeys, args: JournalArgs) -> int:
        """1 if written, 0 if the entry is no longer this consumer's."""
        return int(await self._call("journal", keys, args) or 0)

    async def park_entry(self, *, keys: ParkEntryKeys, args: ParkEntryArgs) -> int:
        """1 if parked, 0 if the entry is no longer this consumer's."""
        return int(await self._call("park_entry", keys, args) or 0)

    async def claim_session(self, *, keys: StreamKeys, args: ClaimSessionArgs
                            ) -> ClaimedEntries:
        return decode_claimed(await self._call("claim_session", keys, args))
