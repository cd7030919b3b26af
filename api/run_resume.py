"""Continuing a session in this process, the way `durable run` runs a new one
(worker/embedded.py): `durable run --resume ID`, `durable run SPEC --auto-resume`, and
`durable resume ID` when no fleet is configured (no DURABLE_REDIS_URL).

A session resumes from its last commit: paused and failed ones through the operator's
resume (held and failed steps queued again), a `running` one whose runner died as it
stands (its steps are on the stream, or pending under the dead runner and taken over),
a completed one is only reported. Nothing committed runs again. The runner lock
refuses a second runner of the same session, naming the first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from strands_durable.errors import LockNotAcquired
from strands_durable.models import SessionStatus, StepResult
from strands_durable.sessions.autoresume import find_resumable
from strands_durable.sessions.cleanup import cleanup_sessions
from strands_durable.sessions.control import resume
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import LoadedSpec
from strands_durable.store.connect import MEMORY_URL, is_local, open_store
from strands_durable.store.store import SessionRecord, Store
from strands_durable.worker.embedded import RunOutcome, run_here
from strands_durable.worker.runner import Interrupts

LOCAL_RETENTION_DAYS = 7.0  # seed 000's default, for the local store's completed sessions
CLEANUP_BATCH = 100  # a run deletes at most this many old sessions before it starts


@dataclass(frozen=True)
class ResumeChanges:
    """What `durable resume` may change on the way (see sessions/control.py)."""

    variables: Mapping[str, Any] = field(default_factory=dict)
    hitl_response: str | None = None
    budget_sets: Mapping[str, int] = field(default_factory=dict)
    new_spec: LoadedSpec | None = None

    def any(self, but_variables: bool = False) -> bool:
        return bool((self.variables and not but_variables) or self.budget_sets
                    or self.new_spec or self.hitl_response is not None)


def changed(stored: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """The variables `given` that differ from the session's: `--auto-resume` passes the
    run's own, which change nothing when they are the session's."""
    return {k: v for k, v in given.items() if stored.get(k) != v}


def persistent(settings: DurableSettings) -> bool:
    return not settings.redis_url.startswith(MEMORY_URL)


async def latest_resumable(settings: DurableSettings, loaded: LoadedSpec) -> str | None:
    """The session `--auto-resume` would continue, or None (always, for memory://)."""
    if not persistent(settings):
        return None
    store = open_store(settings)
    try:
        return await find_resumable(store, loaded.spec_hash, local=is_local(settings))
    finally:
        await store.close()


async def local_retention(settings: DurableSettings, keep_completed: bool) -> list[str]:
    """Seed 000's cleanup, run by `durable run` on the local store (it has no scheduler):
    ended sessions older than DURABLE_RETENTION_DAYS (7 unless set; 0 keeps them), the
    completed ones kept with --keep-completed. Never running or paused ones."""
    days = (settings.retention_days if "retention_days" in settings.model_fields_set
            else LOCAL_RETENTION_DAYS)
    if not is_local(settings) or days == 0:
        return []
    store = open_store(settings)
    try:
        return await cleanup_sessions(store, max_age_days=days, keep_completed=keep_completed,
                                      limit=CLEANUP_BATCH, wait_s=0.5)
    except LockNotAcquired:
        return []  # another command is cleaning up right now
    finally:
        await store.close()


async def resume_embedded(settings: DurableSettings, session_id: str,
                          on_step: Callable[[StepResult, bool], None],
                          changes: ResumeChanges | None = None,
                          on_notes: Callable[[list[str]], None] | None = None,
                          interrupts: Interrupts | None = None,
                          on_resume: Callable[[SessionRecord], None] | None = None
                          ) -> RunOutcome:
    """Resume `session_id` and run it here to its end. `on_step(result, before)` sees every
    committed step, `before` telling the ones committed before this resume."""
    changes = changes or ResumeChanges()
    seen = committed_before = 0

    def report(result: StepResult) -> None:
        nonlocal seen
        seen += 1
        on_step(result, seen <= committed_before)

    async def begin(store: Store) -> str:
        nonlocal committed_before
        record = await store.get_session(session_id)
        committed_before = record.steps_committed
        if on_resume:
            on_resume(record)
        variables = changed(record.variables, changes.variables)
        as_it_stands = (SessionStatus.RUNNING, SessionStatus.COMPLETED)
        if record.status not in as_it_stands or variables or changes.any(but_variables=True):
            outcome = await resume(store, session_id, variables=variables or None,
                                   hitl_response=changes.hitl_response,
                                   budget_sets=changes.budget_sets or None,
                                   new_spec=changes.new_spec)
            if on_notes:
                on_notes(outcome.notes)
        return session_id

    return await run_here(settings, begin, report, resuming=session_id, interrupts=interrupts)
