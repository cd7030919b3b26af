"""A step's journal: every model turn and tool result of a running step, written as it
happens behind the step's lease, and replayed when the step runs again after a crash.

The unit of durability inside a step is one model turn and one tool call (Temporal's
activities, DBOS's steps): `JournaledModel` wraps the step's Strands model and
`JournaledTool` (worker/tools/durable_tool.py) each of its tools. A turn found in the
journal is replayed (the provider is not called, its recorded usage still counts, once,
in the step's tokens); the first turn not in it goes live and is journaled before the
agent sees it. A worker that lost the step's lease journals nothing: the write returns
False, the journal is marked lost, and the next model turn raises LeaseLost instead of
calling the provider.

Fields of the journal hash: `m<turn>` (the model's stream events of that turn, text
deltas merged) and `t<ordinal>` (a tool call's result). Ordinals count the step's tool
calls in the order the model asked for them; a replayed turn asks with the same
toolUse ids, so every call keeps its ordinal and its idempotency key.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from strands.models.model import Model
from strands.types.content import Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolResult, ToolSpec

from strands_durable import metrics
from strands_durable.errors import Conflict, StepFailed
from strands_durable.models import Event
from strands_durable.worker.model_wrapper import ModelWrapper

log = logging.getLogger("durable.worker")


# Writes one journal field (or, with field '', only events); False: the lease is gone.
JournalWriter = Callable[[str, str, Sequence[Event]], Awaitable[bool]]


class JournalLost(Conflict):
    """This worker no longer holds the step: it writes and calls nothing more."""

    code = "lease_lost"

    def __init__(self, step: str) -> None:
        super().__init__(f"step {step}: the lease was lost while journaling its turns")


class TooManyTurns(StepFailed):
    """The agent asked its model for more turns than a step may take: not retried (the
    same model and tools would loop the same way)."""

    def __init__(self, session_id: str, step: str, agent: str, limit: int) -> None:
        super().__init__(session_id, step, f"agent {agent} asked its model for more than "
                         f"{limit} turns in one step (DURABLE_MAX_MODEL_TURNS): does it call "
                         "a tool again and again?", retryable=False)


@dataclass
class StepJournal:
    """The journal of one run of one step: what the gate read, and the writer."""

    step: str
    entries: dict[str, str]
    write: JournalWriter
    max_turns: int = 0  # 0: no limit
    session_id: str = ""
    agent: str = ""
    turn: int = 0
    lost: bool = False
    ordinals: dict[str, int] = field(default_factory=dict)  # toolUseId -> ordinal
    replayed_turns: int = 0
    replayed_tools: int = 0

    def restart(self) -> None:
        """A new attempt of the agent call replays from its first turn again."""
        self.turn = 0
        self.ordinals.clear()

    def recorded_turn(self, turn: int) -> list[StreamEvent] | None:
        text = self.entries.get(f"m{turn}")
        return None if text is None else list(json.loads(text))

    def recorded_tool(self, ordinal: int) -> ToolResult | None:
        text = self.entries.get(f"t{ordinal}")
        return None if text is None else decode_tool_result(text)

    def ordinal_of(self, tool_use_id: str) -> int:
        """The call's ordinal; a call no turn announced (never seen) gets the next one."""
        if tool_use_id not in self.ordinals:
            self.ordinals[tool_use_id] = len(self.ordinals) + 1
        return self.ordinals[tool_use_id]

    def register_tool_uses(self, events: list[StreamEvent]) -> None:
        for event in events:
            start = event.get("contentBlockStart", {}).get("start", {})
            tool_use = start.get("toolUse") if isinstance(start, dict) else None
            if tool_use and "toolUseId" in tool_use:
                self.ordinal_of(str(tool_use["toolUseId"]))

    async def record(self, name: str, value: str, events: Sequence[Event] = ()) -> bool:
        """Journal one field; on a lost lease mark the journal lost (False)."""
        if self.lost:
            return False
        if not await self.write(name, value, events):
            self.lost = True
            log.warning("step %s: lease lost; journaling stops", self.step)
            return False
        if name:
            self.entries[name] = value
        return True


