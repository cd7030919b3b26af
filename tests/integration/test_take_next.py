"""The step path's fewer round trips on a real Redis: a commit that takes and gates the
worker's next entry (commit.lua), and the entries of a blocking read gated in one call
(take.lua with ids). The fence holds: an entry runs only under the consumer it is
pending under, and what a dead worker's commit took is re-claimed like any entry."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from typing import Any

import pytest
from helpers import StepBreakpoints, wait_for

from strands_durable.models import SessionStatus, StepJob, now_iso
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.keys import CONSUMER_GROUP
from strands_durable.store.records import CommitOutcome, CommitRequest, GateOutcome, TakenEntry
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer
from tests.integration.test_store import commit_request, new_session

pytestmark = pytest.mark.integration


async def take(store: Store, consumer: str = "c1", count: int = 8) -> list[TakenEntry]:
    return await store.take_new(0, consumer, count, now_iso())


async def pending_under(store: Store, entry_id: str) -> str | None:
    rows = await store.redis.xpending_range(store.keys.stream(0), CONSUMER_GROUP,
                                            min=entry_id, max=entry_id, count=1)
    return rows[0]["consumer"] if rows else None


async def started_steps(store: Store, sid: str) -> list[tuple[str, str]]:
    return [(f["step"], f["worker"]) for _, f in await store.events(sid)
            if f["type"] == "step_started"]


async def script_calls(store: Store) -> int:
    """Script calls that ran (a first EVALSHA refused NOSCRIPT and loaded it is none)."""
    stats = await store.redis.info("commandstats")
    return sum(int(stats.get(name, {}).get("calls", 0))
               - int(stats.get(name, {}).get("rejected_calls", 0))
               - int(stats.get(name, {}).get("failed_calls", 0))
               for name in ("cmdstat_evalsha", "cmdstat_eval"))


async def first_step(store: Store, consumer: str = "c1") -> tuple[str, TakenEntry, StepJob]:
    """A new session whose first step `consumer` has taken."""
    sid, _ = await store.create_session(new_session())
    [entry] = [e for e in await take(store, consumer) if e.fields["sid"] == sid]
    return sid, entry, StepJob.from_json(entry.fields["job"])


async def commit_taking(store: Store, req: CommitRequest, n: int = 1) -> CommitOutcome:
    """A busy worker's commit: it takes up to `n` new entries in the same call."""
    return await store.commit(req, take_next=n)


async def test_a_commit_takes_and_gates_the_next_step_in_the_same_call(store: Store) -> None:
    sid, entry, job = await first_step(store)
    following = StepJob(session_id=sid, key="step:1", agent="a", input="next")
    calls = await script_calls(store)
    outcome = await commit_taking(store, commit_request(job, entry.entry_id, "c1",
                                                        next_jobs=(following,)))
    assert await script_calls(store) == calls + 1
    assert outcome.verdict == "ok"
    [nxt] = outcome.taken
    assert StepJob.from_json(nxt.fields["job"]).key == "step:1"
    assert nxt.gate is not None and nxt.gate.verdict == "run"
    assert nxt.gate.fields["version"] == "2"  # the state the commit left
    assert await pending_under(store, nxt.entry_id) == "c1"
    assert await started_steps(store, sid) == [("step:0", "c1"), ("step:1", "c1")]
    # It comes with what take.lua brings: commit order and the conversation to restore.
    assert nxt.order_len == 1 and nxt.lane is not None and nxt.lane[0] == 2
    assert await store.conversation(sid, "a", prefetched=nxt.lane) \
        == await store.conversation(sid, "a")
    assert await take(store) == []  # nothing else was new


async def test_a_commit_asked_for_nothing_takes_nothing(store: Store) -> None:
    """A stopping worker's commit (take_next 0) leaves the next entry to the group."""
    sid, entry, job = await first_step(store)
    following = StepJob(session_id=sid, key="step:1", agent="a", input="next")
    outcome = await store.commit(commit_request(job, entry.entry_id, "c1",
                                                next_jobs=(following,)))
    assert outcome.verdict == "ok" and outcome.taken == ()
    assert await started_steps(store, sid) == [("step:0", "c1")]
    [other] = await take(store, "c2")
    assert await pending_under(store, other.entry_id) == "c2"


async def test_a_commit_that_is_not_ok_takes_nothing(store: Store) -> None:
    _, entry, job = await first_step(store)
    await store.create_session(new_session())  # a new entry that could be taken
    stale = await commit_taking(store, commit_request(job, entry.entry_id, "c2"))
    assert (stale.verdict, stale.taken) == ("stale", ())
    conflict = await commit_taking(store, commit_request(job, entry.entry_id, "c1",
                                                         version=7))
    assert (conflict.verdict, conflict.taken) == ("conflict", ())
    assert len(await take(store, "c3")) == 1  # still new: nobody took it


