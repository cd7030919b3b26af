"""`durable run`'s progress line, on a terminal only: a spinner naming the steps that
run now (key, agent, time so far), above which the committed steps print as always.

It reads the session's events (step_started ... step_completed) from a connection of
its own, and each started step's agent from its job on the stream. It only looks:
when it cannot read, the line goes quiet and the run goes on."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from rich.text import Text

from strands_durable.api.cli.output import MODE, out
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import MEMORY_URL, open_store
from strands_durable.store.store import Store

log = logging.getLogger("durable.cli")

STARTS = {"step_started", "step_reclaimed"}
ENDS = {"step_completed", "step_failed", "step_retried", "step_dead_lettered"}
RECENT_JOBS = 200  # how far back the stream is searched for a started step's job


@dataclass
class RunningSteps:
    """The steps running now; rendered afresh on each refresh of the spinner."""

    steps: dict[str, tuple[str, float]] = field(default_factory=dict)  # key: agent, since

    def __rich__(self) -> Text:
        if not self.steps:
            return Text("waiting for the next step", style="dim")
        now = time.monotonic()
        shown = [f"{key} {agent} {now - since:.1f}s".replace("  ", " ")
                 for key, (agent, since) in self.steps.items()]
        return Text("running " + ", ".join(shown))


async def agent_of(store: Store, session_id: str, step: str) -> str:
    """The agent of `step`'s job, from the newest entries of its shard's stream."""
    return await store.recent_job_agent(session_id, step, RECENT_JOBS)


async def track(settings: DurableSettings, session_id: str, running: RunningSteps) -> None:
    store = open_store(settings)
    after = "0-0"  # from the start: a resumed session's first events are old ones
    try:
        while True:
            started: dict[str, float] = {}
            for entry_id, f in await store.wait_events(session_id, after, 500, 1000):
                after = entry_id
                step = f.get("step", "")
                if f.get("type") in STARTS and step:
                    started[step] = time.monotonic()
                elif f.get("type") in ENDS:
                    started.pop(step, None)
                    running.steps.pop(step, None)
            for step, since in started.items():  # only the agents of steps still running
                running.steps[step] = (await agent_of(store, session_id, step), since)
    except Exception as exc:  # a progress line must never fail the run
        log.debug("progress line stopped: %r", exc)
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def progress_line(settings: DurableSettings
                        ) -> AsyncIterator[Callable[[str], None] | None]:
    """Yields `follow(session_id)` on a terminal (None elsewhere: piped and --json
    output stay as they are); the spinner stops when the block ends."""
    if not out.is_terminal or MODE.json or settings.redis_url.startswith(MEMORY_URL):
        yield None
        return
    running = RunningSteps()
    tasks: list[asyncio.Task[None]] = []

    def follow(session_id: str) -> None:
        tasks.append(asyncio.get_running_loop().create_task(
            track(settings, session_id, running)))

    try:
        with out.status(running, spinner="dots"):
            yield follow
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
