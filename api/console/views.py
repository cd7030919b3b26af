"""Pure view models of the console: a session's timeline and its pattern's shape, from
the typed status document, its events and its committed results. No I/O here, so each
is tested from data; the templates only lay them out (Jinja2 escapes every field)."""

from __future__ import annotations

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
