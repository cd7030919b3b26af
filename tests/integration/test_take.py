"""take.lua on a real Redis: the read and each entry's gate in one call decide what
gate.lua decides for the same entry, and the commit's place in commit order lets the
worker cache its own result."""

from __future__ import annotations

import pytest

from strands_durable.models import SessionStatus, StepJob, now_iso
from strands_durable.store.keys import CONSUMER_GROUP
from strands_durable.store.store import Store
from tests.integration.test_store import commit_request, new_session

pytestmark = pytest.mark.integration


async def take(store: Store, consumer: str = "c1", count: int = 8):
    return await store.take_new(0, consumer, count, now_iso())


async def pending_under(store: Store, entry_id: str) -> str | None:
    rows = await store.redis.xpending_range(store.keys.stream(0), CONSUMER_GROUP,
                                            min=entry_id, max=entry_id, count=1)
    return rows[0]["consumer"] if rows else None


async def test_a_running_session_gets_run_with_what_gate_returns(store: Store) -> None:
    sid, _ = await store.create_session(new_session())
    [entry] = await take(store)
    assert entry.gate is not None and entry.gate.verdict == "run"
    assert entry.gate.fields["version"] == "1" and entry.gate.fields["spec_digest"] == "d"
    assert entry.order_len == 0 and entry.gate.journal == {} and entry.lane == (0, [])
    assert StepJob.from_json(entry.fields["job"]).key == "step:0"
    assert await pending_under(store, entry.entry_id) == "c1"  # the fence holds for commit
    started = [e for e in await store.events(sid) if e[1]["type"] == "step_started"]
    assert len(started) == 1
    assert started[0][1] | {"at": ""} == {"type": "step_started", "step": "step:0",
                                         "attempt": "1", "worker": "c1", "at": "",
                                         "detail": ""}
    assert await take(store) == []  # nothing new: the caller then blocks on XREADGROUP


async def test_commit_after_take_is_fenced_and_tells_its_place(store: Store) -> None:
    sid, _ = await store.create_session(new_session())
    [entry] = await take(store)
    job = StepJob.from_json(entry.fields["job"])
    stale = await store.commit(commit_request(job, entry.entry_id, "c2"))
    assert stale.verdict == "stale"
    following = StepJob(session_id=sid, key="step:1", agent="a", input="next")
    outcome = await store.commit(commit_request(job, entry.entry_id, "c1",
                                                next_jobs=(following,)))
    assert (outcome.verdict, outcome.position) == ("ok", 1)
    assert await store.redis.lrange(store.keys.order(sid), 0, -1) == ["step:0"]
    # The next step comes with the conversation it restores, as the store reads it.
    [entry] = await take(store)
    assert entry.order_len == 1 and entry.lane is not None and entry.lane[0] == 2
    assert await store.conversation(sid, "a", prefetched=entry.lane) \
        == await store.conversation(sid, "a")
    assert [m["role"] for m in await store.conversation(sid, "a")] == ["user", "assistant"]


async def test_paused_session_holds_the_taken_step(store: Store) -> None:
    sid, _ = await store.create_session(new_session())
    await store.redis.hset(store.keys.meta(sid), "status", "paused")
    [entry] = await take(store)
    assert entry.gate is not None and entry.gate.verdict == "held"
    held = await store.redis.lrange(store.keys.held(sid), 0, -1)
    assert [StepJob.from_json(h).key for h in held] == ["step:0"]
    assert await pending_under(store, entry.entry_id) is None  # acked


async def test_committed_and_ended_sessions_are_acked(store: Store) -> None:
    sid, _ = await store.create_session(new_session())
    await store.redis.hset(store.keys.results(sid), "step:0", "{}")
    [entry] = await take(store)
    assert entry.gate is not None and entry.gate.verdict == "committed"
    sid2, _ = await store.create_session(new_session(status=SessionStatus.RUNNING))
    await store.redis.hset(store.keys.meta(sid2), "status", "cancelled")
    [entry2] = await take(store)
    assert entry2.gate is not None and entry2.gate.verdict == "terminal"
    assert await pending_under(store, entry2.entry_id) is None


async def test_what_take_cannot_gate_is_left_pending_for_gate_lua(store: Store) -> None:
    stream = store.keys.stream(0)  # the store made its group at start
    bad = await store.redis.xadd(stream, {"job": "not json"})
    gone = StepJob(session_id="00000000-0000-4000-8000-000000000000", key="step:0",
                   agent="a", input="x")
    missing = await store.redis.xadd(stream, gone.to_fields())
    entries = await take(store)
    assert [(e.entry_id, e.gate) for e in entries] == [(bad, None), (missing, None)]
    assert await pending_under(store, bad) == "c1"
    assert await pending_under(store, missing) == "c1"


