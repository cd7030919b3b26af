"""`durable run` runs its own session alone (issue 10, row 8): with DURABLE_REDIS_URL
set it used to host a full worker that read the shared consumer group, so it ran other
people's queued sessions in the CLI process with the CLI user's credentials. Now its
consumer takes its own session's entries by id and nothing else; if the CLI dies, a
worker of the fleet still takes its session over. Real redis-server, real `durable`
processes and a real `arq worker`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import REPO, wait_for
from helpers.api import chain_spec
from helpers.fleet import Fleet, durable_bin

from strands_durable.models import StepJob, now_ms
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.keys import CONSUMER_GROUP
from strands_durable.store.store import Store
from strands_durable.worker.session_consumer import SessionConsumer

pytestmark = pytest.mark.integration


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


async def untouched(store: Store, sid: str) -> None:
    """Queued and never started: no step ran, no consumer holds its entry."""
    record = await store.get_session(sid)
    assert record.status.value == "running" and record.steps_committed == 0, sid
    types = [f["type"] for _, f in await store.events(sid)]
    assert types == ["session_started", "step_scheduled"], (sid, types)
    stream = store.keys.stream(store.keys.shard(sid))
    entries = [(e, f) for e, f in await store.redis.xrange(stream) if f["sid"] == sid]
    assert len(entries) == 1, (sid, entries)
    entry_id = entries[0][0]
    assert await store.redis.xpending_range(stream, CONSUMER_GROUP, min=entry_id,
                                            max=entry_id, count=1) == []


async def test_run_leaves_other_queued_sessions_alone(
        fleet_factory, store: Store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fleet: Fleet = fleet_factory()  # no worker started: the three stay queued
    queued = [fleet.cli("submit", write(tmp_path, f"q{i}.yaml", chain_spec(2, name=f"q{i}"))
                        ).stdout.strip() for i in range(3)]
    mine = write(tmp_path, "mine.yaml", chain_spec(3, name="mine"))
    done = fleet.cli("run", mine, timeout=120)
    assert "completed in" in done.stdout, done.stdout
    for sid in queued:
        await untouched(store, sid)
    # The run's own consumer left the group behind it.
    consumers = await store.redis.xinfo_consumers(store.keys.stream(0), CONSUMER_GROUP)
    assert consumers == []


def test_a_fleet_worker_takes_over_the_session_of_a_dead_run(
        fleet_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fleet: Fleet = fleet_factory(claim_idle_ms=1500)
    spec = write(tmp_path, "three.yaml", chain_spec(3, name="three"))
    # The run dies (as kill -9 would) after admitting step:1, before running it.
    run = subprocess.run([*durable_bin(), "run", spec], cwd=REPO, capture_output=True,
                         text=True, timeout=120,
                         env={**fleet.env, "DURABLE_CRASH_AT": "after_gate:2"})
    assert run.returncode == 137, (run.stdout, run.stderr)
    sid = next(line.split()[1] for line in run.stdout.splitlines()
               if line.startswith("session "))
    history = fleet.cli_json("history", sid)
    run_consumer = next(e["worker"] for e in history if e["type"] == "step_started")
    assert [e["step"] for e in history if e["type"] == "step_completed"] == ["step:0"]
    fleet.start_worker()
    assert fleet.cli("wait", sid, "--timeout", "90").returncode == 0
    completed = {e["step"]: e["worker"] for e in fleet.cli_json("history", sid)
                 if e["type"] == "step_completed"}
    assert list(completed) == ["step:0", "step:1", "step:2"]
    assert completed["step:0"] == run_consumer
    assert run_consumer not in (completed["step:1"], completed["step:2"]), completed


async def test_the_run_consumer_takes_only_its_sessions_entries_and_timers(
        settings: DurableSettings, store: Store) -> None:
    """In one process: a session's entry held by a dead worker is re-claimed, due timers
    of another session stay where they are."""
    own, _ = await start_session(store, load_spec_text(chain_spec(2, name="own"), "o.yaml"))
    other, _ = await start_session(store, load_spec_text(chain_spec(2, name="oth"), "x.yaml"))
    stream = store.keys.stream(0)
    # A worker took both first entries and died.
    await store.redis.xreadgroup(CONSUMER_GROUP, "dead-worker", {stream: ">"}, count=10)
    timer = StepJob(session_id=other, key="step:9", agent="a", input="later")
    await store.redis.zadd(store.keys.timers(0), {timer.to_json(): now_ms() - 1000})
    consumer = SessionConsumer(settings, store, own)
    await consumer.start()
    try:
        async def completed() -> bool:
            return (await store.get_session(own)).status.value == "completed"

        await wait_for(completed, what="the run's session to complete")
    finally:
        await consumer.stop(grace_s=0)
    pending = await store.redis.xpending_range(stream, CONSUMER_GROUP, min="-", max="+",
                                               count=10)
    assert [(p["consumer"]) for p in pending] == ["dead-worker"]  # the other's entry
    assert (await store.get_session(other)).steps_committed == 0
    assert await store.redis.zscore(store.keys.timers(0), timer.to_json()) is not None
