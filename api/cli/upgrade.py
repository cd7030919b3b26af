"""`durable data-format`: the data format recorded in Redis against this release's, and
the operator's upgrade when a step cannot run by itself at a role's start."""

from __future__ import annotations

from typing import Annotated

import typer

from strands_durable.api.cli.common import JsonOpt, app, out, print_json, run_async, with_store
from strands_durable.store.store import Store
from strands_durable.version import DATA_FORMAT, __version__


@app.command("data-format")
def data_format(
    upgrade: Annotated[bool, typer.Option(
        "--upgrade", help="Run the pending migrations (in order, under a lock; each "
        "idempotent, so an interrupted upgrade resumes when run again).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """The data format recorded under the key prefix and this release's. Every role
    checks it at start: it records it on an empty Redis, upgrades older data in place
    when it can, and refuses data newer than it reads."""

    async def body(store: Store) -> tuple[int | None, list[str]]:
        done = [m.summary for m in await store.upgrade_data_format()] if upgrade else []
        return await store.data_format(), done

    recorded, done = run_async(with_store(body))
    if as_json:
        print_json({"release": __version__, "data_format": DATA_FORMAT,
                    "recorded_format": recorded, "upgraded": done})
        return
    for summary in done:
        out.print(f"upgraded: {summary}", markup=False, highlight=False, soft_wrap=True)
    shown = "none recorded" if recorded is None else str(recorded)
    out.print(f"strands-durable {__version__} reads data format {DATA_FORMAT}; "
              f"recorded: {shown}", markup=False, highlight=False, soft_wrap=True)
