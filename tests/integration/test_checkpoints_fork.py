"""Checkpoints and forks on a real redis-server with an in-process worker: every commit
is a checkpoint; a fork from checkpoint n starts with exactly the original's
pattern_state, results, token usage and conversations at n, runs only what follows,
and leaves the original untouched."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
from helpers import status_doc, wait_for
from helpers.fake_ollama import FakeOllama, fake_ollama

from strands_durable.errors import SessionNotFound
from strands_durable.models import SessionStatus
from strands_durable.sessions.checkpoints import (
    CheckpointNotFound,
    ForkError,
    fork_from_checkpoint,
    get_checkpoint,
    list_checkpoints,
)
from strands_durable.sessions.control import resume
from strands_durable.sessions.requeue import requeue
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

CHAIN = """
version: 0
name: four
runtime: {provider: scripted BUDGETS}
agents:
  a: {prompt: "You are a."}
  b: {prompt: "You are b."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "open {{ topic }}"}
      - {agent: b, input: "second after {{ last_response }}"}
      - {agent: a, input: "third on {{ topic }}"}
      - {agent: b, input: "close {{ topic }} with {{ steps[2].response }}"}
inputs:
  values: {topic: tides}
"""

WORKFLOW = """
version: 0
name: dag
runtime: {provider: scripted}
agents:
  a: {prompt: "You are a."}
pattern:
  type: workflow
  config:
    tasks:
      - {id: left, agent: a, input: "left {{ topic }}"}
      - {id: right, agent: a, input: "right {{ topic }}"}
      - {id: join, agent: a, deps: [left, right],
         input: "join {{ tasks.left.response }} {{ tasks.right.response }}"}
inputs:
  values: {topic: tides}
"""

HITL = """
version: 0
name: approve
runtime: {provider: scripted}
agents:
  a: {prompt: "You draft."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "draft it"}
      - {type: hitl, prompt: "Approve?"}
      - {agent: a, input: "final after {{ hitl_response }}"}
