"""A whole session as one versioned document (`SessionExport`), read in one script
(export.lua) and written in one (import_session.lua, all or nothing).

The document names no Redis key: the importing store spells every key from the session
id and its own prefix and shard count, so no field can reach a key outside the session.
It is checked like any untrusted input (`check_export`, pure) before anything is written:
its format version, the session id everywhere one appears (jobs name their session), step
keys and lanes of the key rules, JSON where JSON is stored, event ids in order.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from redis.exceptions import ResponseError

from strands_durable.errors import Conflict, InvalidInput, Unavailable
from strands_durable.models import SessionStatus, StepJob, now_iso, now_ms
from strands_durable.store.base import StoreBase
from strands_durable.store.codec import dumps
from strands_durable.store.keys import check_name, check_session_id
from strands_durable.store.script_transfer import ExportArgs, ExportKeys, ImportArgs, ImportKeys
from strands_durable.version import __version__

EXPORT_KIND = "strands-durable/session"
EXPORT_FORMAT = 1
NO_SPEC_HASH = "-"  # the spec index's key when a session has no spec hash (a dummy)
_EVENT_ID = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")
# An event's type as this release and any other names one: a word, never a line break
# (it becomes an SSE frame's `event:` line on the events feed).
_EVENT_TYPE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_SPEC_HASH = re.compile(r"[0-9a-f]{64}")
# Meta fields the importing store sets itself: the shard is its own; the idempotency
# key belongs to the exporting deployment's requests (its record is not carried).
LOCAL_META = ("shard", "idempotency_key")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExportedEvent(_Strict):
    id: str = Field(description="The event's stream id (ms-seq), kept on import.")
    fields: dict[str, str]


class ExportedLane(_Strict):
    lane: str
    items: list[str] = Field(description="The lane's messages (and compaction records), "
                             "oldest first, as stored (JSON each).")


class ExportedJournal(_Strict):
    step: str
    entries: dict[str, str] = Field(description="A running step's journal: m<turn>, "
                                    "t<ordinal> -> JSON.")


class ExportedTimer(_Strict):
    due_ms: int
    job: str = Field(description="The step job (JSON) due then: a retry or a timeout.")


class SessionExport(_Strict):
    """One session, whole: what `durable export` writes and `durable import` reads."""

    kind: Literal["strands-durable/session"] = "strands-durable/session"
    format: int = Field(description="The export format (this release writes "
                        f"{EXPORT_FORMAT}); an import refuses another.")
    release: str = Field(description="The strands-durable release that exported it.")
    exported_at: str
    session_id: str
    meta: dict[str, str] = Field(description="The session's meta hash, every field as "
                                 "stored (status, spec_json, state, ...).")
    results: dict[str, str] = Field(description="Step key -> StepResult JSON.")
    order: list[str] = Field(description="Step keys in commit order.")
    events: list[ExportedEvent]
    conversations: list[ExportedLane]
    journals: list[ExportedJournal]
    artifacts: dict[str, str]
    checkpoints: list[str]
    failed: dict[str, str] = Field(description="Step key -> job JSON failed for good.")
    held: list[str] = Field(description="Jobs held while the session is paused or failed.")
    queued: list[str] = Field(description="Jobs on the stream when exported (queued or "
                              "running): enqueued again on import.")
    timers: list[ExportedTimer]


class InvalidExport(InvalidInput):
    """An export document that cannot be imported; nothing was written."""

    code = "invalid_export"


class ImportFailed(Unavailable):
    """The import script failed part way (Redis refused a write: memory, say); what it
    had written was taken back."""

    code = "import_failed"


class SessionExists(Conflict):
    """The session to import exists already (import it with a new id)."""

    code = "session_exists"

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"session {session_id} exists already; nothing was imported "
                         "(import it under a new id)")

    def details(self) -> dict[str, object]:
        return {"session_id": self.session_id}


# -- pure: reading the script's reply, checking a document, renaming it ----------------------
def _pairs(flat: Any) -> dict[str, str]:
    items = list(flat) if isinstance(flat, list) else []
    return {str(items[i]): str(items[i + 1]) for i in range(0, len(items) - 1, 2)}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []  # cjson writes an empty table as {}


def from_reply(session_id: str, reply: str) -> SessionExport:
    raw = json.loads(reply)
    return SessionExport(
        format=EXPORT_FORMAT, release=__version__, exported_at=now_iso(),
        session_id=session_id, meta=_pairs(raw["meta"]), results=_pairs(raw["results"]),
        order=[str(s) for s in _list(raw["order"])],
        events=[ExportedEvent(id=e[0], fields=_pairs(e[1])) for e in _list(raw["events"])],
        conversations=[ExportedLane(lane=lane, items=_list(items))
                       for lane, items in sorted(_list(raw["lanes"]))],
        journals=[ExportedJournal(step=step, entries=_pairs(entries))
                  for step, entries in sorted(_list(raw["journals"]))],
        artifacts=_pairs(raw["artifacts"]), checkpoints=_list(raw["checkpoints"]),
        failed=_pairs(raw["failed"]), held=_list(raw["held"]),
        queued=[j for j in _list(raw["queued"]) if _job_session(j) == session_id],
        timers=[ExportedTimer(due_ms=int(float(score)), job=job)
                for score, job in _list(raw["timers"]) if _job_session(job) == session_id])


def _job_session(job: str) -> object:
    try:
        parsed = json.loads(job)
    except ValueError:
        return None
    return parsed.get("session_id") if isinstance(parsed, dict) else None


def _json(what: str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise InvalidExport(f"{what} is not JSON") from None


def _jobs(doc: SessionExport) -> list[tuple[str, str]]:
    return ([(f"held job {n}", j) for n, j in enumerate(doc.held)]
            + [(f"queued job {n}", j) for n, j in enumerate(doc.queued)]
            + [(f"timer {n}", t.job) for n, t in enumerate(doc.timers)]
            + [(f"failed job {k}", j) for k, j in doc.failed.items()])


def check_export(doc: SessionExport) -> None:
    """InvalidExport naming the first thing wrong with `doc` (pure; nothing written)."""
    if doc.format != EXPORT_FORMAT:
        raise InvalidExport(f"export format {doc.format}; this release "
                            f"({__version__}) imports format {EXPORT_FORMAT}")
    check_session_id(doc.session_id)
    status = doc.meta.get("status", "")
    if status not in {s.value for s in SessionStatus}:
        raise InvalidExport(f"meta.status {status[:40]!r} is not a session status")
    spec_hash = doc.meta.get("spec_hash", "")
    if spec_hash and not _SPEC_HASH.fullmatch(spec_hash):
        raise InvalidExport("meta.spec_hash is not a sha256 hex digest")
    _check_names(doc)
    _check_stored_json(doc)
    _check_jobs(doc)
    _check_event_ids(doc.events)
    try:  # a lone surrogate (a JSON escape can carry one) is no text Redis can hold
        json.dumps(doc.model_dump(mode="json"), ensure_ascii=False).encode()
    except UnicodeEncodeError:
        raise InvalidExport("the export holds text that is not valid Unicode") from None


def _check_names(doc: SessionExport) -> None:
    """Step keys and lanes of the key rules, each once; the order names results."""
    for name in (*doc.results, *doc.order, *doc.failed):
        check_name("step key", name)
    for lane in doc.conversations:
        check_name("conversation lane", lane.lane)
    for journal in doc.journals:
        check_name("step key", journal.step)
    if len({c.lane for c in doc.conversations}) != len(doc.conversations):
        raise InvalidExport("a conversation lane appears twice")
    if len({j.step for j in doc.journals}) != len(doc.journals):
        raise InvalidExport("a step journal appears twice")
    if missing := [s for s in doc.order if s not in doc.results]:
        raise InvalidExport(f"order names step {missing[0][:80]!r}, which has no result")


def _check_stored_json(doc: SessionExport) -> None:
    """What is stored as JSON objects is JSON objects: results, messages, checkpoints."""
    texts = ([(f"result {k[:80]!r}", t) for k, t in doc.results.items()]
             + [(f"checkpoint {n}", t) for n, t in enumerate(doc.checkpoints)]
             + [(f"lane {c.lane[:80]!r} item {n}", t)
                for c in doc.conversations for n, t in enumerate(c.items)])
    for what, text in texts:
        if not isinstance(_json(what, text), dict):
            raise InvalidExport(f"{what} is not a JSON object")


def _check_jobs(doc: SessionExport) -> None:
    """Every job is a step job of this session."""
    for what, job in _jobs(doc):
        parsed = _json(what, job)
        owner = parsed.get("session_id") if isinstance(parsed, dict) else None
        if owner != doc.session_id:
            raise InvalidExport(f"{what} belongs to session {str(owner)[:40]!r}, "
                                f"not {doc.session_id}")
        try:
            StepJob.from_json(job)
        except (TypeError, ValueError):
            raise InvalidExport(f"{what} is not a step job") from None


def _check_event_ids(events: list[ExportedEvent]) -> None:
    last = (0, 0)
    for event in events:
        if not _EVENT_ID.fullmatch(event.id):
            raise InvalidExport(f"event id {event.id[:40]!r} is not a stream id (ms-seq)")
        ms, seq = (int(p) for p in event.id.split("-"))
        if max(ms, seq) >= 2**64:  # Redis's stream ids are two 64-bit numbers
            raise InvalidExport(f"event id {event.id} is past a stream id's range")
        if (ms, seq) <= last or not event.fields:
            raise InvalidExport(f"event {event.id} is out of order or empty")
        if not _EVENT_TYPE.fullmatch(event.fields.get("type", "")):
            raise InvalidExport(f"event {event.id}'s type "
                                f"{event.fields.get('type', '')[:40]!r} is not an event type")
        last = (ms, seq)


def renamed(doc: SessionExport, new_id: str) -> SessionExport:
    """The same session under `new_id`: the id in every job replaced (checked first)."""
    def job(text: str) -> str:
        return dumps({**json.loads(text), "session_id": new_id})

    return doc.model_copy(update={
        "session_id": new_id, "held": [job(j) for j in doc.held],
        "queued": [job(j) for j in doc.queued],
        "timers": [ExportedTimer(due_ms=t.due_ms, job=job(t.job)) for t in doc.timers],
        "failed": {k: job(j) for k, j in doc.failed.items()}})


def import_payload(doc: SessionExport, shard: int) -> str:
    """The document as import_session.lua reads it: arrays only, in KEYS' order."""
    meta = {k: v for k, v in doc.meta.items() if k not in LOCAL_META}

    def job(text: str) -> str:  # checked as a step job: written as one, every field set
        return StepJob.from_json(text).to_json()

    return dumps({
        "meta": [[k, v] for k, v in {**meta, "shard": str(shard)}.items()],
        "results": [[k, v] for k, v in doc.results.items()], "order": doc.order,
        "events": [[e.id, [x for kv in e.fields.items() for x in kv]] for e in doc.events],
        "lanes": [[c.lane, c.items] for c in doc.conversations],
        "journals": [[j.step, [[k, v] for k, v in j.entries.items()]] for j in doc.journals],
        "artifacts": [[k, v] for k, v in doc.artifacts.items()],
        "checkpoints": doc.checkpoints,
        "failed": [[k, job(v)] for k, v in doc.failed.items()],
        "held": [job(j) for j in doc.held], "queued": [job(j) for j in doc.queued],
        "timers": [[str(t.due_ms), job(t.job)] for t in doc.timers],
        "spec_indexed": bool(doc.meta.get("spec_hash"))})