async def test_a_taken_step_of_a_paused_session_is_held_not_run(store: Store) -> None:
    _, entry, job = await first_step(store)
    paused, _ = await store.create_session(new_session())
    await store.redis.hset(store.keys.meta(paused), "status", "paused")
    outcome = await commit_taking(store, commit_request(job, entry.entry_id, "c1"))
    [nxt] = outcome.taken
    assert nxt.fields["sid"] == paused
    assert nxt.gate is not None and nxt.gate.verdict == "held"
    held = await store.redis.lrange(store.keys.held(paused), 0, -1)
    assert [StepJob.from_json(h).key for h in held] == ["step:0"]
    assert await pending_under(store, nxt.entry_id) is None  # acked: nothing to run
    assert await started_steps(store, paused) == []


async def test_a_taken_step_of_a_cancelled_session_is_dropped(store: Store) -> None:
    _, entry, job = await first_step(store)
    cancelled, _ = await store.create_session(new_session())
    await store.redis.hset(store.keys.meta(cancelled), "status", "cancelled")
    outcome = await commit_taking(store, commit_request(job, entry.entry_id, "c1"))
    [nxt] = outcome.taken
    assert nxt.gate is not None and nxt.gate.verdict == "terminal"
    assert await pending_under(store, nxt.entry_id) is None
    assert await store.redis.xlen(store.keys.stream(0)) == 0
    assert await started_steps(store, cancelled) == []


async def test_what_a_dead_workers_commit_took_is_reclaimed_and_fenced(store: Store) -> None:
    sid, entry, job = await first_step(store)
    following = StepJob(session_id=sid, key="step:1", agent="a", input="next")
    outcome = await commit_taking(store, commit_request(job, entry.entry_id, "c1",
                                                        next_jobs=(following,)))
    [nxt] = outcome.taken
    # c1 dies here. Its taken entry stays pending under it, so no new read hands it
    # out again, and the idle claim hands it to another worker.
    assert await pending_under(store, nxt.entry_id) == "c1"
    assert await take(store, "c2") == []
    claimed = await store.claim_idle(0, "c2", 0, "0-0", 10)
    assert [e for e, _ in claimed.entries] == [nxt.entry_id]
    assert await pending_under(store, nxt.entry_id) == "c2"
    step1 = StepJob.from_json(nxt.fields["job"])
    late = await store.commit(commit_request(step1, nxt.entry_id, "c1", version=2))
    assert late.verdict == "stale"  # the fence: c1 no longer holds it
    done = await store.commit(commit_request(step1, nxt.entry_id, "c2", version=2))
    assert done.verdict == "ok"
    assert sorted(await store.redis.hkeys(store.keys.results(sid))) == ["step:0", "step:1"]


async def test_a_blocking_reads_entries_are_gated_in_one_call(store: Store) -> None:
    sids = [(await store.create_session(new_session()))[0] for _ in range(3)]
    read = await store.read_new(0, "c1", 2, block_ms=100)
    assert len(read) == 2
    calls = await script_calls(store)
    gated = await store.take_new(0, "c1", 5, now_iso(), read=read)
    assert await script_calls(store) == calls + 1
    # The entries read first, in order, then the new one taken with them.
    assert [e.entry_id for e in gated[:2]] == [e for e, _ in read]
    assert [e.fields["sid"] for e in gated] == sids
    assert all(e.gate is not None and e.gate.verdict == "run" for e in gated)
    for sid, entry in zip(sids, gated, strict=True):
        assert await pending_under(store, entry.entry_id) == "c1"
        assert await started_steps(store, sid) == [("step:0", "c1")]


async def test_a_read_entry_taken_over_meanwhile_is_stale_and_not_gated(store: Store) -> None:
    sid, _ = await store.create_session(new_session())
    gone_sid, _ = await store.create_session(new_session())
    read = await store.read_new(0, "c1", 2, block_ms=100)
    (mine, mine_fields), (lost, _) = read
    await store.redis.xclaim(store.keys.stream(0), CONSUMER_GROUP, "c2", 0, [lost])
    await store.redis.xdel(store.keys.stream(0), mine)  # read, then deleted under us
    stale_then_ungated = await store.take_new(0, "c1", 0, now_iso(), read=read[::-1])
    assert [(e.entry_id, e.gate.verdict if e.gate else None)
            for e in stale_then_ungated] == [(lost, "stale"), (mine, None)]
    assert stale_then_ungated[1].fields == mine_fields  # the fields the read brought
    assert await pending_under(store, lost) == "c2"
    assert await started_steps(store, gone_sid) == []  # c1 wrote nothing for it
    assert await started_steps(store, sid) == []  # left to gate.lua, as before


