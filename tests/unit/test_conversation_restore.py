"""What an agent gets back from a conversation lane (store/conversation.py): the whole
conversation, or since its latest compaction record; the operator's ceiling; never a
history that opens on tool results whose tool use was cut off. Pure: a lane is a list."""

from __future__ import annotations

import json
from typing import Any

import pytest

from strands_durable.store import conversation
from strands_durable.store.conversation import as_compaction, compaction_item, restore
from strands_durable.store.records import Compaction


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"text": text}]}


def said(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"text": text}]}


def turns(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [m for i in range(start, start + n) for m in (user(f"q{i}"), said(f"a{i}"))]


def record(summary: str, keep: int) -> dict[str, Any]:
    return compaction_item(Compaction(summary=user(summary), keep=keep))


class Lane:
    """A lane as LRANGE serves it, counting round trips."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = [json.dumps(item) for item in items]
        self.reads = 0

    async def read(self, start: int, stop: int) -> list[str]:
        self.reads += 1
        return self.items[start:stop + 1]

    async def restore(self, window: int = 0) -> list[dict[str, Any]]:
        return await restore(len(self.items), self.read, window)


async def test_whole_conversation_by_default() -> None:
    lane = Lane(turns(30))
    assert await lane.restore() == turns(30)


async def test_empty_lane() -> None:
    assert await Lane([]).restore() == []
    assert await Lane([]).restore(window=5) == []


async def test_ceiling_keeps_newest_messages_opening_on_a_prompt() -> None:
    lane = Lane(turns(30))
    assert await lane.restore(window=6) == turns(3, start=27)
    # An odd ceiling would open on an assistant turn: that head is dropped.
    assert await lane.restore(window=5) == turns(2, start=28)


async def test_restores_from_the_latest_compaction_with_its_kept_messages() -> None:
    items = [*turns(3), record("S1", keep=2), *turns(2, start=3)]
    assert await Lane(items).restore() == [user("S1"), *turns(3)[-2:], *turns(2, start=3)]


async def test_kept_messages_skip_older_records() -> None:
    # The second compaction keeps 5 messages; the first record lies among them.
    items = [*turns(3), record("S1", keep=2), *turns(1, start=3), said("x"),
             record("S2", keep=5)]
    assert await Lane(items).restore() == [user("S2"), user("q2"), said("a2"), user("q3"),
                                           said("a3"), said("x")]


async def test_compaction_keeping_nothing_restores_the_summary_alone() -> None:
    assert await Lane([*turns(4), record("S", keep=0)]).restore() == [user("S")]


async def test_ceiling_applies_after_compaction() -> None:
    items = [*turns(2), record("S", keep=4), *turns(3, start=2)]
    assert await Lane(items).restore(window=4) == turns(2, start=3)
    assert await Lane(items).restore(window=11) == [user("S"), *turns(5)]


async def test_ceiling_never_opens_on_tool_results() -> None:
    tool_turn = [user("go"),
                 {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t",
                                                                "name": "bump", "input": {}}}]},
                 {"role": "user", "content": [{"toolResult": {"toolUseId": "t",
                                                              "status": "success",
                                                              "content": [{"text": "2"}]}}]},
                 said("done"), user("again"), said("ok")]
    lane = Lane(tool_turn)
    assert await lane.restore(window=6) == tool_turn
    assert await lane.restore(window=4) == tool_turn[4:]  # not from the tool result
    assert await lane.restore(window=5) == tool_turn[4:]


async def test_reads_page_by_page_only_as_far_as_needed(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    monkeypatch.setattr(conversation, "PAGE", 4)
    items = [*turns(20), record("S", keep=2), *turns(2, start=20)]
    lane = Lane(items)
    assert await lane.restore() == [user("S"), *turns(1, start=19), *turns(2, start=20)]
    # 45 items, but only the last two pages are read, then the two kept messages.
    assert lane.reads <= 3
    whole = Lane(turns(20))
    assert await whole.restore() == turns(20)
    assert whole.reads == 10
    ceiling = Lane(turns(20))
    assert await ceiling.restore(window=4) == turns(2, start=18)
    assert ceiling.reads == 1


def test_a_message_is_never_taken_for_a_record() -> None:
    assert as_compaction(user("compaction")) is None
    assert as_compaction({"role": "user", "compaction": {"keep": 1, "summary": {}},
                          "content": []}) is None
    assert as_compaction(record("S", keep=3)) == Compaction(summary=user("S"), keep=3)


def test_compaction_keep_is_never_negative() -> None:
    with pytest.raises(ValueError, match="keep"):
        Compaction(summary=user("S"), keep=-1)
