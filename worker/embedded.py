"""`durable run`: one process, no server to run: the user's local store (a private
redis-server, store/local_server.py) unless DURABLE_REDIS_URL is set or --ephemeral
asks for memory only, an in-process consumer of this session's steps alone
(worker/session_consumer.py) holding the session's runner lock (worker/runner.py),
and the session followed to its end."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from strands_durable.errors import SessionNotFound
from strands_durable.models import SessionStatus, StepResult
from strands_durable.planning.advance import FINAL_RESPONSE
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import LoadedSpec
from strands_durable.spec.telemetry import local_run
from strands_durable.store.connect import MEMORY_URL, is_local, open_store, session_settings
from strands_durable.store.store import SessionRecord, Store
from strands_durable.worker.runner import Interrupts, RunnerConsumer, interruptible, runner_lock
from strands_durable.worker.telemetry import TRACING

POLL_S = 0.02
CLOSE_TRACES_S = 2.0


@dataclass(frozen=True)
class RunOutcome:
    session_id: str
    record: SessionRecord
    final_response: str
    artifacts: dict[str, str]
    interrupted: bool = False  # Ctrl-C: paused at a step boundary, resumable


def honour_spec_telemetry() -> None:
    """`durable run` without DURABLE_REDIS_URL runs on the user's own machine: a spec's
    `telemetry.otel.endpoint` is the user's to choose, not the fleet's to allow. Set in
    the command's own context, before its spec is loaded (the steps inherit it)."""
    if "DURABLE_REDIS_URL" not in os.environ:
        local_run()


def embedded_settings(ephemeral: bool = False) -> DurableSettings:
    """Memory with --ephemeral; else DURABLE_REDIS_URL's Redis when set, else memory with
    DURABLE_EPHEMERAL, else the user's local store, started if need be."""
    settings = DurableSettings()
    if ephemeral or ("redis_url" not in settings.model_fields_set and settings.ephemeral):
        return DurableSettings(redis_url=MEMORY_URL)
    if "redis_url" in settings.model_fields_set:
        return settings
    return session_settings(settings)


async def follow(store: Store, session_id: str, on_step: Callable[[StepResult], None],
                 poll_s: float = POLL_S, stop: asyncio.Event | None = None) -> SessionRecord:
    """Report each committed step until the session stops running, or `stop` is set
    (checked between polls: cancelling a Redis call midway is not always clean)."""
    seen = 0
    while True:
        record = await store.get_session(session_id)
        fresh = await store.results(session_id, seen)
        for result in fresh:
            on_step(result)
        seen += len(fresh)
        if record.status != SessionStatus.RUNNING and record.steps_committed <= seen:
            return record
        if stop is not None and stop.is_set():
            return record
        await asyncio.sleep(poll_s)


def final_response(record: SessionRecord, results: list[StepResult]) -> str:
    """The session's result as its planner decided it at completion (the accepted draft,
    the reduce step, the branches' aggregate...), else the last step's reply."""
    final = record.state.get(FINAL_RESPONSE)
    if isinstance(final, str):
        return final
    return results[-1].response if results else ""


async def run_here(settings: DurableSettings, begin: Callable[[Store], Awaitable[str]],
                   on_step: Callable[[StepResult], None], *, resuming: str | None = None,
                   interrupts: Interrupts | None = None) -> RunOutcome:
    """`begin` a session (start or resume it; it returns the id) and run it to its end
    with an in-process consumer that runs this session's steps alone: the Redis of
    DURABLE_REDIS_URL may hold other sessions, and they are not ours to run. A resume
    (`resuming`) takes the session's runner lock before `begin` changes anything."""
    store = open_store(settings)
    consumer: RunnerConsumer | None = None
    try:
        await store.prepare()
        async with contextlib.AsyncExitStack() as held:
            if resuming is not None:
                if not await store.exists(resuming):  # before the lock writes its counter
                    raise SessionNotFound(resuming)
                await held.enter_async_context(runner_lock(store, resuming))
            session_id = await begin(store)
            if resuming is None:
                await held.enter_async_context(runner_lock(store, session_id))
            consumer = RunnerConsumer(settings, store, session_id)
            await consumer.start()
            if resuming is not None and is_local(settings):
                await consumer.take_over()  # no fleet: the runner we replace is dead
            record, interrupted = await interruptible(
                store, session_id, consumer,
                lambda report, stop: follow(store, session_id, report, stop=stop),
                on_step, interrupts)
            results = await store.results(session_id)
            return RunOutcome(session_id, record, final_response(record, results),
                              await store.artifacts(session_id), interrupted)
    finally:
        if consumer is not None:
            await consumer.stop(grace_s=0)
        # The run's spans leave before the command returns; a collector that is not
        # there holds the command up for CLOSE_TRACES_S at most.
        await asyncio.to_thread(TRACING.close, min(CLOSE_TRACES_S,
                                                   settings.otel_export_timeout_s))
        await store.close()


async def run_embedded(loaded: LoadedSpec, on_step: Callable[[StepResult], None],
                       on_start: Callable[[str], None] | None = None,
                       settings: DurableSettings | None = None,
                       interrupts: Interrupts | None = None) -> RunOutcome:
    async def begin(store: Store) -> str:
        session_id, _ = await start_session(store, loaded)
        if on_start:
            on_start(session_id)
        return session_id

    return await run_here(settings or embedded_settings(), begin, on_step,
                          interrupts=interrupts)