async def test_a_session_that_ended_while_its_step_waited_is_not_run(store: Store) -> None:
    await first_step(store)  # taken: the read below gets the other one
    other, _ = await store.create_session(new_session())
    await store.redis.hset(store.keys.meta(other), "status", "completed")
    read = await store.read_new(0, "c1", 1, block_ms=100)
    [gated] = await store.take_new(0, "c1", 0, now_iso(), read=read)
    assert gated.gate is not None and gated.gate.verdict == "terminal"
    assert (await store.get_session(other)).status == SessionStatus.COMPLETED


# -- in a worker -----------------------------------------------------------------------
CHAIN = """
version: 0
name: takes
runtime:
  provider: scripted
  script:
    rules:
      - {reply: ok}
agents:
  a: {prompt: "You are a."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "one"}
      - {agent: a, input: "two"}
      - {agent: a, input: "three"}
      - {agent: a, input: "four"}
"""


class Counting:
    """Wraps a store's calls to count what gated each step: take.lua, a commit's take,
    or gate.lua."""

    def __init__(self, store: Store) -> None:
        self.by_take: list[str] = []
        self.by_commit: list[str] = []
        self.by_gate: list[str] = []
        take_new, commit, gate = store.take_new, store.commit, store.gate

        async def counted_take(*args: Any, **kwargs: Any) -> list[TakenEntry]:
            taken = await take_new(*args, **kwargs)
            self.by_take += [StepJob.from_json(t.fields["job"]).key for t in taken]
            return taken

        async def counted_commit(req: CommitRequest, take_next: int = 0) -> CommitOutcome:
            outcome = await commit(req, take_next)
            self.by_commit += [StepJob.from_json(t.fields["job"]).key for t in outcome.taken]
            return outcome

        async def counted_gate(job: StepJob, *args: Any, **kwargs: Any) -> GateOutcome:
            self.by_gate.append(job.key)
            return await gate(job, *args, **kwargs)

        store.take_new = counted_take  # type: ignore[method-assign]
        store.commit = counted_commit  # type: ignore[method-assign]
        store.gate = counted_gate  # type: ignore[method-assign]


async def completed(store: Store, sid: str) -> bool:
    return (await store.get_session(sid)).status == SessionStatus.COMPLETED


def one_slot(settings: DurableSettings, **more: Any) -> DurableSettings:
    """One slot, and no re-claim due while the test runs (a commit then takes nothing)."""
    return settings.model_copy(update={"worker_concurrency": 1, "claim_idle_ms": 60_000,
                                       **more})


async def test_a_busy_workers_next_steps_come_with_its_commits(
        settings: DurableSettings, store: Store) -> None:
    counting = Counting(store)
    worker = StepConsumer(one_slot(settings), store)
    await worker.start()
    try:
        sid, _ = await start_session(store, load_spec_text(CHAIN, "takes.yaml"))
        await wait_for(lambda: completed(store, sid), what="session to complete")
    finally:
        await worker.stop(grace_s=0)
    # The first step came through a read (gated in one call), every later one with the
    # commit of the step before; gate.lua gated none.
    assert counting.by_take == ["step:0"]
    assert counting.by_commit == ["step:1", "step:2", "step:3"]
    assert counting.by_gate == []
    kinds = Counter(f["type"] for _, f in await store.events(sid))
    assert kinds["step_started"] == kinds["step_completed"] == 4


async def test_a_stopping_workers_last_commit_takes_nothing_more(
        settings: DurableSettings, store: Store, breakpoints: StepBreakpoints) -> None:
    counting = Counting(store)
    worker = StepConsumer(one_slot(settings), store)
    breakpoints.set("takes", "step:1")
    await worker.start()
    stopping: asyncio.Task[None] | None = None
    try:
        sid, _ = await start_session(store, load_spec_text(CHAIN, "takes.yaml"))
        await breakpoints.wait("takes", "step:1")
        other, _ = await start_session(store, load_spec_text(CHAIN, "takes.yaml"))
        stopping = asyncio.create_task(worker.stop(grace_s=60))

        async def stops() -> bool:
            return worker._stopping.is_set()

        await wait_for(stops, what="the worker to begin stopping")
        breakpoints.clear("takes", "step:1")  # step:1 commits as the worker stops
        await asyncio.wait_for(stopping, timeout=60)
    finally:
        if stopping is None:
            await worker.stop(grace_s=0)
    assert (await store.get_session(sid)).steps_committed == 2  # step:1 committed...
    assert counting.by_commit == ["step:1"]  # ...and took nothing more
    # Neither the chain's next step nor the other session's first was handed out.
    assert await started_steps(store, other) == []
    assert await store.redis.xpending(store.keys.stream(0), CONSUMER_GROUP) \
        | {"consumers": []} == {"pending": 0, "min": None, "max": None, "consumers": []}
    assert len(await take(store, "c2")) == 2


