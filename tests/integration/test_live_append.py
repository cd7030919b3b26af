"""A session's live stream is written only while the session exists (store/lua/
live_append.lua), on a real redis-server: a worker's batch flushed after the session
was deleted must not make its stream again (a delete leaves nothing behind; the cleanup
test saw the key come back under load). Entries keep their fields and order, the
stream is capped and expires after its last write."""

from __future__ import annotations

import pytest

from strands_durable.sessions.deletion import delete_session
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
