"""`durable export ID` and `durable import FILE`: a whole session as one JSON document,
from this store (the local one, or DURABLE_REDIS_URL's) to another."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from strands_durable.api.cli.common import (
    EXIT_USAGE,
    JsonOpt,
    SessionIdArg,
    app,
    env_settings,
    err,
    fail,
    out,
    print_json,
    run_async,
    with_store,
)
from strands_durable.sessions.transfer import (
    ImportedSession,
    export_session,
    export_text,
    import_session,
    parse_export,
)
from strands_durable.store.export import SessionExport
from strands_durable.store.store import Store


@app.command("export")
def export_command(session_id: SessionIdArg) -> None:
    """Write the whole session as JSON on stdout (`durable export ID > session.json`):
    spec, state, results, conversations, journals, checkpoints, events, artifacts and its
    queued jobs, read at one instant. The session stays where it is: pause it (or stop
    its fleet) first when it moves, or it runs on in both places."""

    async def body(store: Store) -> str:
        return export_text(await export_session(store, session_id))

    sys.stdout.write(run_async(with_store(body)) + "\n")


def read_document(path: str, limit: int) -> bytes:
    """The file's bytes (`-`: stdin), at most `limit` + 1 of them: a larger one is refused
    by its size without being read whole."""
    try:
        if path == "-":
            return sys.stdin.buffer.read(limit + 1)
        with Path(path).open("rb") as handle:
            return handle.read(limit + 1)
    except OSError as exc:
        raise fail(f"{path}: {exc.strerror or exc}", EXIT_USAGE) from None


@app.command("import")
def import_command(
    file: Annotated[str, typer.Argument(help="An export document (`-`: stdin).")],
    new_id: Annotated[bool, typer.Option(
        "--new-id", help="Import under a fresh session id (the document's id exists here, "
        "or it is a copy).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Write an exported session into this store, all or nothing, where it goes on from
    where it stopped: a running session's unfinished steps are queued again (the fleet's
    workers run them), a paused one stays paused, a finished one is kept as it ended. A
    document that is not a valid export, or whose session exists here, is refused (exit
    2) and nothing is written."""
    limit = env_settings().max_import_bytes
    doc = run_async(_parse(read_document(file, limit), limit))

    async def body(store: Store) -> ImportedSession:
        await store.prepare()  # the data format of this Redis is one this release writes
        return await import_session(store, doc, new_id=new_id)

    imported = run_async(with_store(body))
    if as_json:
        print_json(imported.__dict__)
        return
    queued = f", {imported.requeued} step(s) queued again" if imported.requeued else ""
    out.print(f"imported session {imported.session_id} ({imported.status}{queued})",
              markup=False, highlight=False, soft_wrap=True)
    if imported.requeued and imported.status == "running" and _local():
        # No fleet reads the local store: `durable run` is its worker.
        err.print(f"run it here: durable run --resume {imported.session_id}",
                  markup=False, highlight=False, soft_wrap=True)


def _local() -> bool:
    return "DURABLE_REDIS_URL" not in os.environ and not env_settings().ephemeral


async def _parse(data: bytes, limit: int) -> SessionExport:
    """Through run_async, so a refusal is answered as every command's errors are."""
    return parse_export(data, limit)
