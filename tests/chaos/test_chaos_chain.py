"""Chaos: 20 chain sessions of 5 steps on 3 real `arq worker` processes while a random
worker is SIGKILLed every second and restarted. Nothing may be lost or committed twice."""

from __future__ import annotations

import random
import time
from collections import Counter
from pathlib import Path

import pytest
from fleet import Fleet
from helpers import poll_until, wait_for

from scheduler.loader import load_spec_text
from scheduler.start import start_session
from scheduler.status import session_status
from sessions.models import SessionStatus
from sessions.store import Store

pytestmark = pytest.mark.chaos

SESSIONS, STEPS, WORKERS = 20, 5, 3

SPEC = """
version: 0
name: chaos-chain
runtime:
  provider: scripted
  script: {delay_s: 0.3}
agents:
  a: {prompt: "You are agent a."}
pattern:
  type: chain
  config:
    steps:
""" + "".join(f"""      - agent: a
        input: "step {i} of {{{{ n }}}} after {{{{ last_response | truncate(30) }}}}"
""" for i in range(STEPS))


async def _live_workers(store: Store, n: int) -> bool:
    return int(await store.redis.hlen(store.keys.workers())) >= n


async def all_ended(store: Store, sids: list[str]) -> bool:
    for sid in sids:
        if (await store.get_session(sid)).status == SessionStatus.RUNNING:
            return False
    return True


async def test_random_sigkills_lose_nothing_and_commit_nothing_twice(
        fleet_factory, store: Store, tmp_path: Path) -> None:
    fleet: Fleet = fleet_factory(claim_idle_ms=1500, worker_concurrency=8)
    workers = [fleet.start_worker() for _ in range(WORKERS)]
    # Kill workers that are consuming, not ones still booting.
    await wait_for(lambda: _live_workers(store, WORKERS), timeout_s=60,
                   what=f"{WORKERS} workers to heartbeat")
    sids = []
    for n in range(SESSIONS):
        loaded = load_spec_text(SPEC, "chaos.yaml", {"n": str(n)})
        sids.append((await start_session(store, loaded))[0])

    rng = random.Random(1234)
    kills = 0
    deadline = time.monotonic() + 240
    # A worker dies every second until every session has ended.
    while not await poll_until(lambda: all_ended(store, sids), timeout_s=1.0):
        assert time.monotonic() < deadline, f"sessions still running after {kills} kills:\n" \
            + fleet.logs()[-3000:]
        victim = rng.randrange(WORKERS)
        fleet.kill(workers[victim])
        workers[victim] = fleet.start_worker()
        kills += 1
    assert kills >= 3, "the run ended before the chaos had a chance to bite"
    reclaimed = 0

    for n, sid in enumerate(sids):
        status = await session_status(store, sid)
        if status["status"] != "completed":
            trail = [(f["type"], f["step"], f["worker"], f["at"])
                     for _, f in await store.events(sid)]
            raise AssertionError(f"{sid}: {status['error']}\n" + "\n".join(map(str, trail)))
        session_events = await store.events(sid)
        reclaimed += sum(f["type"] == "step_reclaimed" for _, f in session_events)
        completed = Counter(f["step"] for _, f in session_events
                            if f["type"] == "step_completed")
        assert completed == {f"step:{i}": 1 for i in range(STEPS)}, (sid, completed)
        history = status["pattern_state"]["step_history"]
        assert [h["index"] for h in history] == list(range(STEPS))
        for i, h in enumerate(history):
            assert h["response"].startswith(f"a: step {i} of {n} after"), h
        record = await store.get_session(sid)
        assert record.steps_committed == STEPS
        results = await store.results(sid)
        assert record.token_usage.total_input_tokens == sum(r.input_tokens for r in results)
    # Killed workers left steps behind that others had to re-claim and run again.
    assert reclaimed > 0, f"{kills} kills but no step was ever re-claimed"
