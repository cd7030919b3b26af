"""Crash drill for compaction: a real `arq worker` process summarises an agent's
conversation (context_policy.compaction) and dies before committing the step
(DURABLE_CRASH_AT=before_commit, exit 137, no cleanup); a fresh worker re-runs the step,
compacts again and commits. The lane ends exactly as an uninterrupted run's: one
summary record per compacting step, the same tokens, the same results.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import RedisServer, poll_until, random_prefix, wait_for
from helpers.fleet import Fleet
from recovery import FAST, ended, settings_for

from strands_durable.sessions.start import start_session
from strands_durable.spec.loader import load_spec_data
from strands_durable.store.connect import open_store
from strands_durable.store.conversation import as_compaction
from strands_durable.store.store import Store
from strands_durable.worker.compaction import SUMMARIZE_PROMPT
from strands_durable.worker.consumer import StepConsumer
from strands_durable.worker.faults import CRASH_EXIT_CODE

pytestmark = pytest.mark.chaos

LONG = " ".join(f"fact{i:03d}" for i in range(225))  # ~450 estimated tokens


def spec() -> dict[str, Any]:
    return {
        "version": 0, "name": "compaction-drill",
        "runtime": {"provider": "scripted", "failure_policy": {"retries": 0}, "script": {
            "rules": [{"contains": SUMMARIZE_PROMPT, "reply": "SUMMARY so far"},
                      {"reply": LONG}]}},
        "context_policy": {"compaction": {"when_tokens_over": 1000}},
        "agents": {"a": {"prompt": "You are a."}},
        "pattern": {"type": "chain", "config": {"steps": [
            {"agent": "a", "input": f"step {i + 1}"} for i in range(4)]}},
    }


async def finished(store: Store, sid: str) -> dict[str, Any]:
    """What must not change when a worker crashes: the lane, results, tokens."""
    record = await store.get_session(sid)
    lane = await store.redis.lrange(store.keys.conversation(sid, "a"), 0, -1)
    return {"status": record.status.value,
            "lane": [json.loads(raw) for raw in lane],
            "results": {r.key: (r.response, r.input_tokens, r.output_tokens)
                        for r in await store.results(sid)},
            "tokens": (record.token_usage.total_input_tokens,
                       record.token_usage.total_output_tokens)}


async def reference(server: RedisServer) -> dict[str, Any]:
    settings = settings_for(server, random_prefix())
    store = open_store(settings)
    await store.prepare()
    consumer = StepConsumer(settings, store)
    await consumer.start()
    try:
        sid, _ = await start_session(store, load_spec_data(spec()))
        await wait_for(lambda: ended(store, sid), timeout_s=60, what="reference run")
        return await finished(store, sid)
    finally:
        await consumer.stop(grace_s=0)
        await store.redis.aclose()


async def test_a_crash_between_summary_and_commit_commits_one_summary(
        redis_server: RedisServer, tmp_path: Path) -> None:
    expected = await reference(redis_server)
    records = [i for i, item in enumerate(expected["lane"]) if as_compaction(item)]
    assert records == [6, 9]  # steps 3 and 4 compact: the drill's crash is at step 3's

    prefix = random_prefix()
    store = open_store(settings_for(redis_server, prefix))
    await store.prepare()
    # One step at a time; each worker dies before its third commit: the first one
    # commits steps 1 and 2, runs step 3 (agent call and summary) and dies.
    fleet = Fleet.create(redis_server.url, prefix, tmp_path, crash_at="before_commit:3",
                         worker_concurrency=1, **FAST)
    try:
        sid, _ = await start_session(store, load_spec_data(spec()))
        crashing = fleet.start_worker()
        assert await poll_until(lambda: _exited(crashing), timeout_s=60), fleet.logs()
        assert crashing.returncode == CRASH_EXIT_CODE, fleet.logs()
        assert "compacted 2 of 6 messages" in fleet.logs()  # it had summarised
        assert [r.key for r in await store.results(sid)] == ["step:0", "step:1"]
        fleet.start_worker()
        await wait_for(lambda: ended(store, sid), timeout_s=60, what="the re-run")
        assert await finished(store, sid) == expected
        events = [f for _, f in await store.events(sid)]
        runs = [f["type"] for f in events
                if f["step"] == "step:2" and f["type"] in ("step_started", "step_reclaimed")]
        assert runs == ["step_started", "step_reclaimed"]
        assert [f["step"] for f in events if f["type"] == "step_completed"] == [
            "step:0", "step:1", "step:2", "step:3"]
    finally:
        fleet.stop_all()
        await store.redis.aclose()


async def _exited(proc: Any) -> bool:
    return proc.poll() is not None
