"""The store's atomic operations on a real redis-server: create, gate, the fenced
commit, failures, retries through timers, dead letters, leases, delete."""

from __future__ import annotations

import json

import pytest

from strands_durable.models import Event, SessionStatus, StepJob, StepResult, now_iso, now_ms
from strands_durable.store.keys import CONSUMER_GROUP
from strands_durable.store.store import CommitRequest, NewSession, Store

pytestmark = pytest.mark.integration


def new_session(idempotency_key: str | None = None, status=SessionStatus.RUNNING) -> NewSession:
    job = StepJob(session_id="", key="step:0", agent="a", input="hello")
    return NewSession(
        workflow_name="wf", pattern_type="chain", spec_hash="h" * 64,
        spec_json="{}", spec_digest="d", source="test", variables={"topic": "t"},
        state={"current_step": 0}, jobs=[job], status=status, created_at=now_iso(),
        created_ms=now_ms(), idempotency_key=idempotency_key,
    )


async def deliver(store: Store, consumer: str = "c1") -> tuple[str, StepJob]:
    reply = await store.redis.xreadgroup(CONSUMER_GROUP, consumer, {store.keys.stream(0): ">"},
                                         count=1, block=1000)
    entry_id, fields = reply[0][1][0]
    return entry_id, StepJob.from_json(fields["job"])


def commit_request(job: StepJob, entry_id: str, consumer: str, version: int = 1,
                   next_jobs: tuple[StepJob, ...] = (), status=SessionStatus.RUNNING,
                   tokens: tuple[int, int] = (3, 4)) -> CommitRequest:
    result = StepResult(key=job.key, agent=job.agent, response="r:" + job.key,
                        input_tokens=tokens[0], output_tokens=tokens[1], worker=consumer)
    return CommitRequest(
        job=job, entry_id=entry_id, consumer=consumer, expected_version=version,
        result=result, state={"current_step": 1}, status=status,
        new_messages=[{"role": "user", "content": [{"text": "hello"}]},
                      {"role": "assistant", "content": [{"text": "r"}]}],
        next_jobs=next_jobs, events=[Event("step_completed", step=job.key, at=now_iso())],
        now_iso=now_iso(), now_ms=now_ms())


async def started(store: Store, job: StepJob, entry_id: str, consumer: str = "c1"):
    return await store.gate(job, entry_id, consumer, 0, Event("step_started", step=job.key))


async def test_create_enqueues_first_step_and_indexes(store: Store) -> None:
    sid, created = await store.create_session(new_session())
    assert created
    record = await store.get_session(sid)
    assert record.status == SessionStatus.RUNNING and record.version == 1
    assert record.variables == {"topic": "t"}
    assert await store.redis.xlen(store.keys.stream(0)) == 1
    assert [r.session_id for r in await store.list_sessions(SessionStatus.RUNNING)] == [sid]
    types = [f["type"] for _, f in await store.events(sid)]
    assert types == ["session_started", "step_scheduled"]


async def test_idempotency_key_returns_same_session(store: Store) -> None:
    first, created1 = await store.create_session(new_session("key-1"))
    second, created2 = await store.create_session(new_session("key-1"))
    assert (created1, created2) == (True, False) and first == second
    assert await store.redis.xlen(store.keys.stream(0)) == 1


async def test_commit_writes_everything_once(store: Store) -> None:
    sid, _ = await store.create_session(new_session())
    entry_id, job = await deliver(store)
    gate = await started(store, job, entry_id)
    assert gate.verdict == "run" and gate.fields["version"] == "1"
    nxt = StepJob(session_id=sid, key="step:1", agent="b", input="next")
    outcome = await store.commit(commit_request(job, entry_id, "c1", next_jobs=(nxt,)))
    assert outcome.verdict == "ok" and outcome.version == 2
    record = await store.get_session(sid)
    assert record.state == {"current_step": 1}
    assert record.token_usage.total_input_tokens == 3
    assert record.token_usage.by_agent == {"a": 7}
    assert [r.key for r in await store.results(sid)] == ["step:0"]
    assert len(await store.conversation(sid, "a", 10)) == 2
    assert len(await store.checkpoints(sid)) == 1
    # The entry is acknowledged and removed; the next step is on the stream.
    pending = await store.redis.xpending(store.keys.stream(0), CONSUMER_GROUP)
    assert pending["pending"] == 0
    _entry2, job2 = await deliver(store)
    assert job2.key == "step:1"


async def test_stale_worker_commit_is_rejected_and_changes_nothing(store: Store) -> None:
    sid, _ = await store.create_session(new_session())
    entry_id, job = await deliver(store, "old")
    await started(store, job, entry_id, "old")
    # Another worker re-claims the entry (the old one looked dead).
    await store.redis.xclaim(store.keys.stream(0), CONSUMER_GROUP, "new", 0, [entry_id])
    stale = await store.commit(commit_request(job, entry_id, "old"))
    assert stale.verdict == "stale"
    record = await store.get_session(sid)
    assert record.version == 1 and record.steps_committed == 0
    assert await store.results(sid) == []
    fresh = await store.commit(commit_request(job, entry_id, "new"))
    assert fresh.verdict == "ok"
    assert (await store.get_session(sid)).token_usage.total_output_tokens == 4


