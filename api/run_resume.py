"""`durable run SPEC --auto-resume`: continue the latest failed or paused session of the
same spec in this process, the way `durable run` runs a new one (worker/embedded.py).

The embedded default store (memory://) lives only as long as one `durable run`, so
there is never an earlier session to find: auto-resume needs DURABLE_REDIS_URL.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from strands_durable.models import StepResult
from strands_durable.scheduler.operations.autoresume import find_resumable
from strands_durable.scheduler.operations.control import resume
from strands_durable.scheduler.spec.loader import LoadedSpec
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import MEMORY_URL, open_store
from strands_durable.store.store import Store
from strands_durable.worker.embedded import RunOutcome, run_here


def persistent(settings: DurableSettings) -> bool:
    return not settings.redis_url.startswith(MEMORY_URL)


async def latest_resumable(settings: DurableSettings, loaded: LoadedSpec) -> str | None:
    """The session `--auto-resume` would continue, or None (always, for memory://)."""
    if not persistent(settings):
        return None
    store = open_store(settings)
    try:
        return await find_resumable(store, loaded.spec_hash)
    finally:
        await store.close()


async def resume_embedded(settings: DurableSettings, session_id: str,
                          on_step: Callable[[StepResult, bool], None],
                          variables: Mapping[str, Any] | None = None,
                          on_notes: Callable[[list[str]], None] | None = None) -> RunOutcome:
    """Resume `session_id` and run it here to its end. `on_step(result, before)` sees every
    committed step, `before` telling the ones committed before this resume."""
    seen = committed_before = 0

    def report(result: StepResult) -> None:
        nonlocal seen
        seen += 1
        on_step(result, seen <= committed_before)

    async def begin(store: Store) -> str:
        nonlocal committed_before
        committed_before = (await store.get_session(session_id)).steps_committed
        outcome = await resume(store, session_id, variables=variables or None)
        if on_notes:
            on_notes(outcome.notes)
        return session_id

    return await run_here(settings, begin, report)
