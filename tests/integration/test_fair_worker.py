"""Fair dispatch in a real worker (what `arq worker` hosts), in this process: a quota of
steps in flight holds a namespace to it while another's steps go on beside, and every
step still runs once."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

import pytest
from helpers import wait_for

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
  script: {delay_s: 0.15}
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
        settings: DurableSettings, store: Store) -> None:
    await store.set_quota(NamespaceQuota(namespace="team-a", steps_in_flight=2))
    loaded = load_spec_text(SPEC, "one.yaml")
    a = [(await store.create_session(in_namespace(new_session(loaded), "team-a")))[0]
         for _ in range(8)]
    b = [(await store.create_session(in_namespace(new_session(loaded), "team-b")))[0]
         for _ in range(4)]
    worker = StepConsumer(settings.model_copy(update={
        "worker_concurrency": 8, "worker_adaptive_concurrency": False}), store)
    await worker.start()  # its first heartbeat reads the quota
    try:
        async def all_done() -> bool:
            done = await store.redis.zcard(store.keys.index_status(0, SessionStatus.COMPLETED))
            return done == len(a) + len(b)
        await wait_for(all_done, timeout_s=60, what="every session to complete")
    finally:
        await worker.stop(grace_s=5)
    assert peak([await span(store, sid) for sid in a]) == 2  # never more than its quota
    assert peak([await span(store, sid) for sid in b]) >= 3  # team-b was not held to it
    for sid in a + b:
        done = Counter(f["type"] for _, f in await store.events(sid))
        assert done["step_completed"] == 1 and done["step_started"] == 1, sid
    assert await store.deferred_steps(0) == 0
