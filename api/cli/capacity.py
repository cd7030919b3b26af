"""`durable capacity`: the fleet's provider keys and their shared capacity."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from strands_durable.api.capacity_view import capacity_docs, in_force_text
from strands_durable.api.cli.common import (
    JsonOpt,
    app,
    env_settings,
    print_json,
    run_async,
    with_store,
)
from strands_durable.api.cli.output import new_table, print_table, terminal_safe
from strands_durable.store.store import Store


def fleet_capacity() -> list[dict[str, Any]]:
    """Every provider key the fleet has called, as the views show it."""
    settings = env_settings()

    async def docs(store: Store) -> list[dict[str, Any]]:
        return await capacity_docs(store, settings)

    return run_async(with_store(docs, fleet=True))


def shown(name: str) -> str:
    """A key's part as a spec or a setting named it: markup and control characters
    inert."""
    return escape(terminal_safe(name))


def capacity_table(docs: list[dict[str, Any]]) -> Table:
    table = new_table("provider", "model", "host", "declared", "learned", "in force",
                      "in flight", "waiting", "granted", "throttled", "backoff")
    for doc in docs:
        declared = doc["declared"] or {}
        said = ", ".join(f"{k} {v}" for k, v in declared.items() if v) or "-"
        learned = ", ".join(part for part in (
            f"rpm {doc['learned_rpm']:.0f}" if doc["learned_rpm"] else "",
            f"in_flight {doc['learned_in_flight']}" if doc["learned_in_flight"] else "") if part)
        waiting = (f"{doc['waiting']} ({doc['waiting_sessions']} sessions)"
                   if doc["waiting"] or doc["waiting_sessions"] else "0")
        table.add_row(shown(doc["provider"]), shown(doc["model"]), shown(doc["host"]) or "-",
                      said, learned or "-", in_force_text(doc), str(doc["in_flight"]), waiting,
                      str(doc["granted"]), str(doc["throttled"]),
                      f"{doc['backoff_ms'] / 1000:.1f}s" if doc["backoff_ms"] else "-")
    return table


@app.command()
def capacity(as_json: JsonOpt = False) -> None:
    """Each provider key (provider, model, host) the fleet has called: the limits declared
    (DURABLE_CAPACITY_LIMITS) and learned from throttling, the limit in force, requests in
    flight now, requests (and sessions) waiting for their turn, requests granted and
    throttled so far, and the shared backoff left."""
    docs = fleet_capacity()
    if as_json:
        print_json(docs)
        return
    print_table(capacity_table(docs))
