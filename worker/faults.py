"""Faults for drills and tests, set by the operator's environment (never by a spec).

Crash points end this process abruptly at an exact place in a step's life, as a power
cut or OOM kill would, so tests can prove that a crash at any step boundary (or in the
middle of a step) loses nothing and commits nothing twice.

`DURABLE_CRASH_AT=<point>:<n>` crashes at the n-th time this process reaches <point>:
- `after_gate`: the step was claimed and admitted, its agent call not yet made;
- `before_commit`: the agent call returned, its result not yet committed;
- `after_commit`: the step's result and next steps are committed;
- `after_tool`: a tool call's result is journaled, the model has not seen it yet.
Unset (the default), every check is a single comparison.

Breakpoints stop a step where a test needs it to be, instead of a scripted delay that
only hopes the step is still running when the test acts (a loaded machine breaks that
hope). `DURABLE_BREAKPOINT_DIR=<dir>`: when a step has been claimed and admitted and its
agent call is next, and `<dir>/<breakpoint_name(workflow, step)>` exists, the worker
appends one JSON line (a hit: session, step, entry, worker, pid, reclaimed) to that
name + `.hits` and waits, its lease still renewed, until the file is removed. Unset
(the default), the runner holds no Breakpoints and checks nothing.

`DURABLE_LOOP_STALL=S:P` keeps the worker's event loop busy with Python code for S
seconds every P seconds (`stall_loop`): a drill for fast failover's no-false-death rule.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path

from strands_durable.models import StepJob

log = logging.getLogger("durable.worker")

POINTS = ("after_gate", "before_commit", "after_commit", "after_tool")
CRASH_EXIT_CODE = 137  # what a SIGKILLed process reports


class CrashPoints:
    def __init__(self, spec: str = "") -> None:
        self.point, self.nth = parse(spec) if spec else ("", 0)
        self.seen: Counter[str] = Counter()

    def reached(self, point: str) -> None:
        if point != self.point:
            return
        self.seen[point] += 1
        if self.seen[point] == self.nth:
            log.warning("crash point %s:%d reached; exiting now", point, self.nth)
            for handler in logging.getLogger().handlers:
                handler.flush()
            sys.stdout.flush()
            os._exit(CRASH_EXIT_CODE)  # no cleanup, no ack, no hand-back: a real crash


def parse(spec: str) -> tuple[str, int]:
    point, _, count = spec.partition(":")
    if point not in POINTS or not count.isdigit() or int(count) < 1:
        raise ValueError(f"DURABLE_CRASH_AT={spec!r}: expected <point>:<n> with point one of "
                         f"{', '.join(POINTS)} and n >= 1")
    return point, int(count)


HITS_SUFFIX = ".hits"
BREAKPOINT_POLL_S = 0.02


def breakpoint_name(workflow: str, step: str) -> str:
    """The file that sets a breakpoint on `step` of the sessions of `workflow` (the spec's
    name); characters unsafe in a file name become `_`."""
    return f"{_safe(workflow)}@{_safe(step)}"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:100]


class Breakpoints:
    def __init__(self, directory: str, worker: str) -> None:
        self.directory = Path(directory)
        self.worker = worker

    async def reached(self, workflow: str, job: StepJob, entry_id: str,
                      reclaimed: bool) -> None:
        name = breakpoint_name(workflow, job.key)
        request = self.directory / name
        if not request.exists():
            return
        hit = {"session": job.session_id, "step": job.key, "entry": entry_id,
               "worker": self.worker, "pid": os.getpid(), "reclaimed": reclaimed}
        # One write with O_APPEND: hits of several workers never interleave.
        fd = os.open(self.directory / (name + HITS_SUFFIX),
                     os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, (json.dumps(hit) + "\n").encode())
        finally:
            os.close(fd)
        log.warning("breakpoint %s: session %s waits until %s is removed", name,
                    job.session_id, request)
        while request.exists():
            await asyncio.sleep(BREAKPOINT_POLL_S)


def parse_stall(spec: str) -> tuple[float, float]:
    """DURABLE_LOOP_STALL `S:P`: (seconds held, period)."""
    held, _, every = spec.partition(":")
    return float(held), float(every)


async def stall_loop(spec: str) -> None:
    """Drills only (DURABLE_LOOP_STALL=S:P): every P seconds keep this event loop busy
    with Python code for S seconds, as a CPU-heavy render or a slow import would; the
    worker's beats (a thread of their own) must go on, and nobody may declare it dead."""
    held, every = parse_stall(spec)
    stalls = 0
    while True:
        await asyncio.sleep(every)
        until = time.monotonic() + held
        spins = 0
        while time.monotonic() < until:
            spins += 1
        stalls += 1
        log.warning("loop stall drill: held the event loop for %.1fs (stall %d)", held, stalls)
