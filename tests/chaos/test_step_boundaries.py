"""Recovery drills, per pattern: a real `arq worker` process crashes (exit 137, no
cleanup) at every step boundary, or in the middle of every step, and a fresh worker
takes over each time. The session must end exactly as an uninterrupted run does (same
pattern_state, results and artifacts), with every step committed once.

Crash points come from DURABLE_CRASH_AT (worker/faults.py):
- boundary: `after_commit:1`, each worker dies right after its first commit;
- mid-step: `before_commit:2`, each worker commits one step, runs the next one's agent
  call and dies before committing it, so that step runs again elsewhere;
- after-gate: `after_gate:2`: each worker commits one step, claims the next and dies
  before its agent call.
Both drills that die on a worker's second step run one step at a time per worker. With
several at a time, a worker holds fanned-out steps together and commits whichever
finishes first: the same branch could lose that race on every worker (seen once in a
parallel run on a loaded machine) and be dead-lettered after DURABLE_MAX_DELIVERIES,
which is the poison-message guard doing its job, not a recovery drill.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from helpers import RedisServer, poll_until, random_prefix
from helpers.fleet import Fleet
from pattern_specs import CASES, PatternCase
from recovery import DELAY_S, FAST, Outcome, ended, outcome, reference_run, settings_for

from strands_durable.sessions.start import start_session
from strands_durable.store.connect import open_store
from strands_durable.worker.faults import CRASH_EXIT_CODE

pytestmark = pytest.mark.chaos

DRILLS = {"boundary": "after_commit:1", "mid-step": "before_commit:2",
          "after-gate": "after_gate:2"}
CONCURRENCY = {"before_commit:2": 1, "after_gate:2": 1}  # worker_concurrency (default 8)


async def drill(server: RedisServer, case: PatternCase, crash_at: str, logdir: Path
                ) -> tuple[Outcome, int]:
    """Run the spec on a line of workers that each crash at `crash_at`."""
    prefix = random_prefix()
    store = open_store(settings_for(server, prefix))
    await store.prepare()
    logdir.mkdir(parents=True, exist_ok=True)
    fleet = Fleet.create(server.url, prefix, logdir, crash_at=crash_at,
                         worker_concurrency=CONCURRENCY.get(crash_at, 8),
                         **FAST)
    try:
        sid, _ = await start_session(store, case.load(DELAY_S))
        crashes = 0
        deadline = time.monotonic() + 150
        while True:
            proc = fleet.start_worker()

            async def worker_gone_or_session_ended(p: subprocess.Popen[bytes] = proc
                                                   ) -> bool:
                return p.poll() is not None or await ended(store, sid)

            assert await poll_until(worker_gone_or_session_ended, timeout_s=60), \
                f"{case.name}/{crash_at}: worker neither crashed nor finished\n" + fleet.logs()
            if await ended(store, sid):
                fleet.stop_all()
                break
            assert proc.returncode == CRASH_EXIT_CODE, \
                f"worker exited {proc.returncode}, not at its crash point\n{fleet.logs()}"
            crashes += 1
            assert time.monotonic() < deadline, f"{crashes} crashes and still running"
        return await outcome(store, sid), crashes
    finally:
        fleet.stop_all()
        await store.redis.aclose()


@pytest.fixture
async def server(redis_server: RedisServer) -> AsyncIterator[RedisServer]:
    yield redis_server


@pytest.mark.parametrize("pattern", list(CASES))
async def test_crash_at_every_step_boundary_and_mid_step_changes_nothing(
        pattern: str, server: RedisServer, tmp_path: Path) -> None:
    case = CASES[pattern]
    reference = await reference_run(server, case)
    assert reference.status["status"] == "completed", reference.status["error"]
    steps = len(reference.responses)
    assert set(reference.completed.values()) == {1}

    runs = await asyncio.gather(*(drill(server, case, crash_at, tmp_path / name)
                                  for name, crash_at in DRILLS.items()))
    for (name, crash_at), (run, crashes) in zip(DRILLS.items(), runs, strict=True):
        where = f"{pattern}, {name} drill ({crash_at})"
        assert run.comparable() == reference.comparable(), where
        # Every step committed exactly once, whatever ran twice.
        assert run.completed == reference.completed, where
        if name == "boundary":
            # One crash after each commit but the last (which may end the run first).
            assert crashes >= steps - 1, (where, crashes)
        else:
            # Each crash left one claimed step uncommitted; it ran again elsewhere.
            assert crashes >= 1, where
            rerun = sum(n - 1 for n in run.started.values())
            assert rerun >= crashes, (where, run.started, crashes)