"""


class Worker:
    """An in-process worker the test starts and stops, so a fork can be inspected
    before anything runs it."""

    def __init__(self, settings: DurableSettings, store: Store) -> None:
        self.settings, self.store = settings, store
        self.consumer: StepConsumer | None = None

    async def start(self) -> None:
        self.consumer = StepConsumer(self.settings, self.store)
        await self.consumer.start()

    async def stop(self) -> None:
        if self.consumer is not None:
            await self.consumer.stop(grace_s=0)
            self.consumer = None


@pytest.fixture
async def worker(settings: DurableSettings, store: Store) -> AsyncIterator[Worker]:
    w = Worker(settings, store)
    yield w
    await w.stop()


@pytest.fixture
def ollama(allow_provider_host: Callable[[str, str], None]) -> Iterator[FakeOllama]:
    with fake_ollama() as server:
        allow_provider_host("ollama", server.url)
        yield server


async def ended(store: Store, sid: str) -> bool:
    return (await store.get_session(sid)).status != SessionStatus.RUNNING


async def run_to_end(store: Store, worker: Worker, spec: str) -> str:
    sid, _ = await start_session(store, load_spec_text(spec, "spec.yaml"))
    await worker.start()
    await wait_for(lambda: ended(store, sid), what="the session to end")
    await worker.stop()
    return sid


async def session_keys(store: Store, sid: str) -> dict[str, object]:
    """Everything stored for one session, for before/after comparisons."""
    k = store.keys
    return {
        "meta": await store.redis.hgetall(k.meta(sid)),
        "results": await store.redis.hgetall(k.results(sid)),
        "order": await store.redis.lrange(k.order(sid), 0, -1),
        "events": await store.redis.xrange(k.events(sid)),
        "checkpoints": await store.redis.lrange(k.checkpoints(sid), 0, -1),
        "conversations": {lane: await store.redis.lrange(k.conversation(sid, lane), 0, -1)
                          for lane in await store.redis.smembers(k.conversations(sid))},
    }


async def test_listing_and_one_checkpoint(store: Store, worker: Worker) -> None:
    sid = await run_to_end(store, worker, CHAIN.replace(" BUDGETS", ""))
    listed = [c.model_dump(mode="json") for c in await list_checkpoints(store, sid)]
    assert [(c["n"], c["step"], c["agent"], c["status"]) for c in listed] == [
        (1, "step:0", "a", "running"), (2, "step:1", "b", "running"),
        (3, "step:2", "a", "running"), (4, "step:3", "b", "completed")]
    assert all(c["clean"] and c["type"] == "step" and c["attempt"] == 1 for c in listed)
    usage = (await store.get_session(sid)).token_usage
    assert listed[-1]["tokens_total"] == usage.total_input_tokens + usage.total_output_tokens
    assert [c["resumable"] for c in listed] == [True, True, True, False]

    full = (await status_doc(store, sid))["pattern_state"]
    two = (await get_checkpoint(store, sid, 2)).model_dump(mode="json")
    assert two["pattern_state"] == {"current_step": 2,
                                    "step_history": full["step_history"][:2]}
    assert two["state"] == {"current_step": 2} and two["steps_committed"] == 2
    usage_two = two["token_usage"]
    assert usage_two["total_input_tokens"] + usage_two["total_output_tokens"] == sum(
        h["tokens"] for h in full["step_history"][:2]) == two["tokens_total"]
    assert usage_two["by_agent"] == {h["agent"]: h["tokens"] for h in full["step_history"][:2]}


async def test_fork_reproduces_the_state_at_the_checkpoint_and_runs_the_rest(
        store: Store, worker: Worker) -> None:
    sid = await run_to_end(store, worker, CHAIN.replace(" BUDGETS", ""))
    original_before = await session_keys(store, sid)
    at_two = (await get_checkpoint(store, sid, 2)).model_dump(mode="json")

    fork = await fork_from_checkpoint(store, sid, 2, variables={"topic": "volcanoes"})
    assert fork != sid
    # Before any worker runs it: the original's state at checkpoint 2, exactly.
    doc = await status_doc(store, fork)
    assert doc["status"] == "running"
    assert doc["pattern_state"] == at_two["pattern_state"]
    assert doc["token_usage"] == at_two["token_usage"]
    assert doc["steps_committed"] == 2 and doc["variables"] == {"topic": "volcanoes"}
    assert [c.step for c in await list_checkpoints(store, fork)] == ["step:0", "step:1"]
    for lane in ("a", "b"):  # each conversation cut where it stood at checkpoint 2
        assert await store.conversation(fork, lane, 100) == \
            (await store.conversation(sid, lane, 100))[:2]
    events = [f for _, f in await store.events(fork)]
    assert events[0]["type"] == "session_started"
    assert f"forked from {sid} at checkpoint 2 (step:1)" in events[0]["detail"]
    assert [(f["type"], f["step"]) for f in events[1:]] == [("step_scheduled", "step:2")]

    await worker.start()
    await wait_for(lambda: ended(store, fork), what="the fork to end")
    done = await status_doc(store, fork)
    assert done["status"] == "completed"
    history = done["pattern_state"]["step_history"]
    original = (await status_doc(store, sid))["pattern_state"]["step_history"]
    assert history[:2] == original[:2]
    assert history[2]["response"] == "a: third on volcanoes"
    assert history[3]["response"].startswith("b: close volcanoes with a: third on volcanoes")
    started = Counter(f["step"] for _, f in await store.events(fork)
                      if f["type"] == "step_started")
    assert started == {"step:2": 1, "step:3": 1}  # only what follows checkpoint 2 ran
    # The fork's agent a saw its own history up to checkpoint 2, then its new turns.
    turns = await store.conversation(fork, "a", 100)
    assert len(turns) == 4 and turns[:2] == (await store.conversation(sid, "a", 100))[:2]
    assert await session_keys(store, sid) == original_before, "the original was changed"


async def test_fork_of_a_dag_runs_the_steps_in_flight_at_the_checkpoint(
        store: Store, worker: Worker) -> None:
    sid = await run_to_end(store, worker, WORKFLOW)
    first = (await list_checkpoints(store, sid))[0].step  # left or right, whichever won
    fork = await fork_from_checkpoint(store, sid, 1)
    assert (await store.get_session(fork)).state["in_flight"] == [
        "right" if first == "task:left" else "left"]
    await worker.start()
    await wait_for(lambda: ended(store, fork), what="the fork to end")
    doc = await status_doc(store, fork)
    assert doc["status"] == "completed"
    assert doc["pattern_state"]["completed_tasks"] == ["left", "right", "join"]
    started = [f["step"] for _, f in await store.events(fork) if f["type"] == "step_started"]
    assert first not in started and sorted(started) == sorted(
        {"task:left", "task:right", "task:join"} - {first})
    assert doc["pattern_state"]["task_outputs"] == \
        (await status_doc(store, sid))["pattern_state"]["task_outputs"]


async def test_fork_before_a_human_step_waits_for_its_own_answer(
        store: Store, worker: Worker) -> None:
    sid, _ = await start_session(store, load_spec_text(HITL, "hitl.yaml"))
    await worker.start()
    await wait_for(lambda: _status(store, sid, SessionStatus.PAUSED), what="the HITL pause")
    await resume(store, sid, hitl_response="yes")
    await wait_for(lambda: _status(store, sid, SessionStatus.COMPLETED), what="completion")
    await worker.stop()

    fork = await fork_from_checkpoint(store, sid, 1)
    record = await store.get_session(fork)
    assert record.status == SessionStatus.PAUSED
    assert record.paused_reason == "waiting for human input at step:1: Approve?"
    await worker.start()
    await resume(store, fork, hitl_response="no")
    await wait_for(lambda: _status(store, fork, SessionStatus.COMPLETED), what="completion")
    final = (await status_doc(store, fork))["pattern_state"]["step_history"][-1]
    assert final["response"] == "a: final after no"
    original = (await status_doc(store, sid))["pattern_state"]["step_history"][-1]
    assert original["response"] == "a: final after yes"


async def _status(store: Store, sid: str, status: SessionStatus) -> bool:
    return (await store.get_session(sid)).status == status


async def test_clean_flags_and_a_fork_of_a_failed_session(
        store: Store, worker: Worker, ollama: FakeOllama) -> None:
    spec = CHAIN.replace(" BUDGETS", ", host: HOST, failure_policy: {retries: 0}").replace(
        "HOST", ollama.url).replace('b: {prompt: "You are b."}',
                                    'b: {prompt: "You are b.", provider: ollama, '
                                    'model_id: llama3}')
    sid = await run_to_end(store, worker, spec)
    record = await store.get_session(sid)
    assert record.status == SessionStatus.FAILED and record.steps_committed == 1
    # A fork from the last checkpoint of a failed session runs the failed step anew.
    ollama.pull("llama3")
    fork = await fork_from_checkpoint(store, sid, 1)
    await worker.start()
    await wait_for(lambda: ended(store, fork), what="the fork to end")
    assert (await store.get_session(fork)).status == SessionStatus.COMPLETED
    assert (await store.get_session(sid)).status == SessionStatus.FAILED
    # The original, requeued, is clean up to the failure and not after it.
    await requeue(store, sid)
    await wait_for(lambda: ended(store, sid), what="the original to end")
    flags = [(c.step, c.clean) for c in await list_checkpoints(store, sid)]
    assert flags == [("step:0", True), ("step:1", False), ("step:2", False),
                     ("step:3", False)]
    assert all(c.clean for c in await list_checkpoints(store, fork))


async def test_bad_forks_are_refused_and_create_nothing(store: Store, worker: Worker) -> None:
    spec = CHAIN.replace(" BUDGETS", ", budgets: {max_tokens: 20}")
    sid = await run_to_end(store, worker, spec)
    assert (await store.get_session(sid)).status == SessionStatus.PAUSED  # over budget
    count = await list_checkpoints(store, sid)
    assert len(count) == 3
    sessions_before = {r.session_id for r in await store.list_sessions()}
    with pytest.raises(CheckpointNotFound, match=rf"session {sid}: there is no checkpoint 9 "
                                                 rf"\(checkpoints 1\.\.{len(count)}\)"):
        await fork_from_checkpoint(store, sid, 9)
    with pytest.raises(CheckpointNotFound, match="no checkpoint 0"):
        await get_checkpoint(store, sid, 0)
    unknown = "00000000-0000-4000-8000-000000000000"
    with pytest.raises(SessionNotFound, match=f"session '{unknown}' not found"):
        await fork_from_checkpoint(store, unknown, 1)
    with pytest.raises(SessionNotFound):
        await list_checkpoints(store, unknown)
    with pytest.raises(ForkError, match="budget max_tokens exceeded"):
        await fork_from_checkpoint(store, sid, len(count))
    assert {r.session_id for r in await store.list_sessions()} == sessions_before

    fork = await fork_from_checkpoint(store, sid, len(count),
                                      budget_sets={"max_tokens": 10_000})
    await worker.start()
    await wait_for(lambda: ended(store, fork), what="the fork to end")
    assert (await store.get_session(fork)).status == SessionStatus.COMPLETED
    with pytest.raises(ForkError, match="checkpoint 4 completed the session: nothing "
                                        "follows it"):
        await fork_from_checkpoint(store, fork, 4)
