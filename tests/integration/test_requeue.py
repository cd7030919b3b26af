"""`requeue` on a real redis-server with an in-process worker: failed and dead-lettered
steps go back on the stream once the cause is fixed, atomically; a dry run changes
nothing; every bad request is refused with a clear error and nothing written."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from helpers import StepBreakpoints, status_doc, wait_for
from helpers.attack import moves_by_itself
from helpers.fake_ollama import FakeOllama, fake_ollama

from strands_durable.errors import DurableError, InvalidTransition, SessionNotFound
from strands_durable.models import Event, SessionStatus, StepJob
from strands_durable.sessions.requeue import NothingToRequeue, requeue
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.connect import open_store
from strands_durable.store.keys import CONSUMER_GROUP
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

# The writer runs on an Ollama whose model is not pulled yet: its step fails for good
# (404, not retried), until someone pulls the model.
SPEC = """
version: 0
name: report
runtime:
  provider: scripted
  host: HOST
  failure_policy: {retries: 0}
agents:
  researcher: {prompt: "You research."}
  writer: {prompt: "You write.", provider: ollama, model_id: llama3}
pattern:
  type: chain
  config:
    steps:
      - {agent: researcher, input: "facts about {{ topic }}"}
      - {agent: researcher, input: "more on {{ last_response }}"}
      - {agent: writer, input: "write up {{ steps[1].response }}"}
inputs:
  values: {topic: tides}
"""

WORKFLOW = """
version: 0
name: two-writers
runtime:
  provider: scripted
  host: HOST
  failure_policy: {retries: 0}
agents:
  a: {prompt: "You gather."}
  writer: {prompt: "You write.", provider: ollama, model_id: llama3}
pattern:
  type: workflow
  config:
    tasks:
      - {id: left, agent: writer, input: "left side"}
      - {id: right, agent: writer, input: "right side"}
      - {id: join, agent: a, deps: [left, right], input: "join {{ tasks.left.response }}"}
"""


@pytest.fixture
def ollama(allow_provider_host: Callable[[str, str], None]) -> Iterator[FakeOllama]:
    with fake_ollama() as server:
        allow_provider_host("ollama", server.url)
        yield server


async def status_is(store: Store, sid: str, status: SessionStatus) -> bool:
    return (await store.get_session(sid)).status == status


async def snapshot(store: Store) -> dict[str, object]:
    """Everything under the test's prefix, by key: equal snapshots, nothing written."""
    found: dict[str, object] = {}
    moves = moves_by_itself(store)
    async for key in store.redis.scan_iter(f"{store.keys.prefix}*"):
        if ":lock:" in key or moves(key):  # operator locks' bookkeeping, or moving by itself
            continue
        kind = await store.redis.type(key)
        if kind == "hash":
            found[key] = await store.redis.hgetall(key)
        elif kind == "list":
            found[key] = await store.redis.lrange(key, 0, -1)
        elif kind == "stream":
            found[key] = await store.redis.xrange(key)
        elif kind == "zset":
            found[key] = await store.redis.zrange(key, 0, -1, withscores=True)
        elif kind == "string":
            found[key] = await store.redis.get(key)
    return found


async def failed_session(store: Store, ollama: FakeOllama, spec: str = SPEC) -> str:
    sid, _ = await start_session(store, load_spec_text(spec.replace("HOST", ollama.url),
                                                       "report.yaml"))
    await wait_for(lambda: status_is(store, sid, SessionStatus.FAILED), what="the failure")
    return sid


