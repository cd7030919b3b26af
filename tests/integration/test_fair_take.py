"""Fair dispatch between namespaces (take.lua and commit.lua's take, _lib.lua's fair
take) on a real Redis: a backlog of one namespace does not hold another's steps back,
weights share the takes, and every step is still taken once, nothing lost."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from strands_durable.access import NamespaceQuota
from strands_durable.metrics.fleet import FleetReader
from strands_durable.models import StepJob, now_iso, now_ms
from strands_durable.store.fleet import queue_stats
from strands_durable.store.keys import CONSUMER_GROUP
from strands_durable.store.store import Store
from tests.integration.test_store import commit_request, new_session

pytestmark = pytest.mark.integration

SCAN = 128  # _lib.lua FAIR_SCAN: new entries one take looks at


async def submit(store: Store, namespace: str, n: int) -> list[str]:
    new = dataclasses.replace(new_session(), namespace=namespace)
    return [(await store.create_session(new))[0] for _ in range(n)]


async def take_one(store: Store, consumer: str = "c1") -> list[tuple[str, str]]:
    """One take of one slot, its runnable entries acked at once (a step that ran):
    [(session id, entry id)]."""
    out = []
    for entry in await store.take_new(0, consumer, 1, now_iso()):
        if entry.gate is not None and entry.gate.verdict == "run":
            out.append((entry.fields["sid"], entry.entry_id))
            await store.ack(0, entry.entry_id)
    return out


async def deferred(store: Store) -> int:
    """Steps on the namespaces' lists; the waiting list (KEDA's) counts the same."""
    names = await store.redis.zrange(f"{store.keys.fair(0)}:ready", 0, -1)
    listed = sum([await store.redis.llen(store.keys.fair_queue(0, n)) for n in names])
    assert await store.redis.llen(store.keys.fair_waiting(0)) == listed
    return listed


async def drain(store: Store, most: int, consumer: str = "c1") -> list[str]:
    """Session ids taken, in order, one slot at a time (at most `most` takes), until
    neither the stream nor a namespace's list holds a step."""
    order: list[str] = []
    for _ in range(most):
        order += [sid for sid, _ in await take_one(store, consumer)]
        if await deferred(store) == 0 and await store.redis.xlen(store.keys.stream(0)) == 0:
            break
    return order


async def test_a_backlog_of_one_namespace_does_not_hold_another_back(store: Store) -> None:
    a = await submit(store, "team-a", 300)
    b = await submit(store, "team-b", 5)
    first_b = None
    order: list[str] = []
    for n in range(1, 400):
        order += [sid for sid, _ in await take_one(store)]
        if first_b is None and set(order) & set(b):
            first_b = n
            break
    # Without fairness B's first step is the 301st take; with it, B waits only for the
    # takes that move A's 300 entries aside (SCAN a take), then goes first.
    assert first_b is not None and first_b <= 300 // SCAN + 2
    rest = await drain(store, 1000)
    taken = order + rest
    assert Counter(taken) == Counter(a + b)  # each step taken once: none lost, none twice
    # Then B and A take turns (each has run about as many steps): B's are all done
    # within ten takes, not behind A's 300.
    assert set(taken[: len(order) + 10]) >= set(b)
    assert await deferred(store) == 0
    assert await store.redis.xlen(store.keys.stream(0)) == 0


async def test_weights_share_the_takes(store: Store) -> None:
    store.fair_weights = "team-a=3"
    a = set(await submit(store, "team-a", 200))
    await submit(store, "team-b", 200)
    order = await drain(store, 80)
    # Both waiting the whole time: A (weight 3) gets three takes for each of B's, once
    # B's credit as a namespace back from quiet (FAIR_LAG) is used up.
    late = order[-40:]
    assert 27 <= sum(1 for sid in late if sid in a) <= 33


async def test_the_default_namespace_alone_writes_nothing_of_fairness(store: Store) -> None:
    sids = await submit(store, "default", 20)
    assert sorted(await drain(store, 100)) == sorted(sids)
    assert await store.redis.keys(f"{store.keys.fair(0)}*") == []