class JournaledModel(ModelWrapper):
    """The step's model, turn by turn through the journal."""

    def __init__(self, inner: Model, journal: StepJournal) -> None:
        super().__init__(inner)
        self.journal = journal

    async def stream(self, messages: Messages, tool_specs: list[ToolSpec] | None = None,
                     system_prompt: str | None = None,
                     **kwargs: Any) -> AsyncGenerator[StreamEvent, None]:
        journal = self.journal
        journal.turn += 1
        if journal.max_turns and journal.turn > journal.max_turns:
            raise TooManyTurns(journal.session_id, journal.step, journal.agent,
                               journal.max_turns)
        events = journal.recorded_turn(journal.turn)
        if events is not None:
            journal.replayed_turns += 1
            metrics.turn_replayed("model")
        else:
            if journal.lost:
                raise JournalLost(journal.step)
            # Whole turn first, journaled, then handed to the agent: nothing the agent
            # acts on (a tool call) can be missing from the journal after a crash.
            events = merge_deltas([event async for event in self.inner.stream(
                messages, tool_specs, system_prompt, **kwargs)])
            if not await journal.record(f"m{journal.turn}", json.dumps(events)):
                raise JournalLost(journal.step)
        journal.register_tool_uses(events)
        for event in events:
            yield event


def merge_deltas(events: list[StreamEvent]) -> list[StreamEvent]:
    """Consecutive text (or tool-input, or reasoning-text) deltas of one content block
    merged into one: the same message, a fraction of the journal's size."""
    merged: list[StreamEvent] = []
    for event in events:
        key = _delta_key(event)
        if key is not None and merged and _delta_key(merged[-1]) == key:
            previous = merged[-1]["contentBlockDelta"]["delta"]
            delta = event["contentBlockDelta"]["delta"]
            merged[-1] = {"contentBlockDelta": {"delta": _join(previous, delta, key)}}
        else:
            merged.append(event)
    return merged


def _delta_key(event: StreamEvent) -> str | None:
    block = event.get("contentBlockDelta")
    if not isinstance(block, dict) or set(block) - {"delta"}:
        return None
    delta = block.get("delta", {})
    if set(delta) == {"text"} and isinstance(delta["text"], str):
        return "text"
    if set(delta) == {"toolUse"} and set(delta["toolUse"]) == {"input"}:
        return "toolUse"
    reasoning = delta.get("reasoningContent")
    if set(delta) == {"reasoningContent"} and set(reasoning or {}) == {"text"}:
        return "reasoningContent"
    return None


def _join(previous: Any, delta: Any, key: str) -> Any:
    if key == "text":
        return {"text": previous["text"] + delta["text"]}
    if key == "toolUse":
        return {"toolUse": {"input": previous["toolUse"]["input"] + delta["toolUse"]["input"]}}
    return {"reasoningContent": {"text": previous["reasoningContent"]["text"]
                                 + delta["reasoningContent"]["text"]}}


# -- tool results: JSON, with bytes (images, documents) as base64 --------------------
def encode_tool_result(result: ToolResult) -> str:
    return json.dumps(result, default=_bytes_to_json, separators=(",", ":"))


def decode_tool_result(text: str) -> ToolResult:
    result: ToolResult = json.loads(text, object_hook=_json_to_bytes)
    return result


def _bytes_to_json(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return {"__bytes__": base64.b64encode(bytes(value)).decode()}
    raise TypeError(f"a tool result holds a {type(value).__name__}, which is not JSON")


def _json_to_bytes(obj: dict[str, Any]) -> Any:
    if set(obj) == {"__bytes__"}:
        return base64.b64decode(obj["__bytes__"])
    return obj
