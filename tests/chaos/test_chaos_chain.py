"""Chaos: 20 chain sessions of 5 steps on 3 real `arq worker` processes while a random
worker is SIGKILLed every second and restarted. Nothing may be lost or committed twice."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from helpers import status_doc
from helpers.fleet import Fleet
from recovery import kill_every_second, start_fleet

from strands_durable.sessions.start import start_session
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.store import Store

pytestmark = pytest.mark.chaos

SESSIONS, STEPS, WORKERS = 20, 5, 3
# Steps take 0.3 s so that random kills land inside some of them. Nothing waits on that
# time: a slower (loaded) machine only means more kills, which the asserts allow.

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


async def test_random_sigkills_lose_nothing_and_commit_nothing_twice(
        fleet_factory, store: Store, tmp_path: Path) -> None:
    fleet: Fleet = fleet_factory(claim_idle_ms=1500, worker_concurrency=8)
    workers = await start_fleet(fleet, store, WORKERS)
    sids = []
    for n in range(SESSIONS):
        loaded = load_spec_text(SPEC, "chaos.yaml", {"n": str(n)})
        sids.append((await start_session(store, loaded))[0])

    kills = await kill_every_second(fleet, workers, store, sids, seed=1234)
    reclaimed = 0

    for n, sid in enumerate(sids):
        status = await status_doc(store, sid)
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