async def test_a_commit_takes_fairly_and_a_dead_taker_loses_nothing(store: Store) -> None:
    """A commit's take is fair like take.lua's; a consumer that took steps and died
    holds only what it ran (pending, re-claimed as ever), never a deferred step."""
    a = await submit(store, "team-a", SCAN + 10)
    [first] = await store.take_new(0, "c1", 1, now_iso())
    # The take looked at SCAN entries: one of A runs, the others wait on A's list.
    assert first.fields["sid"] in a and await deferred(store) == SCAN - 1
    b = await submit(store, "team-b", 1)
    job = StepJob.from_json(first.fields["job"])
    done = await store.commit(commit_request(job, first.entry_id, "c1"), take_next=1)
    assert done.verdict == "ok"
    [taken] = [t for t in done.taken if t.gate is not None and t.gate.verdict == "run"]
    assert taken.fields["sid"] == b[0]  # B's step first, not after A's 137
    # c1 dies holding B's entry: it alone is pending, for a re-claim as ever; another
    # consumer takes the rest of A, from the lists and the stream, each step once.
    pending = await store.redis.xpending(store.keys.stream(0), CONSUMER_GROUP)
    assert pending["pending"] == 1
    order = await drain(store, 400, "c2")
    assert Counter(order) == Counter([s for s in a if s != first.fields["sid"]])
    assert await store.deliveries(0, taken.entry_id) == 1


async def test_weights_come_from_the_namespaces_quotas(store: Store) -> None:
    await store.set_quota(NamespaceQuota(namespace="team-a", weight=3))
    await store.set_quota(NamespaceQuota(namespace="team-b", running_sessions=5, weight=1))
    await store.set_quota(NamespaceQuota(namespace="team-c", running_sessions=5))
    assert await store.refresh_fair_weights() == "team-a=3"
    assert store.fair_weights == "team-a=3"  # what every take of this store sends


async def test_the_queue_view_counts_the_deferred_steps(store: Store) -> None:
    await submit(store, "team-a", 40)
    await take_one(store)  # one runs, the others wait on team-a's list
    assert await store.deferred_by_namespace(0) == {"team-a": 39}
    stats = await queue_stats(store)
    assert stats.total["deferred"] == 39 and stats.total["lag"] == 0
    snap = await FleetReader(store.keys, heartbeat_s=5, max_age_s=0).read(store)
    assert [(s.deferred, s.lag) for s in snap.shards] == [(39, 0)]  # durable_stream_deferred


async def exists_calls(store: Store) -> int:
    stats = await store.redis.info("commandstats")
    return int(stats.get("cmdstat_exists", {}).get("calls", 0))


async def test_a_fleet_of_one_namespace_pays_no_command_a_step(store: Store) -> None:
    """The timer poll tells the worker the shard has no fairness state: its takes and
    commits then run not one command more than before fair dispatch."""
    await submit(store, "default", 5)
    await store.promote_timers(0, now_ms())
    assert store.fair_look == {0: False}
    before = await exists_calls(store)
    [entry] = await store.take_new(0, "c1", 1, now_iso())
    job = StepJob.from_json(entry.fields["job"])
    done = await store.commit(commit_request(job, entry.entry_id, "c1"), take_next=1)
    assert done.verdict == "ok" and len(done.taken) == 1
    assert await exists_calls(store) == before
    # A namespace other than default turns the look on at the next poll.
    await submit(store, "team-b", 1)
    await store.promote_timers(0, now_ms())
    assert store.fair_look == {0: True}


async def running_of(store: Store, namespace: str, entries: list) -> list[str]:
    return [e.entry_id for e in entries if e.gate is not None and e.gate.verdict == "run"
            and e.fields["sid"] in namespace]


async def test_a_quota_of_steps_in_flight_holds_the_rest_back(store: Store) -> None:
    """team-a may run 3 steps at once: a take of 10 slots hands out 3 of its 20 and
    team-b's step; the 4th goes out only as one of the 3 commits, and a step that ended
    without its commit (failed: acked elsewhere) gives its place back too."""
    await store.set_quota(NamespaceQuota(namespace="team-a", steps_in_flight=3))
    await store.refresh_fair_weights()
    assert store.fair_limits == "team-a=3"
    a = await submit(store, "team-a", 20)
    b = await submit(store, "team-b", 1)
    taken = await store.take_new(0, "c1", 10, now_iso())
    mine = await running_of(store, a, taken)
    assert len(mine) == 3 and await running_of(store, b, taken) != []
    assert await store.take_new(0, "c1", 10, now_iso()) == []  # none due: none failed
    assert await deferred(store) == 17
    first = next(t for t in taken if t.entry_id == mine[0])
    job = StepJob.from_json(first.fields["job"])
    done = await store.commit(commit_request(job, first.entry_id, "c1"), take_next=1)
    assert len(await running_of(store, a, list(done.taken))) == 1
    # One of the running ones ends without a commit (acked as a failed step would be):
    # its id is dropped once the set is found full, and the next step goes out.
    await store.ack(0, mine[1])
    assert len(await running_of(store, a, await store.take_new(0, "c1", 10, now_iso()))) == 1
    assert await store.take_new(0, "c1", 10, now_iso()) == []
    assert await deferred(store) == 15
