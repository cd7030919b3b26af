"""An in-process worker on a real redis-server: retries, failures, conversations."""

from __future__ import annotations

from collections import Counter

import pytest
from helpers import StepBreakpoints, poll_until, status_doc, wait_for

from strands_durable.models import SessionStatus
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.keys import CONSUMER_GROUP
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

SPEC = """
version: 0
name: flaky
runtime:
  provider: scripted
  failure_policy: {retries: 2, backoff: constant, wait_min: 0, wait_max: 0}
  script:
    rules:
      - {agent: writer, error: "upstream said no"}
agents:
  a: {prompt: "You are a."}
  writer: {prompt: "You write."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "one"}
      - {agent: a, input: "two after {{ last_response }}"}
      - {agent: writer, input: "three"}
"""


async def ended(store: Store, sid: str) -> bool:
    return (await store.get_session(sid)).status != SessionStatus.RUNNING


async def test_failed_step_is_retried_then_fails_the_session_naming_it(
        store: Store, consumer: StepConsumer) -> None:
    sid, _ = await start_session(store, load_spec_text(SPEC, "flaky.yaml"))
    await wait_for(lambda: ended(store, sid), what="session to end")
    status = await status_doc(store, sid)
    assert status["status"] == "failed"
    assert "step step:2 (agent writer) failed on attempt 3" in status["error"]
    assert "upstream said no" in status["error"]
    events = [f for _, f in await store.events(sid)]
    kinds = Counter((f["type"], f["step"]) for f in events)
    assert kinds[("step_failed", "step:2")] == 3
    assert kinds[("step_retried", "step:2")] == 2
    # The committed steps before it were not run again.
    assert kinds[("step_completed", "step:0")] == kinds[("step_completed", "step:1")] == 1
    assert kinds[("step_started", "step:0")] == 1
    assert [h["index"] for h in status["pattern_state"]["step_history"]] == [0, 1]


async def test_conversation_per_agent_is_committed_with_each_step(
        store: Store, consumer: StepConsumer) -> None:
    spec = SPEC.replace('- {agent: writer, error: "upstream said no"}', "- {reply: ok}")
    sid, _ = await start_session(store, load_spec_text(spec, "ok.yaml"))
    await wait_for(lambda: ended(store, sid), what="session to end")
    assert (await store.get_session(sid)).status == SessionStatus.COMPLETED
    a_turns = await store.conversation(sid, "a", 100)
    assert [m["role"] for m in a_turns] == ["user", "assistant"] * 2
    assert a_turns[2]["content"][0]["text"] == "two after ok"
    assert len(await store.conversation(sid, "writer", 100)) == 2
    usage = (await store.get_session(sid)).token_usage
    assert set(usage.by_agent) == {"a", "writer"}
    assert usage.total_input_tokens == 1 + 3 + 1  # words of each step's input


async def test_template_error_at_run_time_fails_without_retry(
        store: Store, consumer: StepConsumer) -> None:
    # A computed index (a literal one is refused when the spec is loaded).
    spec = SPEC.replace('"three"', '"three {{ steps[3 + 4].response }}"').replace(
        '- {agent: writer, error: "upstream said no"}', "- {reply: ok}")
    sid, _ = await start_session(store, load_spec_text(spec, "bad-index.yaml"))
    await wait_for(lambda: ended(store, sid), what="session to end")
    record = await store.get_session(sid)
    assert record.status == SessionStatus.FAILED
    assert "pattern.config.steps[2].input" in (record.error or "")
    types = [f["type"] for _, f in await store.events(sid)]
    assert "step_retried" not in types


async def test_dead_consumers_entries_are_taken_over_once_each(
        settings: DurableSettings, store: Store) -> None:
    """Entries a crashed worker held are re-claimed by a busy, small worker without
    idling out again while they wait for a slot (which would inflate deliveries)."""
    spec = SPEC.replace('- {agent: writer, error: "upstream said no"}', "- {reply: ok}")
    # Steps that take time keep the workers busy while re-claimed entries would wait for a
    # slot (what the test is about); nothing waits on that time itself.
    spec = spec.replace("provider: scripted", "provider: scripted\n  script: {delay_s: 0.3}")
    spec = spec.replace("  script:\n    rules:\n      - {reply: ok}\n", "")
    sids = [(await start_session(store, load_spec_text(spec, "ok.yaml")))[0] for _ in range(6)]
    # A worker that died right after taking every first step.
    await store.redis.xreadgroup("workers", "ghost", {store.keys.stream(0): ">"}, count=10)
    # Two small workers: an entry re-claimed needlessly by the other one would pass
    # max_deliveries and be dead-lettered.
    small = settings.model_copy(update={"worker_concurrency": 1, "claim_idle_ms": 500,
                                      "read_block_ms": 1000, "max_deliveries": 2})
    consumers = [StepConsumer(small, store), StepConsumer(small, store)]
    for consumer in consumers:
        await consumer.start()
    try:
        for sid in sids:
            await wait_for(lambda s=sid: ended(store, s), timeout_s=60, what=f"{sid} to end")
    finally:
        for consumer in consumers:
            await consumer.stop(grace_s=0)
    for sid in sids:
        record = await store.get_session(sid)
        assert record.status == SessionStatus.COMPLETED, record.error
        reclaims = [f for _, f in await store.events(sid) if f["type"] == "step_reclaimed"]
        assert [f["step"] for f in reclaims] == ["step:0"], reclaims


