"""`durable watch SID`: a session's live progress (rich), until it stops running.

The view is a pure function of the session record, its events and its committed
results; the loop reads only what is new (events after the last id, results after
the last count) and redraws.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from strands_durable.api.cli.output import terminal_safe
from strands_durable.models import SessionStatus, StepResult
from strands_durable.sessions.live import LiveEntry
from strands_durable.store.store import SessionRecord, Store

MAX_ROWS = 30  # the latest steps shown; earlier ones are counted above the table

# What an event says about its step.
STEP_STATE = {
    "step_scheduled": "queued", "step_started": "running", "step_reclaimed": "running",
    "step_completed": "done", "step_failed": "failed", "step_retried": "retry scheduled",
    "step_dead_lettered": "dead-lettered", "step_requeued": "requeued",
    "worker_declared_dead": "worker died", "capacity_wait": "waiting for capacity",
    "capacity_granted": "running",
}
# Events whose detail the step's row shows (why it failed, what it waits for, waited).
DETAILED = frozenset({"step_failed", "step_dead_lettered", "capacity_wait",
                      "capacity_granted"})
STYLE = {"done": "green", "running": "cyan", "failed": "red", "dead-lettered": "red",
         "retry scheduled": "yellow", "requeued": "yellow", "queued": "dim",
         "worker died": "yellow", "waiting for capacity": "yellow"}


@dataclass(frozen=True)
class StepRow:
    step: str
    state: str
    attempt: int
    worker: str = ""
    agent: str = ""
    tokens: int | None = None
    duration_s: float | None = None
    detail: str = ""
    tool_calls: int = 0  # completed tool calls seen in this step's events


def step_rows(events: Sequence[tuple[str, dict[str, str]]], results: Sequence[StepResult]
              ) -> list[StepRow]:
    """One row per step with its latest state: committed steps in commit order, then
    the others in the order they were first seen."""
    rows: dict[str, StepRow] = {}
    for _, f in events:
        state = STEP_STATE.get(f.get("type", ""))
        step = f.get("step", "")
        if f.get("tool") and step in rows:
            rows[step] = _with_tool_call(rows[step], f)
            continue
        if state is None or not step:
            continue
        row = rows.get(step) or StepRow(step, state, 0)
        attempt = int(f.get("attempt") or 0) or row.attempt
        detail = f.get("detail", "") if f.get("type") in DETAILED else row.detail
        rows[step] = replace(row, state=state, attempt=attempt,
                             worker=f.get("worker") or row.worker, detail=detail)
    for r in results:
        row = rows.get(r.key) or StepRow(r.key, "done", r.attempt)
        rows[r.key] = replace(row, state="done", agent=r.agent, tokens=r.tokens,
                              duration_s=r.duration_ms / 1000, worker=r.worker or row.worker)
    done = {r.key for r in results}
    return [rows[r.key] for r in results] + [row for key, row in rows.items()
                                             if key not in done]


def _with_tool_call(row: StepRow, f: dict[str, str]) -> StepRow:
    """A tool call's event: the step's detail says which tool runs or how it ended."""
    done = f.get("type") == "tool_call_completed"
    calls = row.tool_calls + done
    what = f"{f['tool']} #{f.get('call', '?')} " + (f.get("outcome", "") if done else "running")
    return replace(row, tool_calls=calls, detail=f"tool calls: {calls}, last {what}")


def render(record: SessionRecord, rows: Sequence[StepRow]) -> Group:
    usage = record.token_usage
    status_style = {"completed": "green", "failed": "red", "cancelled": "red",
                    "paused": "yellow"}.get(record.status.value, "cyan")
    head = Text.assemble(
        ("session ", "bold"), record.session_id, f"  {record.workflow_name} "
        f"({record.pattern_type})  ", (record.status.value, f"bold {status_style}"),
        f"  {record.steps_committed} steps committed, {usage.total_input_tokens} in / "
        f"{usage.total_output_tokens} out tokens")
    table = Table("step", "state", "attempt", "agent", "worker", "tokens", "time", "detail",
                  expand=False)
    hidden = max(0, len(rows) - MAX_ROWS)
    for row in rows[hidden:]:
        table.add_row(row.step, Text(row.state, style=STYLE.get(row.state, "")),
                      str(row.attempt or ""), row.agent, row.worker,
                      "" if row.tokens is None else str(row.tokens),
                      "" if row.duration_s is None else f"{row.duration_s:.2f}s",
                      row.detail[:80])
    parts: list[Text | Table] = [head]
    if hidden:
        parts.append(Text(f"({hidden} earlier steps not shown)", style="dim"))
    parts.append(table)
    why = record.error or record.paused_reason
    if why and record.status != SessionStatus.RUNNING:
        parts.append(Text(f"{record.status.value}: {why}", style=status_style))
    return Group(*parts)


async def watch(store: Store, session_id: str, console: Console, *, poll_s: float = 0.2,
                timeout_s: float | None = None) -> tuple[SessionRecord, bool]:
    """Follow the session until it stops running (completed, failed, cancelled or
    paused); returns its record and whether the timeout passed first."""
    record = await store.get_session(session_id)  # SessionNotFound before any drawing
    events: list[tuple[str, dict[str, str]]] = []
    results: list[StepResult] = []
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    with Live(render(record, []), console=console, refresh_per_second=8,
              transient=False) as live:
        while True:
            events += await store.events(session_id, after=events[-1][0] if events else "-")
            results += await store.results(session_id, len(results))
            live.update(render(record, step_rows(events, results)))
            ended = record.status != SessionStatus.RUNNING \
                and record.steps_committed <= len(results)
            if ended or (deadline is not None and time.monotonic() >= deadline):
                break
            await asyncio.sleep(poll_s)
            record = await store.get_session(session_id)
    if not console.is_terminal:
        console.line()  # the final frame ends without a newline when not on a terminal
    return record, not ended


# -- durable watch --tokens ----------------------------------------------------------
def token_text(entry: LiveEntry) -> str:
    """What `watch --tokens` prints for one live entry: the model's text as it is (but
    for control characters, api/cli/output.py `terminal_safe`), a line
    naming each attempt of a step (and the turns it replays rather than streams again),
    the tools asked for, and a line break at each turn's end."""
    if entry.kind == "attempt":
        replayed = f", replaying {entry.replayed} turn(s) from its journal" \
            if entry.replayed else ""
        return terminal_safe(f"\n--- {entry.step} (agent {entry.agent}, attempt "
                             f"{entry.attempt}{replayed})\n")
    if entry.kind == "text":
        return terminal_safe(entry.text)
    if entry.kind == "tool":
        return terminal_safe(f"\n[tool: {entry.tool}]")
    return "\n"


async def watch_tokens(store: Store, session_id: str, write: Callable[[str], None], *,
                       as_json: bool = False, timeout_s: float | None = None,
                       block_ms: int = 500) -> tuple[SessionRecord, bool]:
    """Print the session's live stream as it comes until the session stops running and
    the stream is drained; returns its record and whether the timeout passed first."""
    record = await store.get_session(session_id)  # SessionNotFound before any output
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    last = "0-0"
    while True:
        stopped = record.status != SessionStatus.RUNNING
        entries = (await store.live_entries(session_id, last, 500) if stopped
                   else await store.live_wait(session_id, last, 500, block_ms))
        for entry_id, fields in entries:
            last = entry_id
            entry = LiveEntry.of(entry_id, fields)
            if entry is not None:
                write(entry.model_dump_json() + "\n" if as_json else token_text(entry))
        if stopped and len(entries) < 500:
            return record, False
        if deadline is not None and time.monotonic() >= deadline:
            return record, True
        record = await store.get_session(session_id)
