"""The step path's scripts and their KEYS/ARGV contracts (fields in order; an
`index` field is the six status index keys, always last among KEYS)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from strands_durable.store.script_library import IndexKeys, ScriptLibrary


# -- create.lua ---------------------------------------------------------------------
@dataclass(frozen=True)
class CreateKeys:
    meta: str
    idempotency: str  # the idempotency key's record (a dummy in the same slot if none)
    events: str
    stream: str
    held: str
    timers: str
    spec_index: str  # `run --auto-resume` finds the latest session of a spec here
    index: IndexKeys


@dataclass(frozen=True)
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


# -- gate.lua -----------------------------------------------------------------------
@dataclass(frozen=True)
class GateKeys:
    meta: str
    stream: str
    held: str
    results: str
    order: str
    events: str
    journal: str  # the step's journal (model turns and tool results to replay)


@dataclass(frozen=True)
class GateArgs:
    group: str
    consumer: str
    entry_id: str
    step: str
    job: str  # job JSON
    known_results: int  # results the caller has already
    started: str  # the step_started event, JSON array of one field map
    wanted: str  # meta fields to return, JSON array
    kind: str  # the job's kind (a HITL timeout must get through a paused session)
    events_max: int


# -- take.lua -----------------------------------------------------------------------
@dataclass(frozen=True)
class TakeSpelling:
    """How take.lua and commit.lua spell the keys of any session on a shard from a
    stream entry's session id: prefix + id (+ suffix; Keys.session_suffixes)."""

    session_prefix: str
    results: str
    order: str
    events: str
    held: str
    journal_prefix: str  # + the step key: the step's journal
    conversation_prefix: str  # + the lane: the step's conversation
    wanted: str  # meta fields to return, JSON array
    page: int  # conversation items returned (the newest)


@dataclass(frozen=True)
class TakeKeys:
    stream: str
    unwritten: str  # never written: keeps the script off a half-moved slot (Keys.unwritten)


@dataclass(frozen=True)
class TakeArgs:
    group: str
    consumer: str
    count: int  # new entries to read and gate
    now_iso: str  # the step_started event's time
    events_max: int
    ids: str  # entries read already (blocking XREADGROUP), space-separated, to gate first
    spelling: TakeSpelling


# -- commit.lua ---------------------------------------------------------------------
@dataclass(frozen=True)
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


@dataclass(frozen=True)
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
    next_jobs: str  # JSON array of job JSON texts
    artifacts: str  # JSON object
    events: str  # JSON array of event field maps
    checkpoint: str  # checkpoint JSON (the script appends the lane's length)
    waiting: str  # steps waiting for a human, JSON array
    timers: str  # JSON array of [due ms, job JSON]
    events_max: int
    answers_human: int  # 1: a human's answer, which resumes a session paused for it
    take: int  # new entries to take and gate after an 'ok' (the worker's free slots)
    spelling: TakeSpelling


# -- fail_step.lua ------------------------------------------------------------------
@dataclass(frozen=True)
class FailStepKeys:
    meta: str
    events: str
    stream: str
    timers: str
    failed_jobs: str
    results: str
    index: IndexKeys


@dataclass(frozen=True)
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
@dataclass(frozen=True)
class DeadLetterKeys:
    meta: str
    events: str
    stream: str
    dead: str
    failed_jobs: str
    results: str
    index: IndexKeys


@dataclass(frozen=True)
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
@dataclass(frozen=True)
class JournalKeys:
    stream: str
    journal: str
    journals: str  # the set of steps with a journal
    events: str


@dataclass(frozen=True)
class JournalArgs:
    group: str
    consumer: str
    entry_id: str
    step: str
    field: str  # m<turn> | t<ordinal>; '' writes only the events
    value: str
    events: str  # JSON array of event field maps
    events_max: int


# -- one stream: renew.lua, release.lua, promote_timers.lua, claim_session.lua ---------
@dataclass(frozen=True)
class StreamKeys:
    stream: str


@dataclass(frozen=True)
class RenewArgs:
    group: str
    consumer: str
    entry_id: str


@dataclass(frozen=True)
class ReleaseArgs:
    group: str
    consumer: str
    idle_ms: int  # the idle time to set, so the next XAUTOCLAIM takes them at once
    entry_ids: tuple[str, ...]


@dataclass(frozen=True)
class PromoteTimersKeys:
    timers: str
    stream: str


@dataclass(frozen=True)
class PromoteTimersArgs:
    now_ms: int
    limit: int
    only_session: str  # '' for every session's timers


@dataclass(frozen=True)
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
@dataclass(frozen=True)
class ParkEntryKeys:
    stream: str
    dead: str  # the shard's dead-letter stream


@dataclass(frozen=True)
class ParkEntryArgs:
    group: str
    consumer: str
    entry_id: str
    error_text: str
    fields: str  # the entry's own fields, JSON object


class StepScripts(ScriptLibrary):
    async def create(self, *, keys: CreateKeys, args: CreateArgs) -> list[Any]:
        """['created' | 'exists' | 'conflict', session id]."""
        return list(await self._call("create", keys, args))

    async def gate(self, *, keys: GateKeys, args: GateArgs) -> list[Any]:
        """['run', wanted values, _, new results] or [verdict]."""
        return list(await self._call("gate", keys, args))

    async def take(self, *, keys: TakeKeys, args: TakeArgs) -> list[Any]:
        """Per entry gated: [id, fields, verdict] (+ wanted values, commit-order length,
        journal fields, lane length and page when 'run'); [] when there was none."""
        return list(await self._call("take", keys, args))

    async def commit(self, *, keys: CommitKeys, args: CommitArgs) -> list[Any]:
        """['ok', version, status, position, taken (as take)] | ['conflict', version]
        | [verdict]."""
        return list(await self._call("commit", keys, args))

    async def fail_step(self, *, keys: FailStepKeys, args: FailStepArgs) -> list[Any]:
        return list(await self._call("fail_step", keys, args))

    async def dead_letter(self, *, keys: DeadLetterKeys, args: DeadLetterArgs) -> list[Any]:
        return list(await self._call("dead_letter", keys, args))

    async def renew(self, *, keys: StreamKeys, args: RenewArgs) -> int:
        return int(await self._call("renew", keys, args) or 0)

    async def release(self, *, keys: StreamKeys, args: ReleaseArgs) -> int:
        return int(await self._call("release", keys, args) or 0)

    async def promote_timers(self, *, keys: PromoteTimersKeys, args: PromoteTimersArgs
                             ) -> int:
        return int(await self._call("promote_timers", keys, args) or 0)

    async def journal(self, *, keys: JournalKeys, args: JournalArgs) -> int:
        """1 if written, 0 if the entry is no longer this consumer's."""
        return int(await self._call("journal", keys, args) or 0)

    async def park_entry(self, *, keys: ParkEntryKeys, args: ParkEntryArgs) -> int:
        """1 if parked, 0 if the entry is no longer this consumer's."""
        return int(await self._call("park_entry", keys, args) or 0)

    async def claim_session(self, *, keys: StreamKeys, args: ClaimSessionArgs) -> list[Any]:
        """[next cursor, [[entry id, flat fields], ...], at end 0/1]."""
        return list(await self._call("claim_session", keys, args))
