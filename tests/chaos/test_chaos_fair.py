"""Chaos with fair dispatch on: chains of three namespaces beside a backlog of one of
them, on 3 real `arq worker` processes while a random worker is SIGKILLed every second
and restarted. Steps move between the stream and the namespaces' lists all the while;
nothing may be lost, left on a list, or committed twice."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from helpers.fleet import Fleet
from recovery import kill_every_second, start_fleet

from strands_durable.sessions.start import in_namespace, new_session
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.store import Store

pytestmark = pytest.mark.chaos

# Chains long enough (12 steps of 0.3 s: 3.6 s at the least) for three kills a second
# apart, each after a commit, however fast the machine: with 4 steps of 0.2 s a run
# on CI ended before its third.
CHAINS, STEPS, WORKERS, BACKLOG = 12, 12, 3, 300
NAMESPACES = ("team-a", "team-b", "default")


def spec(steps: int) -> str:
    return """
version: 0
name: chaos-fair
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
        input: "step {i} of {{{{ n }}}}"
""" for i in range(steps))


async def test_random_sigkills_with_fair_dispatch_lose_nothing(
        fleet_factory, store: Store, tmp_path: Path) -> None:
    fleet: Fleet = fleet_factory(claim_idle_ms=1500, worker_concurrency=8)
    # team-a's backlog is queued before any worker runs: the first takes move it aside.
    backlog = load_spec_text(spec(1), "a.yaml", {"n": "backlog"})
    sids = {sid: 1 for sid, _ in [await store.create_session(in_namespace(
        new_session(backlog), "team-a")) for _ in range(BACKLOG)]}
    workers = await start_fleet(fleet, store, WORKERS)
    for n in range(CHAINS):
        loaded = load_spec_text(spec(STEPS), "chain.yaml", {"n": str(n)})
        new = in_namespace(new_session(loaded), NAMESPACES[n % len(NAMESPACES)])
        sids[(await store.create_session(new))[0]] = STEPS

    kills = await kill_every_second(fleet, workers, store, list(sids), seed=4321)
    assert kills >= 3
    for sid, steps in sids.items():
        record = await store.get_session(sid)
        assert record.status.value == "completed", (sid, record.error)
        completed = Counter(f["step"] for _, f in await store.events(sid)
                            if f["type"] == "step_completed")
        assert completed == {f"step:{i}": 1 for i in range(steps)}, (sid, completed)
        assert record.steps_committed == steps
    assert await store.deferred_steps(0) == 0  # nothing left waiting on a list
    # The takes were the fair ones (they leave each namespace's tag behind).
    assert await store.redis.hget(store.keys.fair(0), "t:team-a") is not None
