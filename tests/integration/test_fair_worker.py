"""Fair dispatch in a real worker (what `arq worker` hosts), in this process: a quota of
steps in flight holds a namespace to it while another's steps go on beside, and every
step still runs once. The steps are held at a breakpoint while the counts are read, so
the overlap is a condition, not a model call's delay."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

import pytest
from helpers import StepBreakpoints, wait_for

from strands_durable.access import NamespaceQuota
from strands_durable.models import SessionStatus
from strands_durable.sessions.start import in_namespace, new_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

SPEC = """
version: 0
name: one-step
runtime:
  provider: scripted
agents:
  a: {prompt: "You are a."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "one"}
"""


def peak(spans: list[tuple[datetime, datetime]]) -> int:
    """The most spans open at once (an end sorts before a start at the same instant)."""
    marks = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans],
                   key=lambda m: (m[0], m[1]))
    most = now = 0
    for _, step in marks:
        now += step
        most = max(most, now)
    return most


async def span(store: Store, sid: str) -> tuple[datetime, datetime]:
    at = {f["type"]: datetime.fromisoformat(f["at"]) for _, f in await store.events(sid)
          if f["type"] in ("step_started", "step_completed")}
    return at["step_started"], at["step_completed"]


async def test_a_quota_of_steps_in_flight_in_a_running_worker(
        settings: DurableSettings, store: Store, breakpoints: StepBreakpoints) -> None:
    await store.set_quota(NamespaceQuota(namespace="team-a", steps_in_flight=2))
    loaded = load_spec_text(SPEC, "one.yaml")
    a = [(await store.create_session(in_namespace(new_session(loaded), "team-a")))[0]
         for _ in range(8)]
    b = [(await store.create_session(in_namespace(new_session(loaded), "team-b")))[0]
         for _ in range(4)]
    breakpoints.set("one-step", "step:0")  # every step is held once it runs
    worker = StepConsumer(settings.model_copy(update={
        "worker_concurrency": 8, "worker_adaptive_concurrency": False}), store)
    await worker.start()  # its first heartbeat reads the quota
    try:
        # Held: team-b's four and team-a's quota of two; team-a's six others wait on its
        # list although two of the worker's eight slots are free.
        held = await breakpoints.wait("one-step", "step:0", n=6)

        async def rest_deferred() -> bool:
            return await store.deferred_steps(0) == 6

        await wait_for(rest_deferred, timeout_s=30, what="team-a's six other steps deferred")
        held = breakpoints.hits("one-step", "step:0")
        assert sorted(h.session in a for h in held) == [False] * 4 + [True] * 2, held
        breakpoints.clear("one-step", "step:0")

        async def all_done() -> bool:
            done = await store.redis.zcard(store.keys.index_status(0, SessionStatus.COMPLETED))
            return done == len(a) + len(b)
        await wait_for(all_done, timeout_s=60, what="every session to complete")
    finally:
        breakpoints.clear("one-step", "step:0")
        await worker.stop(grace_s=5)
    assert peak([await span(store, sid) for sid in a]) == 2  # never more than its quota
    assert peak([await span(store, sid) for sid in b]) == 4  # team-b was not held to it
    for sid in a + b:
        done = Counter(f["type"] for _, f in await store.events(sid))
        assert done["step_completed"] == 1 and done["step_started"] == 1, sid
    assert await store.deferred_steps(0) == 0
