"""Pure view models of the console: a session's timeline and its pattern's shape, from
the typed status document, its events and its committed results. No I/O here, so each
is tested from data; the templates only lay them out (Jinja2 escapes every field)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from strands_durable.api.watch import step_rows
from strands_durable.models import StepResult
from strands_durable.patterns import pattern_for
from strands_durable.patterns.shapes import Shape, raw_shape


@dataclass(frozen=True)
class TimelineRow:
    step: str
    agent: str
    attempt: int
    state: str
    duration: str
    tokens: str
    tool_calls: int
    detail: str


def timeline(events: Sequence[tuple[str, dict[str, str]]], results: Sequence[StepResult]
             ) -> list[TimelineRow]:
    """Each step once, committed ones in commit order, with its latest outcome."""
    return [TimelineRow(step=r.step, agent=r.agent, attempt=r.attempt, state=r.state,
                        duration="" if r.duration_s is None else f"{r.duration_s:.2f}s",
                        tokens="" if r.tokens is None else str(r.tokens),
                        tool_calls=r.tool_calls, detail=r.detail[:300])
            for r in step_rows(events, results)]


def shape(pattern_type: str, view: Mapping[str, Any]) -> Shape:
    """The pattern's shape, as its definition draws it (patterns/shapes.py); an unknown
    pattern shows its state's keys, nothing worse."""
    try:
        definition = pattern_for(pattern_type)
    except NotImplementedError:
        return raw_shape(f"{pattern_type}", view)
    try:
        return definition.shape(view)
    except (AttributeError, TypeError, ValueError):
        # A state written by an older version: show it rather than fail the page.
        return raw_shape(f"{pattern_type} (raw state)", view)


# -- the conversation view --------------------------------------------------------------
FOLD_CHARS = 2_000  # a block longer than this is folded (closed, its start in the summary)
FOLDED_CHARS = 20_000  # what the page holds of a folded block (the export has the rest)
PAGE_CHARS = 400_000  # the blocks' text one page holds at most, all lanes together


@dataclass(frozen=True)
class BlockView:
    kind: str  # text | tool_use | tool_result | other
    title: str
    body: str  # what the page shows of it
    folded: bool
    left_out: int = 0  # characters the page does not hold (the session's export does)


@dataclass
class PageBudget:
    """What is left of the characters one page may hold (PAGE_CHARS)."""

    chars: int = PAGE_CHARS

    def shown(self, kind: str, title: str, body: str) -> BlockView:
        """The block as the page holds it: open when short, else folded, with at most
        its first FOLDED_CHARS; nothing of it once the page's budget is spent."""
        keep = min(len(body), FOLDED_CHARS, max(0, self.chars))
        self.chars -= keep
        return BlockView(kind, title, body[:keep], folded=len(body) > FOLD_CHARS or
                         keep < len(body), left_out=len(body) - keep)


@dataclass(frozen=True)
class MessageView:
    role: str
    blocks: tuple[BlockView, ...]


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, default=str,
                                                           ensure_ascii=False)


def _block(block: Mapping[str, Any], budget: PageBudget) -> BlockView:
    if "text" in block:
        body, kind, title = str(block["text"]), "text", ""
    elif "toolUse" in block:
        use = block["toolUse"] or {}
        kind, title = "tool_use", f"tool call {use.get('name', '?')} ({use.get('toolUseId', '')})"
        body = _as_text(use.get("input", {}))
    elif "toolResult" in block:
        result = block["toolResult"] or {}
        kind = "tool_result"
        title = f"tool result ({result.get('toolUseId', '')}): {result.get('status', '')}"
        body = "\n".join(_as_text(part.get("text", part.get("json", part)))
                         for part in result.get("content", []) if isinstance(part, Mapping))
    else:
        kind, title, body = "other", ", ".join(sorted(block)), _as_text(block)
    return budget.shown(kind, title, body)


def conversation_view(messages: Sequence[Mapping[str, Any]],
                      budget: PageBudget | None = None) -> list[MessageView]:
    """Each committed message of a conversation lane as the page shows it: its role and
    its blocks (text, the tools the model called with their input, what they returned),
    long ones folded to their start, within the page's `budget`. Anything unexpected is
    shown as its JSON, never dropped."""
    budget = budget if budget is not None else PageBudget()
    views = []
    for message in messages:
        content = message.get("content")
        blocks = [_block(b, budget) for b in content if isinstance(b, Mapping)] \
            if isinstance(content, list) else [budget.shown("other", "", _as_text(content))]
        views.append(MessageView(str(message.get("role", "?")), tuple(blocks)))
    return views
