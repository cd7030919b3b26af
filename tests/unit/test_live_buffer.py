"""The live stream's buffer (worker/live.py) and how `watch --tokens` prints entries
(api/watch.py), without Redis: consecutive text of one model turn becomes one entry per
flush; a new turn, step or attempt starts a new one; a full buffer drops text, never
the entries that mark attempts and turn ends; a failed write is dropped, not raised."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from strands_durable.api.watch import token_text
from strands_durable.sessions.live import LiveEntry
from strands_durable.store.live import LiveBatch
from strands_durable.worker import live
from strands_durable.worker.live import LivePublisher, LiveTurn


class Sink:
    """Stands in for the store: records what one flush would write."""

    def __init__(self, fail: bool = False) -> None:
        self.batches: list[LiveBatch] = []
        self.fail = fail

    async def live_append(self, batches: Sequence[LiveBatch], maxlen: int, ttl_s: int
                          ) -> None:
        if self.fail:
            raise ConnectionError("redis is away")
        self.batches.extend(batches)


def turn(n: int, step: str = "step:0", attempt: str = "1") -> dict[str, str]:
    """A model turn's fields: one object for all of one turn."""
    return {"step": step, "attempt": attempt, "agent": "a", "turn": str(n)}


def words(seen: LiveTurn, *texts: str) -> None:
    for text in texts:
        seen.see({"contentBlockDelta": {"delta": {"text": text}}})


def stop(seen: LiveTurn) -> None:
    seen.see({"messageStop": {"stopReason": "end_turn"}})


async def test_text_of_one_turn_is_one_entry_per_flush() -> None:
    sink = Sink()
    publisher = LivePublisher(sink, flush_s=60)  # type: ignore[arg-type]
    first, second = LiveTurn(publisher, "s1", turn(1)), LiveTurn(publisher, "s1", turn(2))
    other = LiveTurn(publisher, "s2", turn(1))
    again = LiveTurn(publisher, "s1", turn(1, attempt="2"))
    words(first, "one ", "two ", "three")
    stop(first)
    words(second, "four")
    words(other, "other")
    words(again, "again")
    await publisher.close()
    by_session = {b.session_id: [dict(e) for e in b.entries] for b in sink.batches}
    assert [(e["kind"], e.get("text", "")) for e in by_session["s1"]] == [
        ("text", "one two three"), ("turn_end", ""), ("text", "four"), ("text", "again")]
    assert [e["text"] for e in by_session["s2"]] == ["other"]
    assert by_session["s1"][0]["turn"] == "1" and int(by_session["s1"][0]["at_ms"]) > 0


async def test_text_written_by_a_flush_is_not_added_to_again() -> None:
    sink = Sink()
    publisher = LivePublisher(sink, flush_s=60)  # type: ignore[arg-type]
    seen = LiveTurn(publisher, "s1", turn(1))
    words(seen, "before ", "the flush ")
    await publisher.flush()
    words(seen, "after ", "it")
    seen.see({"contentBlockStart": {"start": {"toolUse": {"name": "lookup"}}}})
    words(seen, "past the tool")
    await publisher.close()
    entries = [(e["kind"], e.get("text", e.get("tool", ""))) for b in sink.batches
               for e in b.entries]
    assert entries == [("text", "before the flush "), ("text", "after it"),
                       ("tool", "lookup"), ("text", "past the tool")]


async def test_a_full_buffer_drops_text_but_keeps_the_markers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live, "MAX_PENDING", 2)
    sink = Sink()
    publisher = LivePublisher(sink, flush_s=60)  # type: ignore[arg-type]
    words(LiveTurn(publisher, "s1", turn(1)), "kept")
    words(LiveTurn(publisher, "s2", turn(1)), "kept too")
    words(LiveTurn(publisher, "s3", turn(1)), "dropped")
    publisher.publish("s3", {"kind": "attempt", "step": "step:0", "attempt": "1",
                             "agent": "a", "replayed": "0", "worker": "w1"})
    await publisher.close()
    kinds = {b.session_id: [e["kind"] for e in b.entries] for b in sink.batches}
    assert kinds == {"s1": ["text"], "s2": ["text"], "s3": ["attempt"]}
    assert publisher.dropped == 1


async def test_a_failed_write_is_dropped_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    publisher = LivePublisher(Sink(fail=True), flush_s=60)  # type: ignore[arg-type]
    words(LiveTurn(publisher, "s1", turn(1)), "lost")
    words(LiveTurn(publisher, "s1", turn(2)), "lost too")
    await publisher.close()  # the step that published never sees the failure
    assert "live stream: 2 entries not written" in caplog.text
    assert "redis is away" in caplog.text


def entry(**fields: Any) -> LiveEntry:
    return LiveEntry(id="1-0", step="step:0", attempt=2, agent="a", **fields)


def test_watch_tokens_prints_attempts_text_tools_and_turn_ends() -> None:
    assert token_text(entry(kind="attempt", replayed=3)) == \
        "\n--- step:0 (agent a, attempt 2, replaying 3 turn(s) from its journal)\n"
    assert token_text(entry(kind="attempt")) == "\n--- step:0 (agent a, attempt 2)\n"
    assert token_text(entry(kind="text", text="Hello")) == "Hello"
    assert token_text(entry(kind="tool", tool="calculator")) == "\n[tool: calculator]"
    assert token_text(entry(kind="turn_end", stop="end_turn")) == "\n"


def test_an_entry_of_an_unknown_kind_is_left_out() -> None:
    assert LiveEntry.of("1-0", {"kind": "future", "step": "s"}) is None
    got = LiveEntry.of("1-0", {"kind": "text", "step": "s", "attempt": "1",
                               "turn": "2", "text": "t"})
    assert got is not None and (got.attempt, got.turn, got.text) == (1, 2, "t")
