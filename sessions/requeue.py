"""Operator requeue: put failed or dead-lettered steps back on the stream.

A step fails for good when its retries run out (the failed-jobs hash) or when it is
delivered too often without finishing (also parked on its shard's dead-letter
stream). Once the cause is fixed, `requeue` enqueues it again with its attempts reset,
records `step_requeued`, drops its dead letters and, if the session had failed, makes
it running again: one atomic script per session (store/lua/requeue.lua), under the
session's operator lock. Which steps move is decided by pure functions below, so a
dry run shows exactly what a real run would do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from strands_durable.errors import Conflict, InvalidInput, InvalidTransition, SessionNotFound
from strands_durable.models import Event, EventType, SessionStatus, StepJob, now_iso, now_ms
from strands_durable.sessions.control import OPERATOR, session_lock
from strands_durable.store.keys import is_session_id
from strands_durable.store.store import Store

MAX_TRIES = 5  # re-reads when a worker changed the session between read and write
ERROR_CHARS = 300


class NothingToRequeue(Conflict):
    """The session has no failed or dead-lettered step (or not the one named)."""

    code = "nothing_to_requeue"

    def __init__(self, session_id: str, message: str, step: str | None = None) -> None:
        self.session_id = session_id
        self.step = step
        super().__init__(message)

    def details(self) -> dict[str, object]:
        return {"session_id": self.session_id, "step": self.step}


@dataclass(frozen=True)
class DeadLetter:
    """One entry of a shard's dead-letter stream."""

    shard: int
    entry: str
    session_id: str  # "" for an entry that is not a step job at all
    step: str
    deliveries: int
    error: str

    @classmethod
    def parse(cls, shard: int, entry: str, fields: Mapping[str, str]) -> DeadLetter:
        try:
            deliveries = int(fields.get("deliveries") or 0)
        except ValueError:
            deliveries = 0
        return cls(shard=shard, entry=entry, session_id=fields.get("sid", ""),
                   step=fields.get("step", ""), deliveries=deliveries,
                   error=fields.get("error", ""))


@dataclass(frozen=True)
class RequeuedStep:
    session_id: str
    step: str
    agent: str
    failed_attempt: int  # the attempt it failed on; it runs again as attempt 1
    dead_letters: tuple[str, ...]  # its entries on the dead-letter stream, dropped
    error: str  # why it was parked


@dataclass(frozen=True)
class SkippedEntry:
    """A dead letter that was not requeued, and whether it was dropped as resolved."""

    session_id: str
    step: str
    entry: str
    reason: str
    dropped: bool = False


@dataclass(frozen=True)
class RequeueReport:
    dry_run: bool
    requeued: tuple[RequeuedStep, ...] = ()
    skipped: tuple[SkippedEntry, ...] = ()
    # Session id -> its status after the requeue (in a dry run: what it would be).
    statuses: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- pure decisions -----------------------------------------------------------------
def choose_steps(session_id: str, status: SessionStatus, error: str | None,
                 failed: Mapping[str, str], dead_steps: set[str], *, step: str | None,
                 dead_only: bool) -> list[str]:
    """The steps a requeue moves, or the error that says why none can."""
    if status in (SessionStatus.COMPLETED, SessionStatus.CANCELLED):
        raise InvalidTransition(session_id, status.value, "requeue")
    candidates = sorted(s for s in failed if not dead_only or s in dead_steps)
    what = "dead-lettered" if dead_only else "failed or dead-lettered"
    if step is not None:
        if step in candidates:
            return [step]
        listed = ", ".join(candidates) if candidates else "none"
        raise NothingToRequeue(
            session_id, f"session {session_id}: step {step!r} is not {what} "
                        f"({what} steps: {listed})", step)
    if not candidates:
        why = f"it is {status.value}" + (f": {error}" if error else "")
        raise NothingToRequeue(session_id,
                               f"session {session_id} has no {what} step to requeue ({why})")
    return candidates


