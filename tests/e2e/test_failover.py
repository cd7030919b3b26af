"""Fast failover end to end: real `arq worker` processes and a real `durable run`, killed
with SIGKILL while they hold steps (each stopped at a breakpoint, so the kill lands mid-
step by construction). Their steps run again on a live worker because the dead one was
declared dead, never because an entry idled out (claim_idle_ms is a minute here); each
step commits once. A worker whose event loop is held for four times the silence that
makes a death is never declared dead. Timings are printed, not asserted (the bench,
`python -m bench.failover`, measures them)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import EXAMPLES, REPO, StepBreakpoints, wait_for
from helpers.fleet import Fleet, durable_bin
from recovery import all_ended, start_fleet

from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.store import Store

pytestmark = pytest.mark.e2e

SPEC = """
version: 0
name: failover-drill
runtime: {provider: scripted}
agents:
  a: {prompt: "You are a."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "one {{ n }}"}
      - {agent: a, input: "two after {{ last_response }}"}
      - {agent: a, input: "three after {{ last_response }}"}
"""
WORKFLOW = "failover-drill"
NO_IDLE_CLAIM = {"claim_idle_ms": 60_000}  # a re-run within a test is a failover's


def bound_s(settings: DurableSettings) -> float:
    """When the fleet's settings have a dead worker's steps running again: the silence
    that makes a death, a beat for an observer to see it, one to declare, a blocking read
    for the taker's loop to come round."""
    beat = settings.failover_beat_ms / 1000
    return beat * settings.failover_missed_beats + 2 * beat + settings.read_block_ms / 1000


async def trail(store: Store, sid: str) -> list[dict[str, str]]:
    return [f for _, f in await store.events(sid)]


def committed_once(events: list[dict[str, str]], steps: int) -> None:
    done = Counter(f["step"] for f in events if f["type"] == "step_completed")
    assert done == {f"step:{i}": 1 for i in range(steps)}, done


async def test_a_killed_workers_steps_run_again_because_it_was_declared_dead(
        fleet_factory: Callable[..., Fleet], store: Store) -> None:
    fleet = fleet_factory(**NO_IDLE_CLAIM)
    breakpoints = fleet.breakpoints
    breakpoints.set(WORKFLOW, "step:1")
    workers = await start_fleet(fleet, store, 2)
    sids = [(await start_session(store, load_spec_text(SPEC, "d.yaml", {"n": str(n)})))[0]
            for n in range(6)]
    hits = await breakpoints.wait(WORKFLOW, "step:1", n=len(sids))
    by_pid = Counter(h.pid for h in hits)
    victim = next(w for w in workers if w.pid == by_pid.most_common(1)[0][0])
    held = {h.session: h.worker for h in hits if h.pid == victim.pid}
    fleet.kill(victim)
    killed = time.time()
    breakpoints.clear(WORKFLOW, "step:1")
    await wait_for(lambda: all_ended(store, sids), timeout_s=60, what="every session")

    settings = DurableSettings(**{k[len("DURABLE_"):].lower(): v for k, v in fleet.env.items()
                                  if k.startswith("DURABLE_") and k != "DURABLE_EPHEMERAL"})
    delays = []
    for sid in sids:
        events = await trail(store, sid)
        committed_once(events, 3)
        if sid not in held:
            assert not [f for f in events if f["type"] == "worker_declared_dead"]
            continue
        (declared,) = [f for f in events if f["type"] == "worker_declared_dead"]
        assert (declared["step"], declared["worker"]) == ("step:1", held[sid])
        (again,) = [f for f in events if f["type"] == "step_reclaimed"]
        assert again["step"] == "step:1" and again["worker"] != held[sid]
        assert again["detail"] == f"after {held[sid]} was declared dead"
        delays.append(iso_s(again["at"]) - killed)
    # `durable workers` shows the declaration and how its steps fared.
    (name,) = set(held.values())
    (dead,) = [w for w in fleet.cli_json("workers") if w["consumer"] == name]
    death = dead["declared_dead"]
    assert dead["alive"] is False and death["steps"] == death["rerun"] == len(held)
    assert "steps re-run" in fleet.cli("workers").stdout
    print(f"{len(delays)} step(s) of the killed worker started again "
          f"{min(delays):.2f}-{max(delays):.2f}s after the kill (the settings' bound: "
          f"{bound_s(settings):.1f}s; claim_idle_ms: {settings.claim_idle_ms / 1000:.0f}s)")


