"""Gating a delivered step (gate.lua) and taking new ones gated (take.lua, and the take
at the end of commit.lua): their KEYS/ARGV contracts, the spelling of a shard's session
keys they share, and their replies decoded into the store's typed records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from strands_durable.models import StepResult
from strands_durable.store.codec import as_str
from strands_durable.store.records import GATE_FIELDS, GateOutcome, TakenEntry
from strands_durable.store.script_library import ScriptLibrary


# -- gate.lua -----------------------------------------------------------------------
@dataclass(slots=True)
class GateKeys:
    meta: str
    stream: str
    held: str
    results: str
    order: str
    events: str
    journal: str  # the step's journal (model turns and tool results to replay)


@dataclass(slots=True)
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
@dataclass(slots=True)
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
    fair_prefix: str  # the shard's fair-dispatch state (Keys.fair; _lib.lua)


@dataclass(slots=True)
class FairArgs:
    """What a take (take.lua, commit.lua's) needs to be fair between namespaces."""

    now_ms: int  # when namespaces were seen (the fair state's window)
    weights: str  # "ns=weight ns=weight": the namespaces whose weight is not 1
    look: int  # 0: the shard had no fairness state at the worker's last timer poll
    limits: str  # "ns=n ...": namespaces' quotas of steps in flight, this shard's part


@dataclass(slots=True)
class TakeKeys:
    stream: str
    unwritten: str  # never written: keeps the script off a half-moved slot (Keys.unwritten)


@dataclass(slots=True)
class TakeArgs:
    group: str
    consumer: str
    count: int  # new entries to read and gate
    now_iso: str  # the step_started event's time
    events_max: int
    ids: str  # entries read already (blocking XREADGROUP), space-separated, to gate first
    spelling: TakeSpelling
    fair: FairArgs


# -- replies ----------------------------------------------------------------------------
def pairs(flat_pairs: Any) -> dict[str, str]:
    """A flat field/value list (HGETALL, a stream entry's fields) as a dict of text."""
    items = [as_str(v) for v in flat_pairs]
    return dict(zip(items[::2], items[1::2], strict=True))


def decode_gate(reply: Any) -> GateOutcome:
    """gate.lua: {'run', wanted values, steps, their results, journal} | {verdict, ...}."""
    verdict = as_str(reply[0])
    if verdict != "run":
        return GateOutcome(verdict)  # type: ignore[arg-type]
    values = dict(zip(GATE_FIELDS, (as_str(v) for v in reply[1]), strict=True))
    return GateOutcome("run", values, [StepResult.from_json(r) for r in reply[3]],
                       pairs(reply[4]))


def decode_taken(item: Any) -> TakenEntry:
    """One entry take.lua (or commit.lua's take) made pending and gated: {id, fields,
    verdict} and, for 'run', {..., wanted values, commit-order length, journal, lane
    length, the lane's newest page, the newest results (maybe none)}."""
    entry_id, fields, verdict = as_str(item[0]), pairs(item[1]), as_str(item[2])
    if verdict == "ungated":
        return TakenEntry(entry_id, fields)
    if verdict != "run":
        return TakenEntry(entry_id, fields, GateOutcome(verdict))  # type: ignore[arg-type]
    values = dict(zip(GATE_FIELDS, (as_str(v) for v in item[3]), strict=True))
    return TakenEntry(entry_id, fields, GateOutcome("run", values, [], pairs(item[5])),
                      int(item[4]), (int(item[6]), [as_str(m) for m in item[7]]),
                      [None if r is None else as_str(r) for r in item[8]])


class GateScripts(ScriptLibrary):
    async def gate(self, *, keys: GateKeys, args: GateArgs) -> GateOutcome:
        return decode_gate(await self._call("gate", keys, args))

    async def take(self, *, keys: TakeKeys, args: TakeArgs) -> list[TakenEntry]:
        """One per entry gated, those of `args.ids` first; [] when there was none. An
        entry sent by id whose stream entry is gone comes back without fields."""
        return [decode_taken(item) for item in await self._call("take", keys, args)]