async def test_failed_step_requeued_after_the_model_is_pulled_completes(
        store: Store, consumer: StepConsumer, ollama: FakeOllama) -> None:
    sid = await failed_session(store, ollama)
    record = await store.get_session(sid)
    assert "step step:2 (agent writer) failed on attempt 1" in (record.error or "")
    assert 'model "llama3" not found' in (record.error or "")

    before = await snapshot(store)
    plan = await requeue(store, sid, dry_run=True)
    assert [(p.step, p.agent, p.failed_attempt) for p in plan.requeued] == [
        ("step:2", "writer", 1)]
    assert plan.statuses == {sid: "running"} and plan.dry_run
    assert await snapshot(store) == before, "a dry run wrote something"

    ollama.pull("llama3")
    report = await requeue(store, sid)
    assert report.statuses == {sid: "running"} and not report.dry_run
    await wait_for(lambda: status_is(store, sid, SessionStatus.COMPLETED), what="completion")

    events = [f for _, f in await store.events(sid)]
    requeued = [f for f in events if f["type"] == "step_requeued"]
    assert [(f["step"], f["attempt"], f["worker"]) for f in requeued] == [
        ("step:2", "1", "operator")]
    assert "failed on attempt 1" in requeued[0]["detail"]
    started = Counter(f["step"] for f in events if f["type"] == "step_started")
    assert started == {"step:0": 1, "step:1": 1, "step:2": 2}  # nothing committed re-ran
    history = (await status_doc(store, sid))["pattern_state"]["step_history"]
    assert history[2]["response"].startswith("ollama: write up")
    assert await store.failed_jobs(sid) == {}
    assert (await store.get_session(sid)).error is None


async def test_dead_lettered_step_requeued_completes_and_leaves_no_dead_letter(
        redis_server, prefix: str, ollama: FakeOllama) -> None:
    # A worker took the step and died (it read the entry and never acked it); the
    # fleet's worker re-claims it, finds it delivered too often and dead-letters it.
    settings = DurableSettings(redis_url=redis_server.url, key_prefix=prefix,
                               claim_idle_ms=300, max_deliveries=1, read_block_ms=100,
                               timer_poll_ms=50, heartbeat_s=0.5)
    store = open_store(settings)
    await store.prepare()
    ollama.pull("llama3")
    sid, _ = await start_session(store, load_spec_text(SPEC.replace("HOST", ollama.url),
                                                       "report.yaml"))
    taken = await store.redis.xreadgroup(CONSUMER_GROUP, "crashed-worker",
                                         {store.keys.stream(0): ">"}, count=1)
    assert taken and len(taken[0][1]) == 1
    consumer = StepConsumer(settings, store)
    await consumer.start()
    try:
        await wait_for(lambda: status_is(store, sid, SessionStatus.FAILED), what="dead letter")
        assert await store.redis.xlen(store.keys.dead(0)) == 1
        error = (await store.get_session(sid)).error or ""
        assert "step step:0" in error and "delivered 2 times" in error

        before = await snapshot(store)
        plan = await requeue(store, None, dead=True, dry_run=True)
        assert [(p.session_id, p.step) for p in plan.requeued] == [(sid, "step:0")]
        assert len(plan.requeued[0].dead_letters) == 1
        assert await snapshot(store) == before, "a dry run wrote something"

        report = await requeue(store, None, dead=True)
        assert [(p.session_id, p.step) for p in report.requeued] == [(sid, "step:0")]
        await wait_for(lambda: status_is(store, sid, SessionStatus.COMPLETED),
                       what="completion")
        assert await store.redis.xlen(store.keys.dead(0)) == 0
        kinds = [f["type"] for _, f in await store.events(sid)]
        assert kinds.index("step_dead_lettered") < kinds.index("step_requeued")
        assert kinds.count("session_resumed") == 1
        empty = await requeue(store, None, dead=True)
        assert empty.requeued == () and empty.skipped == ()
    finally:
        await consumer.stop(grace_s=0)
        await store.redis.aclose()


async def test_one_step_of_two_failed_ones(store: Store, consumer: StepConsumer,
                                           ollama: FakeOllama,
                                           breakpoints: StepBreakpoints) -> None:
    # Both writers start before either fails (a failed session holds steps not yet
    # started), so both fail for good.
    for task in ("task:left", "task:right"):
        breakpoints.set("two-writers", task)
    sid, _ = await start_session(store, load_spec_text(WORKFLOW.replace("HOST", ollama.url),
                                                       "report.yaml"))
    for task in ("task:left", "task:right"):
        await breakpoints.wait("two-writers", task)
    for task in ("task:left", "task:right"):
        breakpoints.clear("two-writers", task)
    await wait_for(lambda: _failed_count(store, sid, 2), what="both writers to fail")
    assert (await store.get_session(sid)).status == SessionStatus.FAILED
    ollama.pull("llama3")
    await requeue(store, sid, step="task:left")
    await wait_for(lambda: _committed(store, sid, "task:left"), what="task:left")
    record = await store.get_session(sid)
    # The other failed step waits for its own requeue; the join waits for it.
    assert record.status == SessionStatus.RUNNING
    assert list(await store.failed_jobs(sid)) == ["task:right"]
    with pytest.raises(NothingToRequeue, match=r"step 'task:left' is not failed or "
                                               r"dead-lettered \(.*task:right\)"):
        await requeue(store, sid, step="task:left")
    await requeue(store, sid, step="task:right")
    await wait_for(lambda: status_is(store, sid, SessionStatus.COMPLETED), what="completion")