def plan_steps(session_id: str, steps: Sequence[str], failed: Mapping[str, str],
               letters: Sequence[DeadLetter]) -> list[RequeuedStep]:
    planned = []
    for step in steps:
        job = StepJob.from_json(failed[step])
        own = [d for d in letters if d.session_id == session_id and d.step == step]
        error = own[-1].error if own else ""
        planned.append(RequeuedStep(session_id=session_id, step=step, agent=job.agent,
                                    failed_attempt=job.attempt,
                                    dead_letters=tuple(d.entry for d in own),
                                    error=error[:ERROR_CHARS]))
    return planned


def requeue_events(planned: Sequence[RequeuedStep], at: str) -> list[Event]:
    events = []
    for p in planned:
        how = (f"dead-lettered: {p.error}" if p.dead_letters
               else f"failed on attempt {p.failed_attempt}")
        events.append(Event(EventType.STEP_REQUEUED, step=p.step, attempt=1, worker=OPERATOR, at=at,
                            detail=how[:ERROR_CHARS]))
    return events


def sort_letters(letters: Sequence[DeadLetter], *, exists: bool, committed: set[str],
                 status: SessionStatus | None, failed: Mapping[str, str],
                 ) -> tuple[list[DeadLetter], list[SkippedEntry]]:
    """One session's dead letters: those whose step can be requeued, and the rest with
    the reason (resolved ones, whose session is gone or step committed, are dropped)."""
    keep: list[DeadLetter] = []
    skipped: list[SkippedEntry] = []
    for d in letters:
        if not exists:
            skipped.append(SkippedEntry(d.session_id, d.step, d.entry,
                                        "session no longer exists", dropped=True))
        elif d.step in committed:
            skipped.append(SkippedEntry(d.session_id, d.step, d.entry,
                                        "step committed since", dropped=True))
        elif status in (SessionStatus.COMPLETED, SessionStatus.CANCELLED):
            skipped.append(SkippedEntry(d.session_id, d.step, d.entry,
                                        f"session is {status.value if status else '?'}"))
        elif d.step not in failed:
            skipped.append(SkippedEntry(d.session_id, d.step, d.entry,
                                        "step no longer failed (resumed or requeued)"))
        else:
            keep.append(d)
    return keep, skipped


# -- I/O ----------------------------------------------------------------------------
async def requeue(store: Store, session_id: str | None, *, step: str | None = None,
                  dead: bool = False, dry_run: bool = False) -> RequeueReport:
    """Requeue a session's failed steps (all, or `step`; only dead-lettered ones with
    `dead`), or with session_id=None and dead=True every dead-lettered entry.

    SessionNotFound, InvalidTransition (completed or cancelled session), NothingToRequeue
    (nothing failed, or not that step), InvalidInput (bad combination)."""
    if session_id is None:
        if not dead:
            raise InvalidInput("requeue: name a session, or requeue every dead-lettered "
                               "entry")
        if step is not None:
            raise InvalidInput("requeue: a step needs a session id")
        return await _requeue_all_dead(store, dry_run)
    letters = await _session_letters(store, session_id)
    planned, status = await _requeue_session(store, session_id, letters, step=step,
                                             dead_only=dead, dry_run=dry_run)
    return RequeueReport(dry_run, tuple(planned), (), {session_id: status})


async def _session_letters(store: Store, session_id: str) -> list[DeadLetter]:
    shard = store.keys.shard(session_id)
    return [d for d in (DeadLetter.parse(shard, e, f) for e, f in await store.dead_letters(shard))
            if d.session_id == session_id]


async def _requeue_session(store: Store, session_id: str, letters: Sequence[DeadLetter], *,
                           step: str | None, dead_only: bool, dry_run: bool,
                           ) -> tuple[list[RequeuedStep], str]:
    if dry_run:  # reads only: no lock
        record = await store.get_session(session_id)
        failed = await store.failed_jobs(session_id)
        steps = choose_steps(session_id, record.status, record.error, failed,
                             {d.step for d in letters}, step=step, dead_only=dead_only)
        after = SessionStatus.RUNNING if record.status == SessionStatus.FAILED \
            else record.status
        return plan_steps(session_id, steps, failed, letters), after.value
    async with session_lock(store, session_id):
        for _ in range(MAX_TRIES):
            record = await store.get_session(session_id)
            failed = await store.failed_jobs(session_id)
            steps = choose_steps(session_id, record.status, record.error, failed,
                                 {d.step for d in letters}, step=step, dead_only=dead_only)
            planned = plan_steps(session_id, steps, failed, letters)
            at = now_iso()
            triples = [(p.step, failed[p.step],
                        replace(StepJob.from_json(failed[p.step]), attempt=1).to_json())
                       for p in planned]
            resumed = [Event(EventType.SESSION_RESUMED, worker=OPERATOR, at=at,
                             detail="requeued " + ", ".join(steps))]
            verdict, detail = await store.requeue_steps(
                session_id, triples, [e for p in planned for e in p.dead_letters],
                events=requeue_events(planned, at), resumed=resumed, now_iso=at,
                now_ms=now_ms())
            if verdict == "ok":
                return planned, detail
            if verdict == "gone":
                raise SessionNotFound(session_id)
            if verdict == "invalid":
                raise InvalidTransition(session_id, detail, "requeue")
            # 'changed': a worker committed or failed a step meanwhile: decide again.
        raise Conflict(f"session {session_id}: kept changing during the requeue; try again")


