"""A session's live stream is written only while the session exists (store/lua/
live_append.lua), on a real redis-server: a worker's batch flushed after the session
was deleted must not make its stream again (a delete leaves nothing behind; the cleanup
test saw the key come back under load). Entries keep their fields and order, the
stream is capped and expires after its last write."""

from __future__ import annotations

import asyncio

import pytest

from strands_durable.models import SessionStatus
from strands_durable.sessions.control import cancel
from strands_durable.sessions.deletion import delete_session
from strands_durable.sessions.live import Idle, LiveFollowers
from strands_durable.sessions.start import start_session
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.live import LiveBatch
from strands_durable.store.store import Store

pytestmark = pytest.mark.integration

SPEC = """
version: 0
name: live
runtime: {provider: scripted}
agents: {a: {prompt: "You answer."}}
pattern: {type: chain, config: {steps: [{agent: a, input: "hi"}]}}
"""


async def test_a_batch_after_the_delete_writes_nothing(store: Store) -> None:
    sid, _ = await start_session(store, load_spec_text(SPEC, "live.yaml"))
    other, _ = await start_session(store, load_spec_text(SPEC, "live.yaml"))
    await store.live_append([LiveBatch(sid, [{"kind": "text", "text": "héllo 🌊"},
                                             {"kind": "turn_end"}]),
                             LiveBatch(other, [{"kind": "text", "text": "x"}])],
                            maxlen=1000, ttl_s=600)
    entries = await store.live_entries(sid)
    assert [fields for _, fields in entries] == [{"kind": "text", "text": "héllo 🌊"},
                                                 {"kind": "turn_end"}]
    assert 0 < await store.redis.ttl(store.keys.live(sid)) <= 600

    await delete_session(store, sid)
    assert not await store.redis.exists(store.keys.live(sid))
    await store.live_append([LiveBatch(sid, [{"kind": "text", "text": "late"}]),
                             LiveBatch(other, [{"kind": "text", "text": "y"}])],
                            maxlen=1000, ttl_s=600)
    assert not await store.redis.exists(store.keys.live(sid))  # not made again
    assert [f["text"] for _, f in await store.live_entries(other)] == ["x", "y"]


async def test_the_stream_is_capped(store: Store) -> None:
    sid, _ = await start_session(store, load_spec_text(SPEC, "live.yaml"))
    for n in range(30):
        await store.live_append([LiveBatch(sid, [{"n": str(n)}] * 100)], maxlen=200,
                                ttl_s=600)
    # MAXLEN ~ trims whole nodes: about the cap, never the 3,000 written.
    assert 200 <= await store.redis.xlen(store.keys.live(sid)) < 400


async def test_a_batch_just_after_the_end_still_reaches_a_follower(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker flushes its live buffer apart from its commit: a step's last text can
    land just after its session ended. A follower that finds the session ended waits a
    grace for it before its end (CI saw a client miss a step's whole reply)."""
    sid, _ = await start_session(store, load_spec_text(SPEC, "live.yaml"))
    await store.live_append([LiveBatch(sid, [{"kind": "attempt", "step": "s", "attempt": "1",
                                             "worker": "w"}])], maxlen=1000, ttl_s=600)
    ended = asyncio.Event()
    status_of = store.status_of

    async def told_ended(session_id: str) -> SessionStatus | None:
        status = await status_of(session_id)
        if status is not None and status.is_terminal:
            ended.set()
        return status

    monkeypatch.setattr(store, "status_of", told_ended)
    followers = LiveFollowers(store, block_ms=100, end_grace_s=30)

    async def follow() -> list[str]:
        return [e.kind async for e in followers.follow(sid) if not isinstance(e, Idle)]

    following = asyncio.create_task(follow())
    await cancel(store, sid)
    await ended.wait()
    await store.live_append([LiveBatch(sid, [{"kind": "text", "step": "s", "attempt": "1",
                                             "text": "late"}])], maxlen=1000, ttl_s=600)
    assert await asyncio.wait_for(following, 60) == ["attempt", "text"]


async def test_a_client_that_comes_after_the_end_waits_no_quiet_while(store: Store) -> None:
    """The backlog read, a follower looks at the status at once: an ended session's
    stream ends after the grace, not after a blocking read's quiet while first (here an
    hour: the follow would outlast the test's timeout)."""
    sid, _ = await start_session(store, load_spec_text(SPEC, "live.yaml"))
    await store.live_append([LiveBatch(sid, [{"kind": "attempt", "step": "s", "attempt": "1",
                                             "worker": "w"}])], maxlen=1000, ttl_s=600)
    await cancel(store, sid)
    followers = LiveFollowers(store, block_ms=3_600_000, end_grace_s=0.01)
    for after in ("0-0", "99999999999999-0"):  # its backlog, or nothing after the id
        kinds = [e.kind async for e in followers.follow(sid, after) if not isinstance(e, Idle)]
        assert kinds == (["attempt"] if after == "0-0" else [])


async def _script_calls(store: Store) -> int:
    stats = await store.redis.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0))
               for name in ("evalsha", "eval"))


async def test_one_flush_is_one_script_call_per_shard(store: Store) -> None:
    sids = [(await start_session(store, load_spec_text(SPEC, "live.yaml")))[0]
            for _ in range(12)]
    await store.live_append([LiveBatch(sids[0], [{"n": "warm"}])], maxlen=100, ttl_s=60)
    before = await _script_calls(store)
    await store.live_append([LiveBatch(sid, [{"n": str(i)}, {"n": "end"}])
                             for i, sid in enumerate(sids)], maxlen=100, ttl_s=60)
    shards = {store.keys.shard(sid) for sid in sids}
    assert await _script_calls(store) - before == len(shards)
    for i, sid in enumerate(sids):
        expected = ([{"n": "warm"}] if i == 0 else []) + [{"n": str(i)}, {"n": "end"}]
        assert [fields for _, fields in await store.live_entries(sid)] == expected
