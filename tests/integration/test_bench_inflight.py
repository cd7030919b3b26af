"""The bench's many-steps-in-flight row (bench/inflight.py) at a toy size: one real worker
process, run with its default settings (DURABLE_WORKER_CONCURRENCY not set), holds the step
of every session in flight at once, and arq (max_jobs = the sessions) makes the same calls.
Every chain's first step is held on a condition until all of them are in flight (ours at a
worker breakpoint, until its own gauge has counted them too; arq's jobs on a Redis key),
then let go, so the counts below are reached for certain, never by hoping a slow model call
outlasts the last start. Each step is committed once (run_ours raises otherwise). Counts
only, never a timing."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import RedisServer

from bench.inflight import run_inflight
from strands_durable.settings import DurableSettings

pytestmark = pytest.mark.integration

SESSIONS = 50
STEPS = 2


async def test_one_worker_with_its_defaults_holds_every_session_in_flight(
        redis_server: RedisServer, tmp_path: Path) -> None:
    row = await run_inflight(redis_server.url, redis_server.port, tmp_path, sessions=SESSIONS,
                             steps=STEPS, delay_s=0.0, concurrency=None, max_jobs=SESSIONS,
                             timeout_s=120, hold=tmp_path / "breakpoints")
    ours, arq = row.ours, row.arq
    # The worker ran with the default ceiling, and every session's first step was in
    # flight at once: counted exactly from the steps' own started and completed events,
    # and by the worker's own gauge, sampled while they were held.
    assert ours.concurrency == DurableSettings.model_fields["worker_concurrency"].default
    assert ours.peak_in_flight == SESSIONS
    assert ours.peak_gauge == SESSIONS
    assert ours.rss_peak >= ours.rss_idle > 0 and ours.cpu_s > 0
    # arq held its first steps the same way: max_jobs of them running at once, no more.
    assert arq is not None and arq.peak_in_flight == SESSIONS
    assert row.ratio is not None and row.ratio > 0
    assert len(row.lines()) > 3 and row.to_dict()["ours"]["sessions"] == SESSIONS
    assert row.targets() == []  # the goal's lines only at the goal's size
