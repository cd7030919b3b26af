"""The scheduler role on a real redis-server: one leader among replicas, failover,
max_duration_s pauses, stuck sessions flagged, timers promoted with no worker running."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import socket
import subprocess
import urllib.request
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from helpers import (
    REPO,
    StepBreakpoints,
    free_port,
    poll_until,
    start_redis,
    wait_for,
    wait_for_sync,
)
from helpers.fleet import durable_bin

from strands_durable import metrics
from strands_durable.models import Event, SessionStatus, StepJob, now_iso, now_ms
from strands_durable.scheduler.service import LOCK_NAME, SchedulerService
from strands_durable.scheduler.watchdog import STUCK_EVENT
from strands_durable.sessions.control import resume
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.connect import open_store
from strands_durable.store.keys import CONSUMER_GROUP
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration


def chain(steps: int, budgets: str = "") -> str:
    body = "".join(f"      - {{agent: a, input: \"step {i}\"}}\n" for i in range(steps))
    return f"""
version: 0
name: timed
runtime:
  provider: scripted
  {budgets}
agents:
  a: {{prompt: "You are a."}}
pattern:
  type: chain
  config:
    steps:
{body}"""


@pytest.fixture
def fast(settings: DurableSettings) -> DurableSettings:
    return settings.model_copy(update={"scheduler_lock_ttl_ms": 600, "scheduler_check_s": 0.1,
                                       "stuck_after_s": 1.0, "metrics_port": 0})


@asynccontextmanager
async def running(settings: DurableSettings) -> AsyncIterator[SchedulerService]:
    """A scheduler replica with its own Redis connections, run as a task."""
    store = open_store(settings)
    service = SchedulerService(settings, store)
    task = asyncio.create_task(service.run())
    try:
        yield service
    finally:
        service.stop()
        await asyncio.gather(task, return_exceptions=True)
        await store.redis.aclose()


async def new_session(store: Store, spec: str) -> str:
    sid, _ = await start_session(store, load_spec_text(spec, "timed.yaml"))
    return sid


async def events_of(store: Store, sid: str, kind: str) -> list[dict[str, str]]:
    return [f for _, f in await store.events(sid) if f["type"] == kind]


async def take_entry(store: Store, consumer: str = "ghost") -> tuple[str, StepJob]:
    """Deliver the oldest undelivered entry to `consumer` (a worker that will die)."""
    reply = await store.redis.xreadgroup(CONSUMER_GROUP, consumer,
                                         {store.keys.stream(0): ">"}, count=1)
    entry_id, fields = reply[0][1][0]
    return entry_id, StepJob.from_json(fields["job"])


# -- leadership ------------------------------------------------------------------------
async def test_one_leader_among_replicas_and_failover_on_stop(fast: DurableSettings) -> None:
    async with running(fast) as a, running(fast) as b:
        leader = await wait_for(lambda: _one_leader(a, b), what="a leader")
        assert (a.leading, b.leading).count(True) == 1
        standby = b if leader is a else a
        leader.stop()  # releases the lock: the standby takes over within a renewal period
        await wait_for(lambda: _leads(standby), what="the standby to lead")
        assert not leader.leading


async def _one_leader(*services: SchedulerService) -> SchedulerService | None:
    leaders = [s for s in services if s.leading]
    return leaders[0] if len(leaders) == 1 else None


async def _leads(service: SchedulerService) -> bool:
    return service.leading


async def test_a_replica_that_loses_the_lock_stops_acting(fast: DurableSettings,
                                                          store: Store) -> None:
    async with running(fast) as a:
        await wait_for(lambda: _leads(a), what="leadership")
        # Its lease lapsed and another replica took the lock (a long GC pause, say).
        lock_key = store.keys.lock(LOCK_NAME)
        await store.redis.set(lock_key, "someone-else", px=60_000)
        await wait_for(lambda: _not_leading(a), what="the replica to step down")
        sid = await new_session(store, chain(1))
        entry_id, job = await take_entry(store)
        await _retry_soon(store, job, entry_id)
        # Not the leader: it promotes nothing (and no worker runs here).
        assert await poll_until(lambda: _promoted(store, sid), timeout_s=1.0) is None
        await store.redis.delete(lock_key)  # the other replica went away
        await wait_for(lambda: _leads(a), what="leadership again")
        await wait_for(lambda: _promoted(store, sid), what="the timer promoted")


async def _not_leading(service: SchedulerService) -> bool:
    return not service.leading


async def test_a_redis_outage_is_one_line_down_and_one_line_back(
        fast: DurableSettings, caplog: pytest.LogCaptureFixture) -> None:
    """Every round fails while Redis is down (a timer round every 50 ms, a lock round
    every 200 ms here): the scheduler says so once, and once more when it is back, with
    how long it was down, as a worker does."""
    caplog.set_level(logging.INFO, logger="durable.scheduler")
    server = start_redis()
    settings = fast.model_copy(update={"redis_url": server.url})

    def redis_lines() -> list[logging.LogRecord]:
        return [r for r in caplog.records
                if r.name == "durable.scheduler" and "Redis" in r.getMessage()]

    async def said(text: str) -> bool:
        return any(text in r.getMessage() for r in redis_lines())

    try:
        async with running(settings) as service:
            await wait_for(lambda: _leads(service), what="leadership")
            server.stop()
            await wait_for(lambda: said("is unavailable"), what="the outage's line")
            # Its lease lapses only after many failed rounds of every loop.
            await wait_for(lambda: _not_leading(service), what="the lease to lapse")
            server = start_redis(port=server.port)
            await wait_for(lambda: said("is back"), what="the line saying Redis is back")
            await wait_for(lambda: _leads(service), what="leadership again")
    finally:
        server.stop()
    down, back = redis_lines()
    assert down.levelno == logging.WARNING and back.levelno == logging.INFO
    assert f"scheduler {service.name}: Redis at redis://127.0.0.1:{server.port}/0 is " \
        "unavailable" in down.getMessage()
    assert re.search(r"is back after \d+\.\ds$", back.getMessage()), back.getMessage()


# -- timers ------------------------------------------------------------------------------
async def _retry_soon(store: Store, job: StepJob, entry_id: str, in_ms: int = 200) -> None:
    """The attempt failed; its retry waits on the timer set."""
    await store.fail_step(job, entry_id, "ghost", retry_at_ms=now_ms() + in_ms,
                          error="boom", now_iso=now_iso(), now_ms=now_ms(),
                          events=[Event("step_failed", step=job.key, attempt=job.attempt)])


async def _promoted(store: Store, sid: str) -> bool:
    entries = await store.redis.xrange(store.keys.stream(0))
    return any(f["sid"] == sid and f["attempt"] == "2" for _, f in entries)


async def test_due_timers_are_promoted_with_no_worker_running(fast: DurableSettings,
                                                              store: Store) -> None:
    sid = await new_session(store, chain(2))
    entry_id, job = await take_entry(store)
    await _retry_soon(store, job, entry_id)
    assert await store.redis.zcard(store.keys.timers(0)) == 1
    before = metrics.TIMERS_PROMOTED._value.get()
    async with running(fast):
        await wait_for(lambda: _promoted(store, sid), timeout_s=10, what="the retry on the "
                       "stream")
    assert await store.redis.zcard(store.keys.timers(0)) == 0
    assert metrics.TIMERS_PROMOTED._value.get() - before == 1


# -- max_duration_s --------------------------------------------------------------------------
async def test_max_duration_pauses_a_session_whose_step_is_still_running(
        fast: DurableSettings, store: Store, breakpoints: StepBreakpoints) -> None:
    spec = chain(2, budgets="budgets: {max_duration_s: 1}")
    breakpoints.set("timed", "step:0")  # it runs on past the budget, until cleared
    sid = await new_session(store, spec)
    before = metrics.DURATION_PAUSES._value.get()
    worker = StepConsumer(fast, store)
    await worker.start()
    try:
        await breakpoints.wait("timed", "step:0")
        async with running(fast):
            await wait_for(lambda: _status_is(store, sid, SessionStatus.PAUSED), timeout_s=10,
                           what="the scheduler to pause the session")
            record = await store.get_session(sid)
            # Paused mid-step: a commit-time check could not have done it.
            assert record.steps_committed == 0
            assert record.paused_reason.startswith("budget max_duration_s exceeded")
            (paused,) = await events_of(store, sid, "session_paused")
            assert paused["worker"] == "scheduler"
            # Counted once check() returns: the pause may be read before that.
            await wait_for(lambda: _true(metrics.DURATION_PAUSES._value.get() - before >= 1),
                           timeout_s=10, what="the pause to be counted")
            assert metrics.DURATION_PAUSES._value.get() - before == 1
            # The running step still finishes and commits; the next one is held.
            breakpoints.clear("timed", "step:0")
            await wait_for(lambda: _committed(store, sid, 1), timeout_s=10,
                           what="the running step to commit")
            assert (await store.get_session(sid)).status == SessionStatus.PAUSED
            assert await store.redis.llen(store.keys.held(sid)) == 1
            await resume(store, sid, budget_sets={"max_duration_s": 600})
            await wait_for(lambda: _status_is(store, sid, SessionStatus.COMPLETED),
                           timeout_s=15, what="completion after raising the budget")
    finally:
        await worker.stop(grace_s=0)


async def _true(value: bool) -> bool:
    return value


async def _status_is(store: Store, sid: str, status: SessionStatus) -> bool:
    return (await store.get_session(sid)).status == status


async def _committed(store: Store, sid: str, n: int) -> bool:
    return (await store.get_session(sid)).steps_committed >= n


# -- stuck sessions ------------------------------------------------------------------------
async def test_stuck_sessions_are_flagged_once_and_busy_ones_are_not(
        fast: DurableSettings, store: Store) -> None:
    lost = await new_session(store, chain(1))
    lost_entry, _ = await take_entry(store)
    await store.ack(0, lost_entry)  # its only step vanished: nothing will move it again
    in_flight = await new_session(store, chain(1))
    in_flight_entry, _ = await take_entry(store)  # a worker is running it (slowly)
    timed = await new_session(store, chain(1))
    timed_entry, timed_job = await take_entry(store)
    await _retry_soon(store, timed_job, timed_entry, in_ms=600_000)  # a long backoff
    queued = await new_session(store, chain(1))  # waits for a worker: lag, not stuck
    flagged_before = metrics.STUCK_FLAGGED._value.get()

    async with running(fast) as service:
        await wait_for(lambda: _flagged(store, lost), timeout_s=10, what="the stuck flag")
        # A few more checks: one event per episode, however many checks see it.
        await wait_for(_checked_again(service, 3), timeout_s=10, what="more checks")
        assert len(await events_of(store, lost, STUCK_EVENT)) == 1
        for sid in (in_flight, timed, queued):
            assert await events_of(store, sid, STUCK_EVENT) == [], sid
        assert metrics.STUCK._value.get() == 1
        assert metrics.STUCK_FLAGGED._value.get() - flagged_before == 1
        (event,) = await events_of(store, lost, STUCK_EVENT)
        assert event["worker"] == "scheduler" and "no commit for" in event["detail"]
        # The running step's entry vanishes too: that session is flagged in its turn.
        await store.ack(0, in_flight_entry)
        await wait_for(lambda: _flagged(store, in_flight), timeout_s=10,
                       what="the second flag")
        await wait_for(_checked_again(service, 1), timeout_s=10, what="one more check")
        assert metrics.STUCK._value.get() == 2
    assert metrics.STUCK_FLAGGED._value.get() - flagged_before == 2


async def _flagged(store: Store, sid: str) -> bool:
    return bool(await events_of(store, sid, STUCK_EVENT))


def _checked_again(service: SchedulerService, n: int) -> Callable[[], object]:
    target = service.checks + n

    async def check() -> bool:
        return service.checks >= target

    return check


# -- `durable scheduler`, the process -----------------------------------------------------
def scrape(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            return str(r.read().decode())
    except OSError:
        return ""


def leads(port: int) -> bool:
    return "durable_scheduler_leader 1.0" in scrape(port)


@pytest.mark.e2e
def test_durable_scheduler_processes_fail_over_when_the_leader_is_killed(
        redis_server, prefix: str, tmp_path: Path) -> None:
    env = {**os.environ, "DURABLE_REDIS_URL": redis_server.url, "DURABLE_KEY_PREFIX": prefix,
           "DURABLE_SCHEDULER_LOCK_TTL_MS": "1000", "PYTHONUNBUFFERED": "1"}
    ports = [free_port(), free_port()]
    procs = [subprocess.Popen([*durable_bin(), "scheduler", "--metrics-port", str(port)],
                              cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                              stderr=(tmp_path / f"s{port}.log").open("wb"))
             for port in ports]
    try:
        wait_for_sync(lambda: sum(leads(p) for p in ports) == 1 and
                      all(scrape(p) for p in ports), what="one leader of two")
        leader = 0 if leads(ports[0]) else 1
        os.kill(procs[leader].pid, signal.SIGKILL)  # no release: the lock must expire
        procs[leader].wait(timeout=10)
        wait_for_sync(lambda: leads(ports[1 - leader]), timeout_s=10,
                      what="the standby to take over")
        # A graceful stop exits 0.
        procs[1 - leader].send_signal(signal.SIGTERM)
        assert procs[1 - leader].wait(timeout=20) == 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)


def test_durable_scheduler_refuses_bad_settings_clearly(redis_server, prefix: str) -> None:
    env = {**os.environ, "DURABLE_REDIS_URL": redis_server.url, "DURABLE_KEY_PREFIX": prefix}
    bad = subprocess.run([*durable_bin(), "scheduler"], cwd=REPO, capture_output=True,
                         text=True, env={**env, "DURABLE_STUCK_AFTER_S": "soon"}, timeout=60)
    assert bad.returncode == 2
    assert "DURABLE_STUCK_AFTER_S" in bad.stderr and "Traceback" not in bad.stderr
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = subprocess.run([*durable_bin(), "scheduler", "--metrics-port", str(port)],
                              cwd=REPO, capture_output=True, text=True, env=env, timeout=60)
    assert busy.returncode == 1
    assert f"metrics port {port}" in busy.stderr and "Traceback" not in busy.stderr
