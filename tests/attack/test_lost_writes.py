"""A Redis that comes back without its last writes (a failover to a lagging replica, a
restart from an older snapshot): a worker plans no commit from a result it read before
and the store no longer holds. A real redis-server is snapshotted after step:0, commits
step:1, then is killed and restarted from that snapshot while step:2 runs."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from helpers import StepBreakpoints, random_prefix, start_redis, wait_for

from strands_durable.models import SessionStatus
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.connect import open_store
from strands_durable.store.outage import REDIS_DOWN, RedisOutage, outage_client_kwargs
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

CHAIN = """
version: 0
name: rewound
runtime:
  provider: scripted
  script:
    rules:
      - {reply: ok}
agents:
  a: {prompt: "You are a."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "one"}
      - {agent: a, input: "two after {{ last_response }}"}
      - {agent: a, input: "three after {{ last_response }}"}
"""
RDB_ONLY = ["--dbfilename", "dump.rdb"]  # snapshots taken by SAVE only: no AOF


async def test_a_step_run_from_a_lost_commit_runs_again_from_what_is_stored(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    workdir = tmp_path / "redis"
    workdir.mkdir()
    server = start_redis(RDB_ONLY, workdir=workdir)
    settings = DurableSettings(redis_url=server.url, key_prefix=random_prefix(),
                               claim_idle_ms=1000, read_block_ms=100, timer_poll_ms=50,
                               heartbeat_s=0.5, breakpoint_dir=str(tmp_path / "bp"))
    breakpoints = StepBreakpoints(tmp_path / "bp")
    outage = RedisOutage(300, "test")
    store = open_store(settings, **outage_client_kwargs(outage))
    reader = open_store(settings)
    await store.prepare()
    worker = StepConsumer(settings, store)
    worker.runner.redis_outages = lambda: outage.outages  # as worker/__init__.py wires it
    for step in ("step:1", "step:2"):
        breakpoints.set("rewound", step)
    await worker.start()
    try:
        sid, _ = await start_session(store, load_spec_text(CHAIN, "rewound.yaml"))
        await breakpoints.wait("rewound", "step:1")
        await reader.redis.save()  # the state a lagging replica would have: step:0 only
        lost_run = (await reader.results(sid))
        breakpoints.clear("rewound", "step:1")
        await breakpoints.wait("rewound", "step:2")  # step:1 committed; step:2 runs from it
        lost = {r.key: r for r in await reader.results(sid)}["step:1"]
        assert [r.key for r in lost_run] == ["step:0"]

        server.stop()  # kill -9: step:1's commit is gone with it
        server = start_redis(RDB_ONLY, workdir=workdir, port=server.port)
        # The worker has met the outage (its client counted it) before step:2 goes on:
        # then step:2's commit finds its history lost, whatever the machine's load.
        async def outage_seen() -> bool:
            return outage.outages >= 1

        await wait_for(outage_seen, timeout_s=60, what="the worker to meet the outage")
        with caplog.at_level(logging.WARNING, logger="durable.worker"):
            breakpoints.clear("rewound", "step:2")

            async def done() -> bool:
                try:
                    return (await reader.get_session(sid)).status == SessionStatus.COMPLETED
                except REDIS_DOWN:
                    return False  # this client reconnects on the next poll

            await wait_for(done, timeout_s=60, what="the rewound session to complete")
        results = await reader.results(sid)
        # What the worker plans later steps from is what is stored (step:2 rendered its
        # input from this step:1, not from the lost one).
        held = worker.runner.cache.get(sid, outage.outages).results
    finally:
        await worker.stop(grace_s=0)
        await store.redis.aclose()
        await reader.redis.aclose()
        server.stop()
    assert outage.outages >= 1
    # step:1 ran again; step:2 was planned from that run, not from the lost one.
    assert [r.key for r in results] == ["step:0", "step:1", "step:2"]
    by_key = {r.key: r for r in results}
    assert by_key["step:1"].committed_at != lost.committed_at
    assert by_key["step:2"].committed_at > by_key["step:1"].committed_at
    # The run of step:2 from the lost history was dropped, by whichever check met it
    # first: its commit's (the history it read is not what is stored) or its lease's
    # renewal (its entry, written after the snapshot, is gone), as the machine's load
    # orders them. The committed_at order above is what fails if it had committed.
    assert ("Redis lost commits this step was run from" in caplog.text
            or "step step:2: lease lost to another worker; abandoning" in caplog.text)
    assert held == by_key
