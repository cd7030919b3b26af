"""Read-only commands: status, wait, history, checkpoints, watch, workers, queue."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from rich.markup import escape

from strands_durable.api.cli.common import (
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    JsonOpt,
    SessionIdArg,
    TimeoutOption,
    app,
    budget_hint,
    err,
    exit_code,
    fail,
    interval_s,
    out,
    print_json,
    run_async,
    with_store,
)
from strands_durable.api.cli.output import new_table, print_table, usage_table
from strands_durable.models import SessionStatus, StepResult
from strands_durable.sessions.history import event_docs
from strands_durable.sessions.status import session_status
from strands_durable.store.store import SessionRecord, Store


@app.command()
def status(session_id: SessionIdArg, as_json: JsonOpt = False) -> None:
    """A session's status, token usage (by agent) and pattern_state."""
    if as_json:
        print_json(run_async(with_store(lambda store: session_status(store, session_id))))
        return

    async def body(store: Store) -> tuple[Any, list[StepResult]]:
        doc = await session_status(store, session_id)
        # Each agent's in and out tokens are the sum of its committed steps'.
        return doc, await store.results(session_id) if doc.token_usage.by_agent else []

    doc, results = run_async(with_store(body))
    table = new_table("key", "value", show_header=False, box=None)
    for key in ("session_id", "status", "workflow_name", "pattern_type", "created_at",
                "updated_at", "steps_committed", "error", "paused_reason"):
        value = getattr(doc, key)
        if value not in (None, ""):
            table.add_row(f"[bold]{key}[/bold]", escape(str(value)))
    print_table(table)
    for w in doc.waiting_for_capacity:  # running, not stuck: its model request waits
        out.print(f"waiting_for_capacity: {w.step}: {w.key} ({w.reason}) since {w.since}",
                  markup=False, highlight=False, soft_wrap=True)
    out.print()
    print_table(usage_table(doc.token_usage, results))
    out.print_json(data=doc.pattern_state)


@app.command()
def wait(
    session_id: SessionIdArg,
    timeout: TimeoutOption = None,
    poll: Annotated[float, typer.Option(help="Seconds between checks.",
                                        callback=interval_s)] = 0.2,
    as_json: JsonOpt = False,
) -> None:
    """Wait for a session to stop running: exit 0 completed, 1 failed or cancelled,
    3 paused, 124 timed out (--json: its session_id, status, error, paused_reason,
    timed_out)."""

    async def body(store: Store) -> tuple[SessionRecord, bool]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            record = await store.get_session(session_id)
            if record.status != SessionStatus.RUNNING:
                return record, False
            if deadline is not None and time.monotonic() >= deadline:
                return record, True
            await asyncio.sleep(poll)

    record, timed_out = run_async(with_store(body))
    raise typer.Exit(wait_report(record, timed_out, timeout, as_json))


def wait_report(record: SessionRecord, timed_out: bool, timeout: float | None,
                as_json: bool) -> int:
    """What `wait` and `watch` print when the session stops (or the wait ends), and
    the exit code."""
    code = EXIT_TIMEOUT if timed_out else exit_code(record.status)
    if as_json:
        print_json({"session_id": record.session_id, "status": record.status.value,
                    "error": record.error, "paused_reason": record.paused_reason,
                    "timed_out": timed_out})
    elif timed_out:
        err.print(f"timed out after {timeout}s; session is {record.status.value}",
                  highlight=False, soft_wrap=True)
    elif record.status == SessionStatus.PAUSED:
        err.print(f"paused: {record.paused_reason or ''}", highlight=False, soft_wrap=True)
        hint = budget_hint(record.session_id, record.paused_reason or "")
        if hint:
            err.print(hint, highlight=False, soft_wrap=True)
    elif code != EXIT_OK:
        err.print(f"{record.status.value}: {record.error or ''}", highlight=False,
                  soft_wrap=True)
    return code


@app.command()
def history(session_id: SessionIdArg, as_json: JsonOpt = False) -> None:
    """A session's events, oldest first."""

    async def body(store: Store) -> list[dict[str, Any]]:
        await store.get_session(session_id)  # a clear error for an unknown id
        return event_docs(await store.events(session_id))

    events = run_async(with_store(body))
    if as_json:
        print_json(events)
        return
    table = new_table("at", "type", "step", "attempt", "worker", "detail")
    for e in events:
        table.add_row(e["at"], e["type"], escape(e["step"]), str(e["attempt"] or ""),
                      escape(e["worker"]), escape(e.get("detail", "")))
    print_table(table)


