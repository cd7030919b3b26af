"""Chaos over every pattern: sessions of all seven patterns run together on three real
`arq worker` processes while a random worker is SIGKILLed every second and restarted.
Each session must end exactly as its pattern's uninterrupted run does, with every step
committed once."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import RedisServer
from helpers.fleet import Fleet
from pattern_specs import CASES
from recovery import FAST, kill_every_second, outcome, reference_run, start_fleet

from strands_durable.sessions.start import start_session
from strands_durable.store.store import Store

pytestmark = pytest.mark.chaos

PER_PATTERN, WORKERS = 3, 3
STEP_S = 0.8  # slower steps than the drills so that kills land inside them


async def test_random_sigkills_over_all_patterns_change_nothing(
        fleet_factory, store: Store, redis_server: RedisServer, tmp_path: Path) -> None:
    references = {name: await reference_run(redis_server, case)
                  for name, case in CASES.items()}
    # A kill every second over three workers can catch one step in several kills in a
    # row; the dead-letter guard (tested on its own) must not mistake that for poison.
    fleet: Fleet = fleet_factory(**{**FAST, "claim_idle_ms": 1000, "max_deliveries": 12})
    workers = await start_fleet(fleet, store, WORKERS)
    sessions: list[tuple[str, str]] = []
    for _ in range(PER_PATTERN):
        for name, case in CASES.items():
            sid, _ = await start_session(store, case.load(STEP_S))
            sessions.append((name, sid))
    sids = [sid for _, sid in sessions]

    kills = await kill_every_second(fleet, workers, store, sids, seed=4321)

    reclaimed = 0
    for name, sid in sessions:
        run = await outcome(store, sid)
        assert run.comparable() == references[name].comparable(), (name, sid)
        assert run.completed == references[name].completed, (name, sid)
        reclaimed += sum(run.started.values()) - sum(run.completed.values())
    assert reclaimed > 0, f"{kills} kills but no step ever ran twice"