async def test_a_take_brings_the_newest_results_only_to_whom_did_not_commit_them(
        store: Store) -> None:
    sid, _ = await store.create_session(new_session())
    [entry] = await take(store, "c1")
    assert entry.tail == []  # nothing committed yet
    job = StepJob.from_json(entry.fields["job"])
    following = StepJob(session_id=sid, key="step:1", agent="a", input="next")
    assert (await store.commit(commit_request(job, entry.entry_id, "c1",
                                              next_jobs=(following,)))).verdict == "ok"
    # c2 did not commit step:0: its cache lacks it, and the take brings it.
    [entry] = await take(store, "c2")
    stored = await store.redis.hget(store.keys.results(sid), "step:0")
    assert entry.order_len == 1 and entry.tail == [stored]
    job = StepJob.from_json(entry.fields["job"])
    last = StepJob(session_id=sid, key="step:2", agent="a", input="last")
    version = int(entry.gate.fields["version"]) if entry.gate else 0
    assert (await store.commit(commit_request(job, entry.entry_id, "c2", version,
                                              next_jobs=(last,)))).verdict == "ok"
    # c2 committed step:1 itself: its cache holds it, nothing is brought.
    [entry] = await take(store, "c2")
    assert entry.order_len == 2 and entry.tail == []


async def scheduled_after_first(store: Store) -> tuple[str, StepJob]:
    """A session whose step:0 committed two messages on lane `a` and scheduled step:1,
    an agent `b` step on that lane at attempt 2, whose entry waits on the stream."""
    sid, _ = await store.create_session(new_session())
    [entry] = await take(store)
    job = StepJob.from_json(entry.fields["job"])
    following = StepJob(session_id=sid, key="step:1", agent="b", input="next", lane="a",
                        attempt=2)
    outcome = await store.commit(commit_request(job, entry.entry_id, "c1",
                                                next_jobs=(following,)))
    assert outcome.verdict == "ok"
    return sid, following


async def test_a_step_entry_carries_what_a_take_gates_it_by(store: Store) -> None:
    # Beside the job: its step, attempt, lane and kind, so that no script decodes it.
    sid, following = await scheduled_after_first(store)
    stream = store.keys.stream(0)
    [(entry_id, fields)] = await store.redis.xrange(stream)
    assert fields == {"sid": sid, "step": "step:1", "attempt": "2", "lane": "a",
                      "kind": "agent", "job": following.to_json()}
    # The take reads those, not the job: a job that names no lane (agent b's own) does
    # not change which conversation comes with the step.
    await store.redis.xdel(stream, entry_id)
    laneless = StepJob(**{**vars(following), "lane": ""})
    await store.redis.xadd(stream, {**fields, "job": laneless.to_json()})
    [taken] = await take(store)
    assert taken.gate is not None and taken.gate.verdict == "run"
    assert taken.lane is not None and taken.lane[0] == 2  # lane a's, not agent b's
    started = [f for _, f in await store.events(sid) if f["type"] == "step_started"]
    assert (started[-1]["step"], started[-1]["attempt"]) == ("step:1", "2")


async def test_an_entry_written_before_it_carried_them_is_gated_from_its_job(
        store: Store) -> None:
    # An entry an older version left on the stream: sid, step, attempt and job only.
    sid, following = await scheduled_after_first(store)
    stream = store.keys.stream(0)
    [(entry_id, _)] = await store.redis.xrange(stream)
    await store.redis.xdel(stream, entry_id)
    await store.redis.xadd(stream, {"sid": sid, "step": "step:1", "attempt": "2",
                                    "job": following.to_json()})
    [taken] = await take(store)
    assert taken.gate is not None and taken.gate.verdict == "run"
    assert taken.lane is not None and taken.lane[0] == 2
    started = [f for _, f in await store.events(sid) if f["type"] == "step_started"]
    assert (started[-1]["step"], started[-1]["attempt"]) == ("step:1", "2")


async def test_token_counters_add_up_over_commits_per_agent_too(store: Store) -> None:
    # Written with the meta hash's one HSET as HINCRBY would leave them.
    sid, following = await scheduled_after_first(store)  # step:0 by a: 3 in, 4 out
    [taken] = await take(store)
    by_a = StepJob(**{**vars(following), "agent": "a"})  # a's count grows again
    outcome = await store.commit(commit_request(by_a, taken.entry_id, "c1", version=2,
                                                tokens=(10, 20)))
    assert outcome.verdict == "ok"
    usage = (await store.get_session(sid)).token_usage
    assert (usage.total_input_tokens, usage.total_output_tokens) == (13, 24)
    assert usage.by_agent == {"a": 37}


async def test_a_job_a_paused_session_cannot_decode_is_not_held(store: Store) -> None:
    # Held, a job is decoded when released: a broken one (its entry's fields in order)
    # is left pending, ungated, for the worker to park; nothing a resume could not
    # release is held.
    sid, _ = await scheduled_after_first(store)
    stream = store.keys.stream(0)
    [(entry_id, fields)] = await store.redis.xrange(stream)
    await store.redis.xdel(stream, entry_id)
    await store.redis.hset(store.keys.meta(sid), "status", "paused")
    broken = await store.redis.xadd(stream, {**fields, "job": '{"session_id": '})
    [taken] = await take(store)
    assert (taken.entry_id, taken.gate) == (broken, None)
    assert await pending_under(store, broken) == "c1"
    assert await store.redis.llen(store.keys.held(sid)) == 0