@app.command()
def checkpoints(
    session_id: SessionIdArg,
    n: Annotated[int | None, typer.Argument(
        help="Show this checkpoint in full, with its pattern_state.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """A session's checkpoints (one per commit): type, step, time, clean or not."""
    from strands_durable.sessions.checkpoints import get_checkpoint, list_checkpoints

    if n is not None and n < 1:
        raise fail(f"checkpoint {n}: checkpoints are numbered from 1", EXIT_USAGE)
    if n is not None:
        doc = run_async(with_store(lambda store: get_checkpoint(store, session_id, n)))
        if as_json:
            print_json(doc)
            return
        table = new_table("key", "value", show_header=False, box=None)
        for key in ("n", "type", "step", "attempt", "agent", "at", "status", "clean",
                    "tokens_total", "steps_committed"):
            table.add_row(f"[bold]{key}[/bold]", escape(str(getattr(doc, key))))
        print_table(table)
        out.print_json(data=doc.pattern_state)
        return
    docs = run_async(with_store(lambda store: list_checkpoints(store, session_id)))
    if as_json:
        print_json(docs)
        return
    table = new_table("n", "at", "type", "step", "agent", "attempt", "status", "clean",
                      "tokens")
    for d in docs:
        table.add_row(str(d.n), d.at, d.type, escape(d.step), escape(d.agent), str(d.attempt),
                      d.status, "yes" if d.clean else "no", str(d.tokens_total))
    print_table(table)


@app.command()
def watch(
    session_id: SessionIdArg,
    timeout: TimeoutOption = None,
    poll: Annotated[float, typer.Option(help="Seconds between reads.",
                                        callback=interval_s)] = 0.2,
    tokens: Annotated[bool, typer.Option(
        "--tokens", help="Print what the session's models write as they write it (the live "
        "stream), one line per step attempt; with --json, one JSON entry per line.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Live progress of a session until it stops running; exit codes as `wait`
    (--json: no live view, the same document as `wait --json`)."""
    from strands_durable.api.watch import watch as do_watch

    if tokens:
        from strands_durable.api.watch import watch_tokens

        def write(text: str) -> None:
            sys.stdout.write(text)
            sys.stdout.flush()

        record, timed_out = run_async(with_store(lambda store: watch_tokens(
            store, session_id, write, as_json=as_json, timeout_s=timeout)))
        if not as_json:
            sys.stdout.write("\n")
        raise typer.Exit(wait_report(record, timed_out, timeout, as_json=False))
    if as_json:
        wait(session_id, timeout, poll, as_json=True)
    record, timed_out = run_async(with_store(
        lambda store: do_watch(store, session_id, out, poll_s=poll, timeout_s=timeout)))
    raise typer.Exit(wait_report(record, timed_out, timeout, as_json=False))


RUNNING_SHOWN = 5  # a worker may hold a thousand steps: the table names a few


def running_text(running: Sequence[str], shown: int = RUNNING_SHOWN) -> str:
    """The first `shown` running steps, one per line, and how many more (--json: all)."""
    lines = list(running[:shown])
    if len(running) > shown:
        lines.append(f"... and {len(running) - shown:,} more")
    return "\n".join(lines)


@app.command()
def workers(
    alive: Annotated[bool, typer.Option("--alive", help="Only live workers.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """The workers: consumer name, host/pid, running steps, pending entries, heartbeat,
    the model requests of its steps waiting for provider capacity, and for one declared
    dead, when and how fast its steps ran again elsewhere. Below: each provider key's
    limit in force, use and waiting requests (as `durable capacity`)."""
    from strands_durable.api.capacity_view import waiting_by_worker
    from strands_durable.api.cli.capacity import capacity_table, fleet_capacity
    from strands_durable.store.fleet import list_workers

    infos = [w for w in run_async(with_store(list_workers, fleet=True)) if w.alive or not alive]
    keys = fleet_capacity()
    waits = waiting_by_worker(keys)
    if as_json:
        print_json([{**w.to_dict(), "capacity_waiting": waits.get(w.consumer, {})}
                    for w in infos])
        return
    table = new_table("consumer", "version", "host", "pid", "alive", "last seen", "slots",
                      "running", "pending", "waiting for capacity", "declared dead")
    for w in infos:
        seen = f"{w.last_seen_age_s:.1f}s ago" if w.last_seen_age_s is not None else "never"
        death = w.declared_dead
        waiting = "\n".join(f"{n} on {key}" for key, n in waits.get(w.consumer, {}).items())
        table.add_row(escape(w.consumer), escape(w.version) or "-", escape(w.host),
                      str(w.pid or ""),
                      "[green]yes[/green]" if w.alive else "[red]no[/red]", seen, w.slots_text(),
                      escape(running_text(w.running)) or "-", str(w.pending),
                      escape(waiting) or "-", escape(death.text()) if death is not None else "-")
    print_table(table)
    if keys:
        out.print("\nprovider capacity")
        print_table(capacity_table(keys))


@app.command()
def queue(as_json: JsonOpt = False) -> None:
    """Per shard and in total: stream length, lag, pending, dead letters, timers due, and
    steps waiting for their namespace's turn (deferred)."""
    from strands_durable.store.fleet import queue_stats

    stats = run_async(with_store(queue_stats, fleet=True))
    if as_json:
        print_json(stats.to_dict())
        return
    table = new_table("shard", "length", "lag", "pending", "consumers", "dead letters",
                      "timers", "due now", "deferred")
    for sh in stats.shards:
        table.add_row(str(sh.shard), str(sh.length), str(sh.lag), str(sh.pending),
                      str(sh.consumers), str(sh.dead_letters), str(sh.timers),
                      str(sh.timers_due), str(sh.deferred))
    total = stats.total
    table.add_row("[bold]total[/bold]", str(total["length"]), str(total["lag"]),
                  str(total["pending"]), "", str(total["dead_letters"]), str(total["timers"]),
                  str(total["timers_due"]), str(total["deferred"]))
    print_table(table)
