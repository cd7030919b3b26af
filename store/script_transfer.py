"""The contracts of the session transfer scripts (export.lua, import_session.lua): a
whole session read in one script, and written in one (all or nothing)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from strands_durable.store.script_library import IndexKeys, ScriptLibrary


# -- export.lua -----------------------------------------------------------------------
@dataclass(slots=True)
class ExportKeys:
    meta: str
    results: str
    order: str
    events: str
    conversations: str
    journals: str
    artifacts: str
    checkpoints: str
    failed: str
    held: str
    stream: str  # the shard's step stream: the session's queued entries
    timers: str  # the shard's timers: the session's retries and HITL timeouts
    unwritten: str  # the lanes and journals are spelled in the slot (as take.lua does)


@dataclass(slots=True)
class ExportArgs:
    session_id: str
    conversation_prefix: str
    journal_prefix: str


# -- import_session.lua -----------------------------------------------------------------
@dataclass(slots=True)
class ImportKeys:
    meta: str
    results: str
    order: str
    events: str
    conversations: str
    journals: str
    artifacts: str
    checkpoints: str
    failed: str
    held: str
    stream: str
    timers: str
    spec_index: str  # the spec-hash index (or a dummy in the slot)
    lanes: tuple[str, ...]  # each conversation lane's key, in the document's order
    journal_keys: tuple[str, ...]  # each step journal's key, in the document's order
    index: IndexKeys


@dataclass(slots=True)
class ImportArgs:
    session_id: str
    document: str  # the session's parts as JSON arrays (store/export.py import_payload)
    now_ms: int
    lanes_count: int


class TransferScripts(ScriptLibrary):
    async def export(self, *, keys: ExportKeys, args: ExportArgs) -> str | None:
        """The session's parts as JSON (store/export.py reads it); None: no session."""
        reply: Any = await self._call("export", keys, args)
        return None if reply is None else str(reply)

    async def import_session(self, *, keys: ImportKeys, args: ImportArgs) -> str:
        """'imported', or 'exists' (nothing written) when the session is there already."""
        return str(await self._call("import_session", keys, args))