async def _requeue_all_dead(store: Store, dry_run: bool) -> RequeueReport:
    requeued: list[RequeuedStep] = []
    skipped: list[SkippedEntry] = []
    statuses: dict[str, str] = {}
    for shard in range(store.keys.shards):
        by_session: dict[str, list[DeadLetter]] = {}
        for entry, fields in await store.dead_letters(shard):
            letter = DeadLetter.parse(shard, entry, fields)
            if not is_session_id(letter.session_id) or not letter.step or "job" not in fields:
                skipped.append(SkippedEntry(letter.session_id, letter.step, entry,
                                            "not a step job; left for inspection"))
                continue
            by_session.setdefault(letter.session_id, []).append(letter)
        for sid, letters in by_session.items():
            moved, passed, status = await _sweep_session(store, sid, letters, dry_run)
            requeued += moved
            skipped += passed
            if status:
                statuses[sid] = status
    skipped.sort(key=lambda s: _entry_order(s.entry))  # stream order
    return RequeueReport(dry_run, tuple(requeued), tuple(skipped), statuses)


def _entry_order(entry: str) -> tuple[int, int]:
    ms, _, seq = entry.partition("-")
    return (int(ms), int(seq or 0)) if ms.isdigit() and (seq or "0").isdigit() else (0, 0)


async def _sweep_session(store: Store, sid: str, letters: list[DeadLetter], dry_run: bool,
                         ) -> tuple[list[RequeuedStep], list[SkippedEntry], str]:
    try:
        record = await store.get_session(sid)
        exists, status = True, record.status
    except SessionNotFound:
        exists, status = False, None
    committed = (await store.committed_steps(sid, sorted({d.step for d in letters}))
                 if exists else set())
    failed = await store.failed_jobs(sid) if exists else {}
    keep, skipped = sort_letters(letters, exists=exists, committed=committed, status=status,
                                 failed=failed)
    if not dry_run:
        dropped = [s.entry for s in skipped if s.dropped]
        await store.drop_dead_letters(letters[0].shard, dropped)
    if not keep:
        return [], skipped, status.value if status else ""
    try:
        moved, after = await _requeue_session(store, sid, keep, step=None, dead_only=True,
                                              dry_run=dry_run)
    except (NothingToRequeue, InvalidTransition, SessionNotFound) as exc:
        skipped += [SkippedEntry(sid, d.step, d.entry, str(exc)) for d in keep]
        return [], skipped, ""
    return moved, skipped, after


def report_lines(report: RequeueReport) -> list[str]:
    """What a person reads (the CLI); --json prints to_dict()."""
    verb = "would requeue" if report.dry_run else "requeued"
    lines = [f"{verb} {p.session_id} {p.step} (agent {p.agent}, failed attempt "
             f"{p.failed_attempt}" + (", dead-lettered" if p.dead_letters else "") + ")"
             for p in report.requeued]
    for s in report.skipped:
        action = ("would drop" if report.dry_run else "dropped") if s.dropped else "skipped"
        lines.append(f"{action} dead letter {s.entry} ({s.session_id or '?'} "
                     f"{s.step or '?'}): {s.reason}")
    for sid, status in report.statuses.items():
        lines.append(f"{sid} {'would be' if report.dry_run else 'is'} {status}")
    return lines
