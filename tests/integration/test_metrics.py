"""Metrics on a real redis-server: what workers observe, and the fleet read from Redis.

Process metrics live in prometheus-client's global registry, shared by every test of
this process, so each check compares a sample before and after the work it causes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request

import pytest
from helpers import StepBreakpoints, free_port, wait_for
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from redis import Redis as SyncRedis

from strands_durable import metrics
from strands_durable.errors import SessionNotFound
from strands_durable.models import SessionStatus, StepJob, now_ms
from strands_durable.sessions.control import pause, resume
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.connect import open_store
from strands_durable.store.keys import CONSUMER_GROUP
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration


def chain(steps: int, delay: float = 0.0, extra: str = "", agent: str = "a") -> str:
    body = "".join(f"      - {{agent: {agent}, input: \"step {i} of three words\"}}\n"
                   for i in range(steps))
    return f"""
version: 0
name: metered
runtime:
  provider: scripted
  script: {{delay_s: {delay}}}
  {extra}
agents:
  {agent}: {{prompt: "You are {agent}."}}
pattern:
  type: chain
  config:
    steps:
{body}"""


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


class Delta:
    """Samples of the global registry, before the work under test."""

    def __init__(self, *keys: tuple[str, dict[str, str]]) -> None:
        self.before = {(n, tuple(sorted(lb.items()))): sample(n, **lb) for n, lb in keys}

    def __call__(self, name: str, **labels: str) -> float:
        return sample(name, **labels) - self.before[(name, tuple(sorted(labels.items())))]


async def ended(store: Store, sid: str) -> bool:
    return (await store.get_session(sid)).status.is_terminal


# -- process metrics -------------------------------------------------------------------
async def test_committed_steps_are_counted_timed_and_sized(
        store: Store, consumer: StepConsumer) -> None:
    agent = "meter_agent_1"
    labels = {"pattern": "chain", "agent": agent}
    delta = Delta(("durable_steps_total", {**labels, "outcome": "completed"}),
                  ("durable_step_duration_seconds_count", labels),
                  ("durable_tokens_total", {"agent": agent, "direction": "input"}),
                  ("durable_tokens_total", {"agent": agent, "direction": "output"}),
                  ("durable_checkpoint_commit_seconds_count", {}),
                  ("durable_checkpoint_bytes_count", {}),
                  ("durable_checkpoint_bytes_sum", {}))
    # Steps that take a little time, for the duration metric; nothing waits on it.
    sid, _ = await start_session(store, load_spec_text(chain(3, 0.05, agent=agent), "m.yaml"))
    await wait_for(lambda: ended(store, sid), what="the session to end")
    usage = (await store.get_session(sid)).token_usage
    assert delta("durable_steps_total", **labels, outcome="completed") == 3
    assert delta("durable_step_duration_seconds_count", **labels) == 3
    assert sample("durable_step_duration_seconds_sum", **labels) >= 3 * 0.05
    assert delta("durable_tokens_total", agent=agent, direction="input") == \
        usage.total_input_tokens
    assert delta("durable_tokens_total", agent=agent, direction="output") == \
        usage.total_output_tokens
    assert delta("durable_checkpoint_commit_seconds_count") >= 3  # conflicts re-commit
    assert delta("durable_checkpoint_bytes_count") == 3
    # Each checkpoint carries at least its result JSON and the state twice.
    assert delta("durable_checkpoint_bytes_sum") > 3 * 200


async def test_failed_steps_count_as_retried_then_failed(
        store: Store, consumer: StepConsumer) -> None:
    agent = "meter_flaky"
    spec = chain(1, agent=agent).replace(
        "script: {delay_s: 0.0}",
        "failure_policy: {retries: 1, backoff: constant, wait_min: 0, wait_max: 0}\n"
        "  script: {rules: [{error: 'rate limited'}]}")
    labels = {"pattern": "chain", "agent": agent}
    delta = Delta(("durable_steps_total", {**labels, "outcome": "retried"}),
                  ("durable_steps_total", {**labels, "outcome": "failed"}))
    sid, _ = await start_session(store, load_spec_text(spec, "flaky.yaml"))
    await wait_for(lambda: ended(store, sid), what="the session to fail")
    assert (await store.get_session(sid)).status == SessionStatus.FAILED
    assert delta("durable_steps_total", **labels, outcome="retried") == 1
    assert delta("durable_steps_total", **labels, outcome="failed") == 1


async def test_reclaims_and_dead_letters_are_counted(
        settings: DurableSettings, store: Store) -> None:
    delta = Delta(("durable_steps_reclaimed_total", {}), ("durable_dead_letters_total", {}))
    sid, _ = await start_session(store, load_spec_text(chain(1), "m.yaml"))
    # A worker that died holding the step: it is re-claimed once it idles out.
    await store.redis.xreadgroup(CONSUMER_GROUP, "ghost", {store.keys.stream(0): ">"})
    c = StepConsumer(settings, store)
    await c.start()
    try:
        await wait_for(lambda: ended(store, sid), what="the re-claimed step to commit")
    finally:
        await c.stop(grace_s=0)
    assert delta("durable_steps_reclaimed_total") == 1
    assert delta("durable_dead_letters_total") == 0

    # Delivered more often than max_deliveries allows: dead-lettered, not run.
    sid, _ = await start_session(store, load_spec_text(chain(1), "m.yaml"))
    await store.redis.xreadgroup(CONSUMER_GROUP, "ghost", {store.keys.stream(0): ">"})
    c = StepConsumer(settings.model_copy(update={"max_deliveries": 1}), store)
    await c.start()
    try:
        await wait_for(lambda: ended(store, sid), what="the entry to be dead-lettered")
    finally:
        await c.stop(grace_s=0)
    assert (await store.get_session(sid)).status == SessionStatus.FAILED
    assert delta("durable_dead_letters_total") == 1
    assert delta("durable_steps_reclaimed_total") == 1


async def test_resume_latency_is_observed_for_resumes_that_happen(
        store: Store, consumer: StepConsumer, breakpoints: StepBreakpoints) -> None:
    delta = Delta(("durable_resume_seconds_count", {}))
    breakpoints.set("metered", "step:1")  # still running when paused, however fast
    sid, _ = await start_session(store, load_spec_text(chain(3), "m.yaml"))
    await breakpoints.wait("metered", "step:1")
    await pause(store, sid)
    breakpoints.clear("metered", "step:1")
    with pytest.raises(SessionNotFound):
        await resume(store, sid[:-1] + ("1" if sid[-1] == "0" else "0"))  # not observed
    await resume(store, sid)
    assert delta("durable_resume_seconds_count") == 1
    await wait_for(lambda: ended(store, sid), what="completion")


# -- the fleet, read from Redis ---------------------------------------------------------
def beat(name: str, last_seen_ms: int) -> str:
    return json.dumps({"consumer": name, "last_seen_ms": last_seen_ms})


async def make_backlog(store: Store, sessions: int, delivered: int) -> list[str]:
    sids = [(await start_session(store, load_spec_text(chain(2), "m.yaml")))[0]
            for _ in range(sessions)]
    if delivered:
        await store.redis.xreadgroup(CONSUMER_GROUP, "someone",
                                     {store.keys.stream(0): ">"}, count=delivered)
    return sids


async def test_fleet_snapshot_reads_lag_pending_timers_sessions_workers(
        settings: DurableSettings, store: Store) -> None:
    sids = await make_backlog(store, sessions=5, delivered=2)
    await pause(store, sids[0])
    job = StepJob(session_id=sids[1], key="step:9", agent="a", input="x")
    await store.redis.zadd(store.keys.timers(0), {job.to_json(): now_ms() - 10})
    later = StepJob(session_id=sids[1], key="step:8", agent="a", input="x")
    await store.redis.zadd(store.keys.timers(0), {later.to_json(): now_ms() + 600_000})
    await store.redis.xadd(store.keys.dead(0), {"sid": sids[2], "error": "x"})
    await store.redis.hset(store.keys.workers(), mapping={
        "w-alive": beat("w-alive", now_ms()), "w-dead": beat("w-dead", now_ms() - 60_000),
        "w-garbled": "not json"})

    reader = metrics.FleetReader(store.keys, heartbeat_s=settings.heartbeat_s, max_age_s=0)
    snap = await reader.read(store)
    assert snap.ok
    (shard,) = snap.shards
    assert (shard.pending, shard.lag) == (2, 3)
    assert (shard.timers_due, shard.timers, shard.dead) == (1, 2, 1)
    assert snap.sessions == {"running": 4, "paused": 1, "completed": 0, "failed": 0,
                             "cancelled": 0}
    assert (snap.workers_alive, snap.workers_known) == (1, 3)

    # The sync read (the scheduler's scrape thread) sees the same.
    sync = SyncRedis.from_url(settings.redis_url, decode_responses=True)
    try:
        again = reader.read_sync(sync)
    finally:
        sync.close()
    assert (again.shards, again.sessions, again.workers_alive) == \
        (snap.shards, snap.sessions, snap.workers_alive)


async def test_acknowledged_and_deleted_entries_leave_the_lag_right(store: Store) -> None:
    """Acknowledged entries are deleted (XDEL); the lag must still count only the
    undelivered ones, whether Redis reports it or it is derived."""
    await make_backlog(store, sessions=4, delivered=3)
    stream = store.keys.stream(0)
    pending = await store.redis.xpending_range(stream, CONSUMER_GROUP, "-", "+", 10)
    await store.ack(0, pending[0]["message_id"])
    snap = await metrics.FleetReader(store.keys, 5.0, max_age_s=0).read(store)
    assert (snap.shards[0].pending, snap.shards[0].lag) == (2, 1)


async def test_every_shard_is_reported(redis_server, prefix: str) -> None:
    settings = DurableSettings(redis_url=redis_server.url, key_prefix=prefix, shards=3)
    store = open_store(settings)
    await store.prepare()
    try:
        for _ in range(6):
            await start_session(store, load_spec_text(chain(1), "m.yaml"))
        snap = await metrics.FleetReader(store.keys, 5.0, max_age_s=0).read(store)
        assert [s.shard for s in snap.shards] == [0, 1, 2]
        assert sum(s.lag for s in snap.shards) == 6
        per_shard = [await store.redis.xlen(store.keys.stream(k)) for k in range(3)]
        assert [s.lag for s in snap.shards] == per_shard
    finally:
        await store.redis.aclose()


async def test_fleet_read_is_cached_for_max_age(store: Store) -> None:
    reader = metrics.FleetReader(store.keys, 5.0, max_age_s=60)
    first = await reader.read(store)
    await make_backlog(store, sessions=2, delivered=0)
    assert await reader.read(store) is first
    assert (await metrics.FleetReader(store.keys, 5.0, max_age_s=0).read(store)
            ).shards[0].lag == 2


async def test_redis_down_still_answers_with_redis_up_zero() -> None:
    settings = DurableSettings(redis_url=f"redis://127.0.0.1:{free_port()}/0")
    store = open_store(settings)
    try:
        body = (await metrics.render_api_metrics(store, heartbeat_s=5.0)).decode()
    finally:
        await store.redis.aclose()
    assert "durable_redis_up 0.0" in body
    assert "durable_stream_lag" not in body


# -- exposition ----------------------------------------------------------------------------
def promtool_check(body: str) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (apt-get install prometheus)")
    result = subprocess.run([promtool, "check", "metrics"], input=body, text=True,
                            capture_output=True, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr


def families(body: str) -> dict[str, object]:
    return {f.name: f for f in text_string_to_metric_families(body)}


async def test_api_metrics_hold_process_and_fleet_metrics(
        store: Store, consumer: StepConsumer) -> None:
    sid, _ = await start_session(store, load_spec_text(chain(2), "m.yaml"))
    await wait_for(lambda: ended(store, sid), what="completion")
    body = (await metrics.render_api_metrics(store)).decode()
    found = families(body)
    for name in ("durable_steps", "durable_step_duration_seconds",
                 "durable_checkpoint_commit_seconds", "durable_checkpoint_bytes",
                 "durable_steps_reclaimed", "durable_dead_letters", "durable_tokens",
                 "durable_resume_seconds", "durable_stream_pending", "durable_stream_lag",
                 "durable_timers_due", "durable_sessions", "durable_workers_alive",
                 "durable_redis_up"):
        assert name in found, name
    assert 'durable_sessions{status="completed"} 1.0' in body
    assert "durable_workers_alive 1.0" in body  # the in-process consumer's heartbeat
    assert sid not in body  # no session ids as labels
    promtool_check(body)


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode())


async def test_worker_metrics_server_serves_and_survives_a_taken_port(
        caplog: pytest.LogCaptureFixture) -> None:
    class Busy:
        running = 3
        slot_limit = 5

    port = free_port()
    server = metrics.start_worker_metrics(port, Busy(), concurrency=8)
    assert server is not None
    try:
        body = get(f"http://127.0.0.1:{port}/metrics")
        assert "durable_worker_up 1.0" in body
        assert "durable_worker_running_steps 3.0" in body
        assert "durable_worker_concurrency 8.0" in body
        assert "durable_worker_step_slots 5.0" in body
        assert "durable_stream_lag" not in body  # workers do not repeat the fleet gauges
        promtool_check(body)
        # A second worker on the same host and port runs on, without /metrics.
        assert metrics.start_worker_metrics(port, Busy(), concurrency=8) is None
        assert "cannot listen on port" in caplog.text
    finally:
        metrics.stop_worker_metrics(server)
    assert sample("durable_worker_up") == 0


async def test_scheduler_metrics_server_reads_the_fleet_at_scrape_time(
        settings: DurableSettings, store: Store) -> None:
    port = free_port()
    server = metrics.start_fleet_metrics(port, settings.redis_url, store.keys, 5.0)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        assert 'durable_stream_lag{shard="0"} 0.0' in get(url)
        await make_backlog(store, sessions=3, delivered=0)

        async def lag_is_three() -> bool:
            return 'durable_stream_lag{shard="0"} 3.0' in get(url)

        await wait_for(lag_is_three, what="the scrape to read the new lag")
        promtool_check(get(url))
    finally:
        server.close()


def test_labels_from_specs_are_capped() -> None:
    from strands_durable.metrics.process import CappedLabels

    label = CappedLabels(2)
    assert [label(a) for a in ("x", "y", "z", "x", "")] == ["x", "y", "other", "x", "other"]
    assert label("q" * 100) == "other"
    assert metrics.agent_label("a" * 100) == "a" * 64  # the agent ids' own, 64 characters


def test_checkpoint_bytes_counts_what_the_commit_writes() -> None:
    from strands_durable.models import StepResult
    from strands_durable.store.store import commit_bytes

    job = StepJob(session_id="s", key="step:0", agent="a", input="x")
    small = commit_bytes(StepResult(key="step:0", agent="a", response="r").to_json(),
                         json.dumps({}), [], [], {})
    big = commit_bytes(StepResult(key="step:0", agent="a", response="r" * 1000).to_json(),
                       json.dumps({"k": "v" * 500}), [], [job.to_json()],
                       {"out.md": "z" * 300})
    grown = big - small
    assert grown >= 999 + 2 * 500 + len(job.to_json()) + 300

