"""The fleet's provider capacity as its views show it (`durable capacity`, `durable
workers`, the console's fleet page): each key's limits declared and learned, the limit
in force, its use now (requests in flight), and the requests and sessions waiting."""

from __future__ import annotations

from typing import Any

from strands_durable.provider_policy import CapacityPolicy
from strands_durable.store.capacity import CapacityState
from strands_durable.store.store import Store

__all__ = ["capacity_docs", "in_force_text", "waiting_by_worker"]


def _smallest(a: float, b: float) -> float:
    """The tighter of two limits where 0 is none (as capacity_acquire.lua has it)."""
    return b if a <= 0 else a if b <= 0 else min(a, b)


def capacity_doc(state: CapacityState, policy: CapacityPolicy) -> dict[str, Any]:
    key = state.key
    declared = policy.declared(key.provider, key.model, key.host)
    said = declared.model_dump(exclude={"provider", "model", "host"}) if declared else None
    rpm = _smallest(float(said["rpm"]) if said else 0.0, state.learned_rpm)
    in_flight_limit = int(_smallest(float(said["in_flight"]) if said else 0.0,
                                    state.learned_in_flight))
    return {"provider": key.provider, "model": key.model, "host": key.host, "key": key.label,
            "declared": said,
            "learned_rpm": state.learned_rpm or None,
            "learned_in_flight": int(state.learned_in_flight) or None,
            "in_force": {"rpm": rpm or None, "in_flight": in_flight_limit or None},
            "in_flight": state.in_flight, "waiting": state.waiting_requests,
            "waiting_sessions": state.waiting_sessions,
            "waiting_by_worker": dict(sorted(state.waiting.items())),
            "granted": state.granted, "throttled": state.throttled,
            "backoff_ms": state.backoff_ms}


async def capacity_docs(store: Store, policy: CapacityPolicy) -> list[dict[str, Any]]:
    return [capacity_doc(s, policy) for s in await store.capacity_states()]


def in_force_text(doc: dict[str, Any]) -> str:
    """'rpm 570, 4 at once' or '-'."""
    force = doc["in_force"]
    parts = ([f"rpm {force['rpm']:.0f}"] if force["rpm"] else []) + (
        [f"{force['in_flight']} at once"] if force["in_flight"] else [])
    return ", ".join(parts) or "-"


def waiting_by_worker(docs: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """worker -> {key: requests of its steps waiting for that key's capacity}."""
    out: dict[str, dict[str, int]] = {}
    for doc in docs:
        for worker, count in doc["waiting_by_worker"].items():
            out.setdefault(worker, {})[doc["key"]] = count
    return out