async def _failed_count(store: Store, sid: str, n: int) -> bool:
    return len(await store.failed_jobs(sid)) >= n


async def _committed(store: Store, sid: str, step: str) -> bool:
    return bool(await store.committed_steps(sid, [step]))


async def test_bad_requests_are_refused_and_write_nothing(
        store: Store, consumer: StepConsumer, ollama: FakeOllama,
        breakpoints: StepBreakpoints) -> None:
    sid = await failed_session(store, ollama)
    before = await snapshot(store)
    unknown = "00000000-0000-4000-8000-000000000000"
    with pytest.raises(SessionNotFound, match=f"session '{unknown}' not found"):
        await requeue(store, unknown)
    with pytest.raises(NothingToRequeue, match=r"step 'step:9' is not failed or "
                                               r"dead-lettered \(failed or dead-lettered "
                                               r"steps: step:2\)"):
        await requeue(store, sid, step="step:9")
    with pytest.raises(NothingToRequeue, match="no dead-lettered step"):
        await requeue(store, sid, dead=True)
    with pytest.raises(DurableError, match="name a session, or requeue every"):
        await requeue(store, None)
    with pytest.raises(DurableError, match="a step needs a session id"):
        await requeue(store, None, dead=True, step="step:2")
    assert await snapshot(store) == before

    ollama.pull("llama3")
    await requeue(store, sid)
    await wait_for(lambda: status_is(store, sid, SessionStatus.COMPLETED), what="completion")
    with pytest.raises(InvalidTransition, match="cannot requeue a session that is completed"):
        await requeue(store, sid)
    breakpoints.set("report", "step:0")  # this session stays running
    running, _ = await start_session(store, load_spec_text(SPEC.replace("HOST", ollama.url),
                                                           "report.yaml"))
    with pytest.raises(NothingToRequeue, match="has no failed or dead-lettered step to "
                                               "requeue \\(it is running\\)"):
        await requeue(store, running)


async def test_the_script_refuses_a_stale_read(store: Store, ollama: FakeOllama,
                                               consumer: StepConsumer) -> None:
    """requeue.lua writes only if the failed job is still the one the caller read."""
    sid = await failed_session(store, ollama)
    before = await snapshot(store)
    job = json.loads((await store.failed_jobs(sid))["step:2"])
    stale = StepJob(**{**job, "attempt": 7}).to_json()
    verdict, step = await store.requeue_steps(
        sid, [("step:2", stale, stale)], [], events=[Event("step_requeued", step="step:2")],
        resumed=[], now_iso="t", now_ms=1)
    assert (verdict, step) == ("changed", "step:2")
    assert await snapshot(store) == before


async def test_sweep_drops_dead_letters_that_are_resolved(store: Store) -> None:
    """A dead letter whose session was deleted is dropped; a raw one is kept."""
    dead = store.keys.dead(0)
    gone = "00000000-0000-4000-8000-000000000000"
    await store.redis.xadd(dead, {"sid": gone, "step": "step:0", "job": "{}",
                                  "deliveries": "6", "error": "kept dying"})
    await store.redis.xadd(dead, {"junk": "1", "entry": "1-1", "error": "not a step job: x"})
    plan = await requeue(store, None, dead=True, dry_run=True)
    assert [(s.session_id, s.reason, s.dropped) for s in plan.skipped] == [
        (gone, "session no longer exists", True),
        ("", "not a step job; left for inspection", False)]
    assert await store.redis.xlen(dead) == 2
    await requeue(store, None, dead=True)
    left = await store.dead_letters(0)
    assert [f.get("junk") for _, f in left] == ["1"]