async def group_consumers(store: Store) -> set[str]:
    infos = await store.redis.xinfo_consumers(store.keys.stream(0), CONSUMER_GROUP)
    return {i["name"].decode() if isinstance(i["name"], bytes) else i["name"] for i in infos}


async def test_a_stopped_worker_leaves_the_group_unless_it_still_holds_entries(
        settings: DurableSettings, store: Store) -> None:
    worker = StepConsumer(settings, store)
    await worker.start()
    spec = SPEC.replace('- {agent: writer, error: "upstream said no"}', "- {reply: ok}")
    sid, _ = await start_session(store, load_spec_text(spec, "ok.yaml"))
    await wait_for(lambda: ended(store, sid), what="session to end")
    assert worker.name in await group_consumers(store)
    await worker.stop(grace_s=0)
    assert worker.name not in await group_consumers(store)

    # A consumer holding an undelivered step is never dropped: that would lose the step.
    await start_session(store, load_spec_text(spec, "ok.yaml"))
    await store.redis.xreadgroup(CONSUMER_GROUP, "holder", {store.keys.stream(0): ">"},
                                 count=1)
    assert await store.retire_consumer("holder") == 0
    assert "holder" in await group_consumers(store)


async def test_a_step_at_a_breakpoint_keeps_its_lease_until_cleared(
        settings: DurableSettings, store: Store, breakpoints: StepBreakpoints) -> None:
    """The tests' breakpoints (worker/faults.py) stop a step before its agent call with
    its lease still renewed: another live worker never takes it over meanwhile."""
    spec = SPEC.replace('- {agent: writer, error: "upstream said no"}', "- {reply: ok}")
    breakpoints.set("flaky", "step:1")
    workers = [StepConsumer(settings, store), StepConsumer(settings, store)]
    for worker in workers:
        await worker.start()
    try:
        sid, _ = await start_session(store, load_spec_text(spec, "ok.yaml"))
        (hit,) = await breakpoints.wait("flaky", "step:1")
        assert (hit.session, hit.step, hit.reclaimed) == (sid, "step:1", False)
        assert hit.worker in {w.name for w in workers}

        async def reclaimed() -> bool:
            return any(f["type"] == "step_reclaimed" for _, f in await store.events(sid))

        # Held for three times claim_idle_ms: an unrenewed lease would have idled out.
        assert await poll_until(reclaimed, timeout_s=3 * settings.claim_idle_ms / 1000) is None
        assert (await store.get_session(sid)).steps_committed == 1
        breakpoints.clear("flaky", "step:1")
        await wait_for(lambda: ended(store, sid), what="session to end")
    finally:
        for worker in workers:
            await worker.stop(grace_s=0)
    assert (await store.get_session(sid)).status == SessionStatus.COMPLETED
    assert len(breakpoints.hits("flaky", "step:1")) == 1
    assert not await reclaimed()


async def test_an_entry_that_is_no_step_job_is_parked_raw_and_leaves_the_stream(
        store: Store, consumer: StepConsumer) -> None:
    keys = store.keys
    entry = await store.redis.xadd(keys.stream(0), {"junk": "1", "error": "forged"})

    async def parked() -> list[tuple[str, dict[str, str]]] | None:
        return await store.redis.xrange(keys.dead(0)) or None

    ((_, fields),) = await wait_for(parked, what="the junk entry on the dead-letter stream")
    assert fields["junk"] == "1" and fields["entry"] == entry
    assert fields["error"].startswith("not a step job")  # the entry's own 'error' is not kept
    assert await store.redis.xlen(keys.stream(0)) == 0


async def test_a_worker_that_lost_the_entry_parks_nothing(store: Store) -> None:
    keys = store.keys
    entry = await store.redis.xadd(keys.stream(0), {"junk": "1"})
    await store.redis.xreadgroup(CONSUMER_GROUP, "owner", {keys.stream(0): ">"}, count=1)
    assert not await store.dead_letter_raw(0, entry, {"junk": "1"}, "not a step job", "zombie")
    assert await store.redis.xlen(keys.dead(0)) == 0
    assert await store.redis.xlen(keys.stream(0)) == 1
    assert await store.dead_letter_raw(0, entry, {"junk": "1"}, "not a step job", "owner")
    assert await store.redis.xlen(keys.dead(0)) == 1
    assert await store.redis.xlen(keys.stream(0)) == 0