async def test_second_commit_of_a_step_is_a_duplicate(store: Store) -> None:
    sid, _ = await store.create_session(new_session())
    entry_id, job = await deliver(store)
    assert (await store.commit(commit_request(job, entry_id, "c1"))).verdict == "ok"
    # The same step delivered again (e.g. requeued by hand) is refused at the gate and
    # at the commit.
    again = await store.redis.xadd(store.keys.stream(0), job.to_fields())
    entry2, _ = await deliver(store)
    assert entry2 == again
    assert (await started(store, job, entry2)).verdict == "committed"
    record = await store.get_session(sid)
    assert record.steps_committed == 1 and record.token_usage.total_input_tokens == 3


async def test_version_conflict_is_reported(store: Store) -> None:
    sid, _ = await store.create_session(new_session())
    entry_id, job = await deliver(store)
    outcome = await store.commit(commit_request(job, entry_id, "c1", version=7))
    assert outcome.verdict == "conflict" and outcome.version == 1
    assert (await store.get_session(sid)).steps_committed == 0


async def test_completion_moves_index_and_enqueues_nothing(store: Store) -> None:
    sid, _ = await store.create_session(new_session())
    entry_id, job = await deliver(store)
    nxt = StepJob(session_id=sid, key="step:1", agent="b", input="x")
    req = commit_request(job, entry_id, "c1", next_jobs=(nxt,), status=SessionStatus.COMPLETED)
    assert (await store.commit(req)).status == "completed"
    assert await store.list_sessions(SessionStatus.RUNNING) == []
    assert [r.session_id for r in await store.list_sessions(SessionStatus.COMPLETED)] == [sid]


async def test_paused_session_holds_delivered_steps(store: Store) -> None:
    sid, _ = await store.create_session(new_session())
    await store.redis.hset(store.keys.meta(sid), "status", "paused")
    entry_id, job = await deliver(store)
    assert (await started(store, job, entry_id)).verdict == "held"
    held = await store.redis.lrange(store.keys.held(sid), 0, -1)
    assert [StepJob.from_json(h).key for h in held] == ["step:0"]


async def test_failed_step_retries_through_the_timer_set(store: Store) -> None:
    sid, _ = await store.create_session(new_session())
    entry_id, job = await deliver(store)
    verdict = await store.fail_step(job, entry_id, "c1", retry_at_ms=now_ms() - 1,
                                    error="boom", events=[Event("step_failed", step=job.key)],
                                    now_iso=now_iso(), now_ms=now_ms())
    assert verdict == "ok"
    assert await store.redis.zcard(store.keys.timers(0)) == 1
    assert await store.promote_timers(0, now_ms()) == 1
    assert await store.promote_timers(0, now_ms()) == 0  # promoted once only
    _, retried = await deliver(store)
    assert (retried.key, retried.attempt) == ("step:0", 2)
    assert (await store.get_session(sid)).status == SessionStatus.RUNNING


async def test_failed_step_without_retries_fails_the_session(store: Store) -> None:
    sid, _ = await store.create_session(new_session())
    entry_id, job = await deliver(store)
    await store.fail_step(job, entry_id, "c1", retry_at_ms=None, error="step step:0 broke",
                          events=[], now_iso=now_iso(), now_ms=now_ms())
    record = await store.get_session(sid)
    assert record.status == SessionStatus.FAILED and record.error == "step step:0 broke"
    failed = await store.redis.hgetall(store.keys.failed_jobs(sid))
    assert json.loads(failed["step:0"])["key"] == "step:0"


async def test_dead_letter_parks_entry_and_fails_session(store: Store) -> None:
    sid, _ = await store.create_session(new_session())
    entry_id, job = await deliver(store)
    await store.dead_letter(job, entry_id, "c1", 6, "step step:0 delivered 6 times", [],
                            now_iso(), now_ms())
    dead = await store.redis.xrange(store.keys.dead(0))
    assert len(dead) == 1 and dead[0][1]["step"] == "step:0" and dead[0][1]["sid"] == sid
    assert (await store.get_session(sid)).status == SessionStatus.FAILED
    assert (await store.redis.xpending(store.keys.stream(0), CONSUMER_GROUP))["pending"] == 0


async def test_lease_renewal_only_while_owned(store: Store) -> None:
    await store.create_session(new_session())
    entry_id, _ = await deliver(store, "c1")
    assert await store.renew(0, entry_id, "c1")
    await store.redis.xclaim(store.keys.stream(0), CONSUMER_GROUP, "c2", 0, [entry_id])
    assert not await store.renew(0, entry_id, "c1")
    assert await store.renew(0, entry_id, "c2")


async def test_delete_removes_every_key(store: Store) -> None:
    sid, _ = await store.create_session(new_session("del-key"))
    entry_id, job = await deliver(store)
    await store.commit(commit_request(job, entry_id, "c1"))
    await store.delete_session(sid)
    leftovers = [k async for k in store.redis.scan_iter(f"{store.keys.prefix}:*{sid}*")]
    assert leftovers == []
    assert not await store.redis.exists(store.keys.idempotency(0, "del-key"))
    assert await store.list_sessions() == []
