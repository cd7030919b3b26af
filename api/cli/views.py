"""Read-only commands: status, wait, history, checkpoints, watch, workers, queue."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from strands_durable.api.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_PAUSED,
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
from strands_durable.models import SessionStatus
from strands_durable.scheduler.operations.history import event_docs
from strands_durable.scheduler.operations.status import session_status
from strands_durable.store.store import Store


@app.command()
def status(session_id: SessionIdArg, as_json: JsonOpt = False) -> None:
    """A session's status, token usage and pattern_state."""
    doc = run_async(with_store(lambda store: session_status(store, session_id)))
    if as_json:
        print_json(doc)
        return
    table = Table(show_header=False, box=None)
    for key in ("session_id", "status", "workflow_name", "pattern_type", "created_at",
                "updated_at", "steps_committed", "error", "paused_reason"):
        value = getattr(doc, key)
        if value not in (None, ""):
            table.add_row(f"[bold]{key}[/bold]", str(value))
    usage = doc.token_usage
    table.add_row("[bold]tokens[/bold]", f"{usage.total_input_tokens} in / "
                  f"{usage.total_output_tokens} out  {usage.by_agent}")
    out.print(table)
    out.print_json(data=doc.pattern_state)


@app.command()
def wait(
    session_id: SessionIdArg,
    timeout: TimeoutOption = None,
    poll: Annotated[float, typer.Option(help="Seconds between checks.",
                                        callback=interval_s)] = 0.2,
) -> None:
    """Wait for a session to stop running: exit 0 completed, 1 failed or cancelled,
    3 paused, 124 timed out."""

    async def body(store: Store) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            record = await store.get_session(session_id)
            if record.status == SessionStatus.COMPLETED:
                return EXIT_OK
            if record.status == SessionStatus.PAUSED:
                err.print(f"paused: {record.paused_reason or ''}", highlight=False)
                hint = budget_hint(session_id, record.paused_reason or "")
                if hint:
                    err.print(hint, highlight=False, soft_wrap=True)
                return EXIT_PAUSED
            if record.status.is_terminal:
                err.print(f"{record.status.value}: {record.error or ''}", highlight=False)
                return EXIT_FAILED
            if deadline is not None and time.monotonic() >= deadline:
                err.print(f"timed out after {timeout}s; session is {record.status.value}")
                return EXIT_TIMEOUT
            await asyncio.sleep(poll)

    raise typer.Exit(run_async(with_store(body)))


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
    table = Table("at", "type", "step", "attempt", "worker", "detail")
    for e in events:
        table.add_row(e["at"], e["type"], e["step"], str(e["attempt"] or ""), e["worker"],
                      e.get("detail", ""))
    out.print(table)


@app.command()
def checkpoints(
    session_id: SessionIdArg,
    n: Annotated[int | None, typer.Argument(
        help="Show this checkpoint in full, with its pattern_state.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """A session's checkpoints (one per commit): type, step, time, clean or not."""
    from strands_durable.scheduler.operations.checkpoints import get_checkpoint, list_checkpoints

    if n is not None and n < 1:
        raise fail(f"checkpoint {n}: checkpoints are numbered from 1", EXIT_USAGE)
    if n is not None:
        doc = run_async(with_store(lambda store: get_checkpoint(store, session_id, n)))
        if as_json:
            print_json(doc)
            return
        table = Table(show_header=False, box=None)
        for key in ("n", "type", "step", "attempt", "agent", "at", "status", "clean",
                    "tokens_total", "steps_committed"):
            table.add_row(f"[bold]{key}[/bold]", escape(str(getattr(doc, key))))
        out.print(table)
        out.print_json(data=doc.pattern_state)
        return
    docs = run_async(with_store(lambda store: list_checkpoints(store, session_id)))
    if as_json:
        print_json(docs)
        return
    table = Table("n", "at", "type", "step", "agent", "attempt", "status", "clean", "tokens")
    for d in docs:
        table.add_row(str(d.n), d.at, d.type, d.step, d.agent, str(d.attempt), d.status,
                      "yes" if d.clean else "no", str(d.tokens_total))
    out.print(table)


@app.command()
def watch(
    session_id: SessionIdArg,
    timeout: TimeoutOption = None,
    poll: Annotated[float, typer.Option(help="Seconds between reads.",
                                        callback=interval_s)] = 0.2,
) -> None:
    """Live progress of a session until it stops running; exit codes as `wait`."""
    from strands_durable.api.watch import watch as do_watch

    record, timed_out = run_async(with_store(
        lambda store: do_watch(store, session_id, out, poll_s=poll, timeout_s=timeout)))
    if timed_out:
        err.print(f"timed out after {timeout}s; session is {record.status.value}")
        raise typer.Exit(EXIT_TIMEOUT)
    raise typer.Exit(exit_code(record.status))


@app.command()
def workers(
    alive: Annotated[bool, typer.Option("--alive", help="Only live workers.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """The workers: consumer name, host/pid, running steps, pending entries, heartbeat."""
    from strands_durable.store.fleet import list_workers

    infos = [w for w in run_async(with_store(list_workers, fleet=True)) if w.alive or not alive]
    if as_json:
        print_json([w.to_dict() for w in infos])
        return
    table = Table("consumer", "host", "pid", "alive", "last seen", "running", "pending")
    for w in infos:
        seen = f"{w.last_seen_age_s:.1f}s ago" if w.last_seen_age_s is not None else "never"
        table.add_row(w.consumer, w.host, str(w.pid or ""),
                      "[green]yes[/green]" if w.alive else "[red]no[/red]", seen,
                      escape("\n".join(w.running)) or "-", str(w.pending))
    out.print(table)


@app.command()
def queue(as_json: JsonOpt = False) -> None:
    """Per shard and in total: stream length, lag, pending, dead letters, timers due."""
    from strands_durable.store.fleet import queue_stats

    stats = run_async(with_store(queue_stats, fleet=True))
    if as_json:
        print_json(stats.to_dict())
        return
    table = Table("shard", "length", "lag", "pending", "consumers", "dead letters", "timers",
                  "due now")
    for sh in stats.shards:
        table.add_row(str(sh.shard), str(sh.length), str(sh.lag), str(sh.pending),
                      str(sh.consumers), str(sh.dead_letters), str(sh.timers),
                      str(sh.timers_due))
    total = stats.total
    table.add_row("[bold]total[/bold]", str(total["length"]), str(total["lag"]),
                  str(total["pending"]), "", str(total["dead_letters"]), str(total["timers"]),
                  str(total["timers_due"]))
    out.print(table)
