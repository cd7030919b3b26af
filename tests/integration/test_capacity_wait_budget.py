"""Whether a capacity wait counts toward budgets.max_duration_s (runtime.capacity.
wait_counts_toward_duration), on a real redis-server: by default it does (wall-clock
time, as strands-cli's budget); with `false` the wait is taken off the session's clock
with its capacity_granted event, once however many steps waited at once, never twice
with a pause, and only by the consumer that holds the step. The last test runs both
kinds of session on a real `arq` worker behind a held lease past a 15 s budget: the one whose wait
counts pauses at its first commit, the other completes."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from helpers import claimed_job, wait_for

from bench.limited_llm import limited_llm
from strands_durable.models import Event, EventType, SessionStatus, now_iso
from strands_durable.provider_policy import CapacityPolicy
from strands_durable.sessions.control import pause, resume
from strands_durable.sessions.start import start_session
from strands_durable.spec.loader import load_spec_data, load_spec_text
from strands_durable.store.capacity import ProviderKey
from strands_durable.store.store import Store
from strands_durable.worker.capacity import CapacityGate

pytestmark = pytest.mark.integration


async def clock(store: Store, sid: str) -> int:
    return int(await store.redis.hget(store.keys.meta(sid), "started_ms") or 0)


def granted() -> list[Event]:
    return [Event(EventType.CAPACITY_GRANTED, step="step:0", at=now_iso(), detail="k")]


def scripted_spec() -> dict[str, Any]:
    return {"version": 0, "name": "j", "runtime": {"provider": "scripted"},
            "agents": {"a": {"prompt": "A."}},
            "pattern": {"type": "chain", "config": {"steps": [{"agent": "a", "input": "x"}]}}}


async def test_waits_at_once_come_off_the_clock_once_and_only_for_the_holder(
        store: Store) -> None:
    sid, _ = await start_session(store, load_spec_data(scripted_spec()))
    job, entry_id = await claimed_job(store, sid, "owner")
    started = await clock(store, sid)
    t0 = started + 10_000

    assert not await store.journal(job, entry_id, "zombie", "", "", granted(),
                                   (t0, t0 + 5_000))
    assert await clock(store, sid) == started  # a consumer without the step changes nothing

    assert await store.journal(job, entry_id, "owner", "", "", granted())
    assert await clock(store, sid) == started  # a wait that counts leaves the clock alone

    version = (await store.get_session(sid)).version
    assert await store.journal(job, entry_id, "owner", "", "", granted(), (t0, t0 + 1_000))
    assert await clock(store, sid) == started + 1_000
    # A plan made on the old clock is stale: the step's commit plans again.
    assert (await store.get_session(sid)).version == version + 1
    # A second step waited from t0 + 200 to t0 + 1,500: only the 500 ms beyond the first.
    assert await store.journal(job, entry_id, "owner", "", "", granted(),
                               (t0 + 200, t0 + 1_500))
    assert await clock(store, sid) == started + 1_500
    # One wholly inside what was taken off already: nothing more.
    assert await store.journal(job, entry_id, "owner", "", "", granted(),
                               (t0 + 300, t0 + 1_400))
    assert await clock(store, sid) == started + 1_500


async def test_a_wait_during_a_pause_is_not_taken_off_twice(store: Store) -> None:
    sid, _ = await start_session(store, load_spec_data(scripted_spec()))
    job, entry_id = await claimed_job(store, sid, "owner")
    await pause(store, sid)
    paused = await clock(store, sid)
    now = int(time.time() * 1000)
    # Granted while paused: the paused clock stands still already.
    assert await store.journal(job, entry_id, "owner", "", "", granted(), (now - 5_000, now))
    assert await clock(store, sid) == paused
    await resume(store, sid)
    resumed = await clock(store, sid)
    assert resumed > paused  # the pause came off
    resumed_at = int(await store.redis.hget(store.keys.meta(sid), "capacity_wait_through_ms"))
    # A wait that began before the resume counts from the resume on, not from its start.
    assert await store.journal(job, entry_id, "owner", "", "", granted(),
                               (resumed_at - 60_000, resumed_at + 2_000))
    assert await clock(store, sid) == resumed + 2_000


SPEC = """
version: 0
name: {name}
runtime:
  provider: openai
  model_id: gpt-budget
  host: "{host}"
  budgets: {{max_duration_s: {budget}}}
  capacity: {{wait_counts_toward_duration: {counts}}}
agents: {{a: {{prompt: "You answer."}}}}
pattern:
  type: chain
  config: {{steps: [{{agent: a, input: "one"}}, {{agent: a, input: "two"}}]}}
"""
# Well over what the rest of a step takes on a loaded machine (7 s seen at load 9).
BUDGET_S = 15
LIMITS = json.dumps([{"provider": "openai", "model": "gpt-budget", "in_flight": 1}])


@pytest.mark.timeout(480)
async def test_a_long_wait_pauses_only_the_session_whose_wait_counts(
        fleet_factory: Callable[..., Any], store: Store,
        allow_provider_host: Callable[[str, str], None],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with limited_llm(per_second=1000, at_once=100, delay_s=0.0) as server:
        allow_provider_host("openai", server.url())
        host = server.url("/v1")
        gate = CapacityGate(store, CapacityPolicy(capacity_limits=LIMITS), process="holder")
        held, _ = await gate.acquire(ProviderKey("openai", "gpt-budget", host), 1, 0.0, None)
        fleet = fleet_factory(capacity_limits=LIMITS)
        fleet.start_worker()

        async def worker_up() -> bool:  # its start is not the sessions' time
            return bool(await store.redis.hlen(store.keys.workers()))

        await wait_for(worker_up, timeout_s=180, what="the worker to register")
        sids = {}
        for counts in ("true", "false"):
            text = SPEC.format(name=f"budget-{counts}", host=host, budget=BUDGET_S,
                               counts=counts)
            sids[counts] = (await start_session(store, load_spec_text(text, "b.yaml")))[0]
        begun = time.monotonic()

        async def both_wait() -> bool:
            kinds = [[f["type"] for _, f in await store.events(s)] for s in sids.values()]
            return all("capacity_wait" in k for k in kinds)

        await wait_for(both_wait, timeout_s=60, what="both steps to wait for capacity")

        async def past_budget() -> bool:  # the condition itself: older than the budget
            return time.monotonic() - begun > BUDGET_S + 1

        await wait_for(past_budget, timeout_s=60, what="the sessions to outlive the budget")
        await gate.release(held, None, succeeded=True)

        async def ended(sid: str) -> Any:
            record = await store.get_session(sid)
            return record if record.status != SessionStatus.RUNNING else None

        counted, excluded = [await wait_for(lambda s=s: ended(s), timeout_s=60,
                                            what="the session to end")
                             for s in (sids["true"], sids["false"])]
        assert counted.status == SessionStatus.PAUSED
        assert "budget max_duration_s exceeded" in (counted.paused_reason or "")
        assert excluded.status == SessionStatus.COMPLETED, excluded.paused_reason
        kinds = [f["type"] for _, f in await store.events(sids["false"])]
        assert kinds.index("capacity_granted") < kinds.index("step_completed")
        # The paused session's first step ran and committed (the budget is checked as a
        # step commits); the other session ran both.
        assert server.accepted == 3
