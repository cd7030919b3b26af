"""runtime.max_parallel holds across the fleet: two real `arq worker` processes, each
able to run eight steps at once, run exactly max_parallel steps of one session at the
same time, never more. Every branch (task) is held at a worker breakpoint once it has
started, so the bound is met for certain, not by hoping a slow model call overlaps the
steps: while max_parallel of them are held, exactly those are in flight and on the steps'
stream (the others are not even scheduled, so nothing can start a third); releasing one
lets exactly one more start. In flight is counted from the session's own event stream,
whose order is the order Redis recorded them in: +1 at step_started, -1 at
step_completed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from helpers import StepBreakpoints, wait_for
from helpers.fleet import Fleet

from strands_durable.models import SessionStatus
from strands_durable.patterns.parallel import branch_key
from strands_durable.patterns.workflow import task_key
from strands_durable.sessions.start import start_session
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.store import Store

pytestmark = pytest.mark.e2e

MAX_PARALLEL = 2
WIDTH = 6
SPEC = """
version: 0
name: wide-{pattern}
runtime:
  provider: scripted
  max_parallel: {max_parallel}
agents:
  a: {{prompt: "You answer briefly."}}
pattern:
  type: {pattern}
  config:
{config}
"""

PARALLEL = "\n".join(["    branches:"] + [
    f"      - id: b{i}\n        steps:\n          - agent: a\n            input: \"branch {i}\""
    for i in range(WIDTH)] + ["    reduce:\n      agent: a\n      input: \"merge\""])
WORKFLOW = "\n".join(["    tasks:"] + [
    f"      - id: t{i}\n        agent: a\n        input: \"task {i}\"" for i in range(WIDTH)])
HELD = {"parallel": [branch_key(f"b{i}", 0) for i in range(WIDTH)],
        "workflow": [task_key(f"t{i}") for i in range(WIDTH)]}


def most_steps_at_once(history: list[dict[str, str]]) -> int:
    running: set[str] = set()
    most = 0
    for event in history:
        if event["type"] == "step_started":
            running.add(event["step"])
        elif event["type"] in ("step_completed", "step_failed"):
            running.discard(event["step"])
        most = max(most, len(running))
    return most


async def in_flight(store: Store, sid: str) -> tuple[set[str], set[str], int]:
    """The session's steps started and not ended, and those completed (by its events); the
    entries on its shard's steps stream (its only session): each a step scheduled, whether
    delivered or not."""
    started: set[str] = set()
    ended: set[str] = set()
    for _, event in await store.events(sid):
        if event["type"] == "step_started":
            started.add(event["step"])
        elif event["type"] == "step_completed":
            ended.add(event["step"])
    entries = await store.redis.xlen(store.keys.stream(store.keys.shard(sid)))
    return started - ended, ended, entries


async def hold_and_release_one_at_a_time(store: Store, sid: str, points: StepBreakpoints,
                                         workflow: str, keys: list[str]) -> None:
    released: list[str] = []
    while len(released) < len(keys):
        expected = min(MAX_PARALLEL, len(keys) - len(released))

        async def settled(expected: int = expected) -> list[str] | None:
            held = [k for k in keys if k not in released and points.hits(workflow, k)]
            _, ended, _ = await in_flight(store, sid)
            return held if len(held) >= expected and ended >= set(released) else None

        held = await wait_for(settled, timeout_s=60,
                              what=f"{expected} steps held after {len(released)} released")
        running, _, entries = await in_flight(store, sid)
        # Exactly max_parallel started and held, both workers free to take more (eight
        # slots each): and no other step scheduled, so none can start while they are held.
        assert len(held) == expected, held
        assert running == set(held), (running, held)
        assert entries == expected, f"{entries} steps scheduled while {held} are held"
        points.clear(workflow, held[0])  # one goes on: exactly one more may start
        released.append(held[0])


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("pattern", "config"), [("parallel", PARALLEL),
                                                  ("workflow", WORKFLOW)],
                         ids=["parallel", "workflow"])
async def test_max_parallel_bounds_one_session_across_two_workers(
        fleet_factory: Callable[..., Fleet], store: Store, pattern: str, config: str) -> None:
    fleet: Fleet = fleet_factory(worker_concurrency=8)
    points, workflow, keys = fleet.breakpoints, f"wide-{pattern}", HELD[pattern]
    for key in keys:
        points.set(workflow, key)
    fleet.start_worker()
    fleet.start_worker()
    spec = SPEC.format(pattern=pattern, config=config, max_parallel=MAX_PARALLEL)
    sid, _ = await start_session(store, load_spec_text(spec, f"{pattern}.yaml"))
    await hold_and_release_one_at_a_time(store, sid, points, workflow, keys)

    async def ended() -> Any:
        record = await store.get_session(sid)
        return record if record.status != SessionStatus.RUNNING else None

    record = await wait_for(ended, timeout_s=120, what="the session to end")
    assert record.status == SessionStatus.COMPLETED, record.error
    assert all(len(points.hits(workflow, key)) == 1 for key in keys)  # each ran once
    history = [event for _, event in await store.events(sid)]
    started = [e["step"] for e in history if e["type"] == "step_started"]
    assert len(set(started)) == (WIDTH + 1 if pattern == "parallel" else WIDTH)
    assert most_steps_at_once(history) == MAX_PARALLEL
