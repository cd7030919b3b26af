"""The fleet over HTTP: its workers and its step streams, the same reads `durable
workers --json` and `durable queue --json` make (store/fleet.py)."""

from __future__ import annotations

from strands_durable.api.capacity_view import capacity_docs, waiting_by_worker
from strands_durable.api.deps import SettingsDep, StoreDep
from strands_durable.api.schemas_fleet import QueueOut, WorkerList, WorkerOut
from strands_durable.api.wiring import api_router
from strands_durable.settings import DurableSettings
from strands_durable.store.fleet import list_workers, queue_stats
from strands_durable.store.store import Store

router = api_router("/v1", tags=["fleet"])


async def fleet_workers(store: Store, settings: DurableSettings) -> WorkerList:
    """Every worker seen (alive or not), with its steps' waits for provider capacity;
    shared with the client's Redis backend (client/redis_backend.py)."""
    waits = waiting_by_worker(await capacity_docs(store, settings))
    return WorkerList(items=[
        WorkerOut.model_validate({**w.to_dict(), "capacity_waiting": waits.get(w.consumer, {})})
        for w in await list_workers(store)])


async def fleet_queue(store: Store) -> QueueOut:
    return QueueOut.model_validate((await queue_stats(store)).to_dict())


@router.get("/workers", response_model=WorkerList)
async def workers(store: StoreDep, settings: SettingsDep) -> WorkerList:
    """The workers: consumer name, host and pid, the steps each runs, its pending entries,
    its last heartbeat, and for one declared dead, when and how fast its steps ran again."""
    return await fleet_workers(store, settings)


@router.get("/queue", response_model=QueueOut)
async def queue(store: StoreDep) -> QueueOut:
    """Per shard and in total: stream length, lag, pending, dead letters, timers due."""
    return await fleet_queue(store)