def iso_s(at: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()


async def test_a_worker_whose_loop_is_held_is_not_declared_dead(
        fleet_factory: Callable[..., Fleet], store: Store) -> None:
    # Dead after 0.5 s of silence; the stalled worker's loop is held 2 s at a time.
    fleet = fleet_factory(failover_beat_ms=100, failover_missed_beats=5, **NO_IDLE_CLAIM)
    fleet.env["DURABLE_LOOP_STALL"] = "2:0.5"
    stalled = fleet.start_worker()
    del fleet.env["DURABLE_LOOP_STALL"]
    fleet.start_worker()
    sids = [(await start_session(store, load_spec_text(SPEC, "d.yaml", {"n": str(n)})))[0]
            for n in range(8)]
    log = fleet.logdir / "worker-1.log"

    async def stalls() -> bool:
        return log.read_text(errors="replace").count("loop stall drill") >= 3

    await wait_for(stalls, timeout_s=60, what="three stalls of the first worker")
    await wait_for(lambda: all_ended(store, sids), timeout_s=60, what="every session")
    assert stalled.poll() is None
    assert await store.declarations(0) == []
    for sid in sids:
        events = await trail(store, sid)
        committed_once(events, 3)
        assert not [f for f in events if f["type"] in ("worker_declared_dead",
                                                       "step_reclaimed")]


async def test_a_killed_durable_run_is_declared_dead_and_the_fleet_finishes_its_session(
        fleet_factory: Callable[..., Fleet], store: Store, tmp_path: Path) -> None:
    """`durable run` against a fleet's Redis beats like a worker. Killed while it holds
    a step, the fleet's worker finishes the session at once: it reads the step's entry
    as new (the run takes its entries without moving the group past them), or takes it
    from the run once it declares the run dead, whichever comes first; never after
    claim_idle_ms. (tests/integration/test_failover_in_process.py has the run's consumer
    declared dead holding an entry only a declaration frees, and declaring a worker dead.)"""
    fleet = fleet_factory(**NO_IDLE_CLAIM)
    breakpoints = StepBreakpoints(Path(fleet.env["DURABLE_BREAKPOINT_DIR"]))
    breakpoints.set("chain-research", "step:1")
    log = (tmp_path / "run.log").open("wb")
    run = subprocess.Popen([*durable_bin(), "run", str(EXAMPLES / "chain-research.yaml")],
                           cwd=REPO, env=fleet.env, stdout=log, stderr=subprocess.STDOUT)
    try:
        (hit,) = await breakpoints.wait("chain-research", "step:1")
        assert hit.pid == run.pid
        assert hit.worker in (await store.look_at_beats(0)).beats  # it beats
        os.kill(run.pid, signal.SIGKILL)
        run.wait(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()
    killed = time.time()
    breakpoints.clear("chain-research", "step:1")
    fleet.start_worker()

    async def declared() -> bool:
        return any(d.consumer == hit.worker for d in await store.declarations(0))

    await wait_for(lambda: all_ended(store, [hit.session]), timeout_s=60,
                   what="the fleet to finish the run's session")
    await wait_for(declared, timeout_s=60, what="the run to be declared dead")
    events = await trail(store, hit.session)
    committed_once(events, 3)
    (again,) = [f for f in events if f["step"] == "step:1"
                and f["type"] in ("step_started", "step_reclaimed") and f["worker"] != hit.worker]
    assert again["type"] == "step_started" or \
        again["detail"] == f"after {hit.worker} was declared dead"
    print(f"the run's step:1 started again {iso_s(again['at']) - killed:.2f}s after the "
          f"kill ({again['type']}), on a worker started at the kill")