# -- I/O -------------------------------------------------------------------------------------
class TransferOps(StoreBase):
    async def export_session(self, session_id: str) -> SessionExport | None:
        """The whole session at one instant; None when there is no such session."""
        k = self.keys
        shard = k.shard(session_id)
        reply = await self.scripts.export(
            keys=ExportKeys(
                meta=k.meta(session_id), results=k.results(session_id),
                order=k.order(session_id), events=k.events(session_id),
                conversations=k.conversations(session_id), journals=k.journals(session_id),
                artifacts=k.artifacts(session_id), checkpoints=k.checkpoints(session_id),
                failed=k.failed_jobs(session_id), held=k.held(session_id),
                stream=k.stream(shard), timers=k.timers(shard), unwritten=k.unwritten(shard)),
            args=ExportArgs(session_id=session_id,
                            conversation_prefix=k.conversation_prefix(session_id),
                            journal_prefix=k.journal_prefix(session_id)))
        return None if reply is None else from_reply(session_id, reply)

    async def import_session(self, doc: SessionExport) -> None:
        """Write a checked document (check_export) all or nothing; SessionExists when the
        session is there already (nothing written)."""
        k, sid = self.keys, doc.session_id
        shard = k.shard(sid)
        try:
            verdict = await self._import(doc, shard)
        except ResponseError as exc:
            if "nothing written" not in str(exc):
                raise
            raise ImportFailed(f"session {sid}: {exc}") from None
        if verdict == "exists":
            raise SessionExists(sid)

    async def _import(self, doc: SessionExport, shard: int) -> str:
        k, sid = self.keys, doc.session_id
        return await self.scripts.import_session(
            keys=ImportKeys(
                meta=k.meta(sid), results=k.results(sid), order=k.order(sid),
                events=k.events(sid), conversations=k.conversations(sid),
                journals=k.journals(sid), artifacts=k.artifacts(sid),
                checkpoints=k.checkpoints(sid), failed=k.failed_jobs(sid), held=k.held(sid),
                stream=k.stream(shard), timers=k.timers(shard),
                spec_index=k.index_spec(shard, doc.meta.get("spec_hash") or NO_SPEC_HASH),
                lanes=tuple(k.conversation(sid, c.lane) for c in doc.conversations),
                journal_keys=tuple(k.journal(sid, j.step) for j in doc.journals),
                index=self._index(shard)),
            args=ImportArgs(session_id=sid, document=import_payload(doc, shard),
                            now_ms=now_ms(), lanes_count=len(doc.conversations)))