async def test_a_busy_worker_still_reclaims_a_dead_workers_entry(
        settings: DurableSettings, store: Store, breakpoints: StepBreakpoints) -> None:
    """Once its re-claim is due, a commit takes nothing: the slot goes back to the read
    loop, which takes over what a dead worker left, though new steps keep coming."""
    other, _ = await start_session(store, load_spec_text(CHAIN.replace("takes", "other"),
                                                         "other.yaml"))
    await store.redis.xreadgroup(CONSUMER_GROUP, "ghost", {store.keys.stream(0): ">"},
                                 count=1)  # a worker that died holding other's step:0
    worker = StepConsumer(settings.model_copy(update={"worker_concurrency": 1,
                                                      "claim_idle_ms": 500}), store)
    breakpoints.set("takes", "step:1")
    breakpoints.set("takes", "step:3")
    await worker.start()
    try:
        sid, _ = await start_session(store, load_spec_text(CHAIN, "takes.yaml"))
        await breakpoints.wait("takes", "step:1")

        async def ghost_entry_idle() -> bool:
            rows = await store.redis.xpending_range(store.keys.stream(0), CONSUMER_GROUP,
                                                    min="-", max="+", count=10,
                                                    consumername="ghost")
            return any(row["time_since_delivered"] > 500 for row in rows)

        # The one slot is busy with step:1 while other's step:0 idles past claim_idle_ms.
        await wait_for(ghost_entry_idle, what="the dead worker's entry to idle out")
        breakpoints.clear("takes", "step:1")
        await breakpoints.wait("takes", "step:3")
        # It was re-claimed between the chain's steps, not after the whole chain.
        assert ("step:0", worker.name) in await reclaimed_steps(store, other)
        breakpoints.clear("takes", "step:3")
        await wait_for(lambda: completed(store, sid), what="session to complete")
    finally:
        await worker.stop(grace_s=0)


async def reclaimed_steps(store: Store, sid: str) -> list[tuple[str, str]]:
    return [(f["step"], f["worker"]) for _, f in await store.events(sid)
            if f["type"] == "step_reclaimed"]


async def test_a_take_that_fails_in_the_script_never_fails_the_commit(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The commit is written before the take, and a script is not rolled back: a take
    that errors (here a field name that is not a string for HMGET, after XREADGROUP)
    takes nothing, and the entry it read stays pending under the consumer, re-claimable."""
    from strands_durable.store import step_path, streams

    sid, entry, job = await first_step(store)
    following = StepJob(session_id=sid, key="step:1", agent="a", input="next")
    broken = dataclasses.replace(streams.take_spelling(store.keys, 0), wanted='[{"not": "a name"}]')
    monkeypatch.setattr(step_path, "take_spelling", lambda keys, shard: broken)
    outcome = await commit_taking(store, commit_request(job, entry.entry_id, "c1",
                                                        next_jobs=(following,)))
    assert (outcome.verdict, outcome.taken) == ("ok", ())
    assert await store.redis.hkeys(store.keys.results(sid)) == ["step:0"]
    assert await pending_under(store, entry.entry_id) is None  # the commit's ack held
    claimed = await store.claim_idle(0, "c2", 0, "0-0", 10)
    assert [StepJob.from_json(f["job"]).key for _, f in claimed.entries if f] == ["step:1"]


async def test_a_commit_sent_again_after_its_reply_was_lost_hands_back_what_it_took(
        store: Store) -> None:
    sid, entry, job = await first_step(store)
    following = StepJob(session_id=sid, key="step:1", agent="a", input="next")
    request = commit_request(job, entry.entry_id, "c1", next_jobs=(following,))
    first = await commit_taking(store, request)  # applied; say its reply never arrived
    [took] = first.taken
    again = await commit_taking(store, request)  # what a worker riding the outage sends
    assert again.verdict == "stale"  # the fence: nothing applied twice
    [handed_back] = again.taken
    assert handed_back.entry_id == took.entry_id and handed_back.gate is not None
    assert handed_back.gate.verdict == "run"
    assert await pending_under(store, took.entry_id) == "c1"
    results = await store.results(sid)
    assert [r.key for r in results] == ["step:0"]
    # Another consumer's commit of the same entry gets nothing of it.
    other = dataclasses.replace(request, consumer="c2")
    assert (await commit_taking(store, other)).taken == ()
