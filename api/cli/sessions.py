"""`durable sessions list|show|delete|cleanup`."""

from __future__ import annotations

import math
import sys
from typing import Annotated

import typer
from rich.markup import escape

from strands_durable.api.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    JsonOpt,
    SessionIdArg,
    checked_namespace,
    fail,
    out,
    print_json,
    run_async,
    sessions_app,
    with_store,
)
from strands_durable.api.cli.output import err, new_table, print_table
from strands_durable.api.listing import ListQuery, list_page
from strands_durable.models import SessionStatus
from strands_durable.sessions.access import local_actor, record_action
from strands_durable.sessions.status import (
    SessionSummary,
    session_status,
    summary,
)
from strands_durable.store.store import Store


@sessions_app.command("list")
def sessions_list(
    status_filter: Annotated[SessionStatus | None, typer.Option("--status")] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000,
                                       help="At most this many, newest first.")] = 50,
    namespace: Annotated[str | None, typer.Option(
        "--namespace", envvar="DURABLE_NAMESPACE", callback=checked_namespace("--namespace"),
        help="Only this namespace's sessions (default: every namespace).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Sessions, most recently updated first."""

    async def body(store: Store) -> list[SessionSummary]:
        if namespace is None:
            return [summary(r) for r in await store.list_sessions(status_filter, limit)]
        page = await list_page(store, ListQuery(limit=max(1, min(limit, 500)),
                                                status=status_filter, namespace=namespace))
        return [summary(r) for r in page.records]

    docs = run_async(with_store(body))
    if as_json:
        print_json(docs)
        return
    table = new_table("session_id", "status", "workflow", "pattern", "steps", "tokens",
                      "updated")
    for d in docs:
        usage = d.token_usage
        table.add_row(d.session_id, d.status.value, escape(d.workflow_name), d.pattern_type,
                      str(d.steps_committed),
                      str(usage.total_input_tokens + usage.total_output_tokens), d.updated_at)
    print_table(table)


@sessions_app.command("show")
def sessions_show(session_id: SessionIdArg, as_json: JsonOpt = False) -> None:
    """Everything about one session, as JSON (always; --json makes errors JSON too)."""
    doc = run_async(with_store(lambda store: session_status(store, session_id)))
    print_json(doc)


@sessions_app.command("delete")
def sessions_delete(
    session_id: SessionIdArg,
    yes: Annotated[bool, typer.Option(
        "--yes", "-y", help="Delete without asking (needed without a terminal).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Delete a session and everything it stored; asks first on a terminal."""
    from strands_durable.sessions.deletion import delete_session

    async def body(store: Store) -> None:
        if not yes:
            await store.get_session(session_id)  # an unknown id: not found, not a question
            confirm_delete(session_id, as_json)
        namespace = await store.session_namespace(session_id)
        await delete_session(store, session_id)
        await record_action(store, "delete", session_id, actor=local_actor("cli"),
                            source="cli", namespace=namespace)

    run_async(with_store(body))
    if as_json:
        print_json({"session_id": session_id, "deleted": True})
        return
    out.print(f"deleted {session_id}", highlight=False)


def confirm_delete(session_id: str, as_json: bool) -> None:
    """Ask on a terminal; without one (a pipe, CI) there is nobody to ask: refuse,
    naming --yes, rather than delete on a guess."""
    if as_json or not sys.stdin.isatty():
        why = "--json" if as_json else "no terminal"
        raise fail(f"sessions delete {session_id}: nobody to confirm the deletion here "
                   f"({why}); pass --yes to delete", EXIT_USAGE)
    answer = err.input(f"delete session {escape(session_id)} and everything it stored? "
                       f"\\[y/N] ")
    if answer.strip().lower() not in ("y", "yes"):
        raise fail(f"{session_id} not deleted", EXIT_FAILED)


@sessions_app.command("cleanup")
def sessions_cleanup(
    max_age_days: Annotated[float, typer.Option(
        "--max-age-days", help="Delete ended sessions last updated more than N days ago.")],
    keep_completed: Annotated[bool, typer.Option(
        "--keep-completed", help="Only failed and cancelled ones.")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="List what would be deleted; delete nothing.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Delete completed, failed and cancelled sessions older than N days (never running
    or paused ones)."""

    from strands_durable.sessions.cleanup import cleanup_sessions

    if not math.isfinite(max_age_days) or max_age_days < 0:
        raise fail(f"--max-age-days {max_age_days}: must be a number of days >= 0", EXIT_USAGE)
    ids = run_async(with_store(lambda store: cleanup_sessions(
        store, max_age_days=max_age_days, keep_completed=keep_completed, dry_run=dry_run)))
    if as_json:
        print_json({"dry_run": dry_run, "deleted": [] if dry_run else ids,
                    "would_delete": ids if dry_run else []})
        return
    for sid in ids:
        out.print(f"{'would delete' if dry_run else 'deleted'} {sid}", highlight=False,
                  soft_wrap=True)
    out.print(f"{len(ids)} session(s) {'would be ' if dry_run else ''}deleted",
              highlight=False)
