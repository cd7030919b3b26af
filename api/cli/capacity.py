"""`durable capacity`: the fleet's provider keys and their shared capacity."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from strands_durable.api.cli.common import (
    JsonOpt,
    app,
    env_settings,
    print_json,
    run_async,
    with_store,
)
from strands_durable.api.cli.output import new_table, print_table
from strands_durable.settings import DurableSettings
from strands_durable.store.capacity import CapacityState
from strands_durable.store.store import Store


def _doc(state: CapacityState, settings: DurableSettings) -> dict[str, Any]:
    key = state.key
    declared = settings.declared(key.provider, key.model, key.host)
    return {"provider": key.provider, "model": key.model, "host": key.host,
            "declared": declared.model_dump(exclude={"provider", "model", "host"})
            if declared else None,
            "learned_rpm": state.learned_rpm or None,
            "learned_in_flight": int(state.learned_in_flight) or None,
            "in_flight": state.in_flight, "granted": state.granted,
            "throttled": state.throttled, "backoff_ms": state.backoff_ms}


@app.command()
def capacity(as_json: JsonOpt = False) -> None:
    """Each provider key (provider, model, host) the fleet has called: the limits declared
    (DURABLE_CAPACITY_LIMITS) and learned from throttling, requests in flight now, requests
    granted and throttled so far, and the shared backoff left."""
    settings = env_settings()

    async def states(store: Store) -> list[CapacityState]:
        return await store.capacity_states()

    docs = [_doc(s, settings) for s in run_async(with_store(states, fleet=True))]
    if as_json:
        print_json(docs)
        return
    table = new_table("provider", "model", "host", "declared", "learned", "in flight",
                      "granted", "throttled", "backoff")
    for doc in docs:
        declared = doc["declared"] or {}
        said = ", ".join(f"{k} {v}" for k, v in declared.items() if v) or "-"
        learned = ", ".join(part for part in (
            f"rpm {doc['learned_rpm']:.0f}" if doc["learned_rpm"] else "",
            f"in_flight {doc['learned_in_flight']}" if doc["learned_in_flight"] else "") if part)
        table.add_row(escape(doc["provider"]), escape(doc["model"]), escape(doc["host"]) or "-",
                      said, learned or "-", str(doc["in_flight"]), str(doc["granted"]),
                      str(doc["throttled"]),
                      f"{doc['backoff_ms'] / 1000:.1f}s" if doc["backoff_ms"] else "-")
    print_table(table)
