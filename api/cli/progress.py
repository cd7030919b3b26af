"""`durable run`'s progress line, on a terminal only: a spinner naming the steps that
run now (key, agent, time so far, and the end of what its model has written so far),
above which the committed steps print as always.

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

from strands_durable.api.cli.output import MODE, out, terminal_safe
from strands_durable.sessions.live import LiveEntry
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import MEMORY_URL, open_store
from strands_durable.store.store import Store

log = logging.getLogger("durable.cli")

STARTS = {"step_started", "step_reclaimed"}
ENDS = {"step_completed", "step_failed", "step_retried", "step_dead_lettered"}
RECENT_JOBS = 200  # how far back the stream is searched for a started step's job


TAIL_CHARS = 60  # of a running step's text on the progress line


@dataclass
class RunningSteps:
    """The steps running now; rendered afresh on each refresh of the spinner, each with
    the end of what its model has written so far (the live stream)."""

    steps: dict[str, tuple[str, float]] = field(default_factory=dict)  # key: agent, since
    texts: dict[str, str] = field(default_factory=dict)  # key: its model's text so far

    def __rich__(self) -> Text:
        if not self.steps:
            return Text("waiting for the next step", style="dim")
        now = time.monotonic()
        shown = []
        for key, (agent, since) in self.steps.items():
            line = f"{key} {agent} {now - since:.1f}s".replace("  ", " ")
            written = terminal_safe(" ".join(self.texts.get(key, "").split()))
            if written:
                line += ": " + ("…" + written[-TAIL_CHARS:] if len(written) > TAIL_CHARS
                                else written)
            shown.append(line)
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
                    running.texts.pop(step, None)
            for step, since in started.items():  # only the agents of steps still running
                running.steps[step] = (await agent_of(store, session_id, step), since)
    except Exception as exc:  # a progress line must never fail the run
        log.debug("progress line stopped: %r", exc)
    finally:
        await store.close()


async def track_text(settings: DurableSettings, session_id: str, running: RunningSteps
                     ) -> None:
    """Keep each running step's text so far from the session's live stream (a new
    attempt of a step starts its text afresh)."""
    store = open_store(settings)
    after = "0-0"
    try:
        while True:
            for entry_id, fields in await store.live_wait(session_id, after, 500, 1000):
                after = entry_id
                entry = LiveEntry.of(entry_id, fields)
                if entry is None:
                    continue
                if entry.kind == "attempt":
                    running.texts[entry.step] = ""
                elif entry.kind == "text":
                    text = running.texts.get(entry.step, "") + entry.text
                    running.texts[entry.step] = text[-4 * TAIL_CHARS:]
    except Exception as exc:  # a progress line must never fail the run
        log.debug("progress text stopped: %r", exc)
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
        loop = asyncio.get_running_loop()
        tasks.append(loop.create_task(track(settings, session_id, running)))
        if settings.live_stream:
            tasks.append(loop.create_task(track_text(settings, session_id, running)))

    try:
        with out.status(running, spinner="dots"):
            yield follow
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
