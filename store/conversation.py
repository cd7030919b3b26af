"""A conversation lane as stored, and the conversation an agent gets back from it.

A lane (`S:conv:<lane>`) is append-only: one JSON item per message, in order, plus a
compaction record wherever a step compacted the lane:

    {"compaction": {"keep": n, "summary": {"role": "user", "content": [...]}}}

appended by that step's commit right after its own new messages. It says: from here on,
the conversation is `summary` followed by the `n` newest messages before this record
(older records skipped), then whatever comes after it. Nothing already stored is
rewritten, so a commit stays O(its new turns), a checkpoint's `lane_len` still cuts the
lane where it stood (fork copies records like messages), and a step that crashed before
its commit left no record: its re-run compacts again and commits exactly one.

Restoring reads the lane backwards from its end, a page at a time, only as far as the
latest compaction record (and its kept messages): the whole committed conversation
when there is none. An operator ceiling (`DURABLE_CONVERSATION_WINDOW`, 0 = none) keeps
only that many of the newest restored messages; whatever the cut, a restored history
opens with a user's prompt, never with tool results whose tool use was cut off.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from strands_durable.store.records import Compaction

COMPACTION = "compaction"
PAGE = 256  # lane items read per round trip when restoring

Message = dict[str, Any]
# Reads lane items [start, stop] (inclusive, as LRANGE) as JSON texts.
ReadRange = Callable[[int, int], Awaitable[Sequence[str | bytes]]]


def compaction_item(compaction: Compaction) -> Message:
    """The lane item that records `compaction`."""
    return {COMPACTION: {"keep": compaction.keep, "summary": compaction.summary}}


def as_compaction(item: Message) -> Compaction | None:
    """The compaction an item records, or None for a message."""
    body = item.get(COMPACTION) if "role" not in item else None
    if not isinstance(body, dict):
        return None
    return Compaction(summary=body["summary"], keep=int(body["keep"]))


async def restore(length: int, read: ReadRange, window: int) -> list[Message]:
    """The conversation to restore from a lane of `length` items read through `read`,
    at most `window` messages (0: no ceiling)."""
    newest_first: list[Message] = []
    summary: Message | None = None
    stop = length - 1
    while stop >= 0 and summary is None and not _enough(newest_first, window):
        start = max(0, stop - PAGE + 1)
        page = await read(start, stop)
        for index in range(len(page) - 1, -1, -1):
            item = json.loads(page[index])
            compaction = as_compaction(item)
            if compaction is not None:
                # The latest record: its summary and the messages it kept end the walk.
                summary = compaction.summary
                kept = await _messages_before(read, start + index - 1, compaction.keep)
                newest_first.extend(reversed(kept))
                break
            newest_first.append(item)
            if _enough(newest_first, window):
                break
        stop = start - 1
    messages = list(reversed(newest_first))
    if summary is not None:
        messages.insert(0, summary)
    return open_on_a_turn(messages[-window:] if window > 0 else messages)


def _enough(newest_first: list[Message], window: int) -> bool:
    return window > 0 and len(newest_first) >= window


async def _messages_before(read: ReadRange, stop: int, count: int) -> list[Message]:
    """The `count` newest messages at or before index `stop` (records skipped), in order."""
    found: list[Message] = []
    while stop >= 0 and len(found) < count:
        start = max(0, stop - PAGE + 1)
        for raw in reversed(await read(start, stop)):
            item = json.loads(raw)
            if as_compaction(item) is None:
                found.append(item)
                if len(found) == count:
                    break
        stop = start - 1
    return list(reversed(found))


def open_on_a_turn(messages: list[Message]) -> list[Message]:
    """Drop a dangling head (an assistant turn, or tool results whose tool use was cut
    off): providers reject a history that does not open with a user's prompt."""
    start = 0
    while start < len(messages) and not _opens_a_turn(messages[start]):
        start += 1
    return messages[start:]


def _opens_a_turn(message: Message) -> bool:
    return message.get("role") == "user" and not any(
        "toolResult" in block for block in message.get("content", []))
