"""Namespaces' quotas of model tokens per UTC day, on a real redis-server: the worker
counts each committed step's tokens once in its namespace's day (a step run again after
its worker died is counted once, by the commit that landed); a namespace whose day is
spent refuses a submit with a 429 naming the quota and when it resets, writing nothing;
with `over: queue` the session waits paused until the day turns (the clock injected);
`durable quotas set --tokens-per-day` refuses hostile values."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from fastapi import FastAPI
from helpers import claimed_job, wait_for
from helpers.api import TOKEN, asgi_client, chain_spec, error_of, make_app
from helpers.fleet import durable_bin
from prometheus_client import REGISTRY
from pydantic import ValidationError
from redis import Redis

from strands_durable.access import NAMESPACE_HEADER, QUEUED_FOR_QUOTA, NamespaceQuota
from strands_durable.models import SessionStatus, now_ms
from strands_durable.sessions.quotas import admit_queued
from strands_durable.sessions.start import in_namespace, new_session
from strands_durable.sessions.token_quota import DAY_MS, next_midnight_ms, utc_day
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.store import Store
from strands_durable.worker import step_commit
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration
TEAM = {NAMESPACE_HEADER: "team-t"}
SPEC = """
version: 0
name: tokens
runtime: {provider: scripted}
agents:
  a: {prompt: "You are a."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "one"}
      - {agent: a, input: "two after {{ last_response }}"}
"""


@pytest.fixture
def quota_app(settings: DurableSettings) -> FastAPI:
    return make_app(settings, api_token=TOKEN)


async def key_count(store: Store) -> int:
    return len([k async for k in store.redis.scan_iter(match=f"{store.keys.prefix}:*")])


def metric(namespace: str) -> float:
    return REGISTRY.get_sample_value("durable_namespace_tokens_total",
                                     {"namespace": namespace}) or 0.0


async def test_a_spent_day_refuses_a_submit_naming_the_quota_and_writes_nothing(
        quota_app: FastAPI, store: Store) -> None:
    await store.set_quota(NamespaceQuota(namespace="team-t", tokens_per_day=100))
    today = utc_day(now_ms())
    async with asgi_client(quota_app, token=TOKEN) as c:
        await store.add_tokens("team-t", today, 99)
        r = await c.post("/v1/sessions", json={"spec": chain_spec(1)}, headers=TEAM)
        assert r.status_code == 201  # 99 of 100: not yet spent
        await store.add_tokens("team-t", today, 1)
        before = await key_count(store)
        r = await c.post("/v1/sessions", json={"spec": chain_spec(1)}, headers=TEAM)
        err = error_of(r, 429)
        assert err["code"] == "quota_exceeded"
        assert err["details"]["quota"] == "tokens_per_day" and err["details"]["used"] == 100
        wait = int(r.headers["retry-after"])
        assert abs(wait - (next_midnight_ms(now_ms()) - now_ms()) / 1000) < 5
        assert await key_count(store) == before
        # Another namespace's day is its own.
        r = await c.post("/v1/sessions", json={"spec": chain_spec(1)})
        assert r.status_code == 201
    ttl = await store.redis.ttl(store.keys.quota_part("team-t", f"tokens:{today}"))
    assert DAY_MS / 1000 < ttl <= 2 * DAY_MS / 1000


async def test_queue_mode_waits_paused_until_the_day_turns(quota_app: FastAPI,
                                                           store: Store) -> None:
    await store.set_quota(NamespaceQuota(namespace="team-t", tokens_per_day=10,
                                         over="queue"))
    now = now_ms()
    await store.add_tokens("team-t", utc_day(now), 10)
    async with asgi_client(quota_app, token=TOKEN) as c:
        r = await c.post("/v1/sessions", json={"spec": chain_spec(1)}, headers=TEAM)
    assert r.status_code == 201 and r.json()["status"] == "paused"
    sid = r.json()["session_id"]
    assert (await store.get_session(sid)).paused_reason == QUEUED_FOR_QUOTA
    assert await admit_queued(store, at_ms=now) == 0  # still the same day
    assert (await store.get_session(sid)).status == SessionStatus.PAUSED
    assert await admit_queued(store, at_ms=next_midnight_ms(now)) == 1  # the day turned
    assert (await store.get_session(sid)).status == SessionStatus.RUNNING
    assert await store.queued_first("team-t", 10) == []


async def test_each_step_is_counted_once_across_a_worker_that_died(
        settings: DurableSettings, store: Store) -> None:
    before = metric("team-t")
    sid, _ = await store.create_session(
        in_namespace(new_session(load_spec_text(SPEC, "t.yaml")), "team-t"))
    # A worker took the first step and died before committing it: its run counts nothing;
    # the step runs again (reclaimed) and its one commit counts it.
    await claimed_job(store, sid, "dead-worker")
    worker = StepConsumer(settings, store)
    await worker.start()
    try:
        async def ended() -> bool:
            return (await store.get_session(sid)).status.is_terminal

        await wait_for(ended, timeout_s=60, what="session to end")
    finally:
        await worker.stop(grace_s=0)
    record = await store.get_session(sid)
    assert record.status == SessionStatus.COMPLETED
    results = await store.results(sid)
    spent = sum(r.input_tokens + r.output_tokens for r in results)
    assert spent > 0 and len(results) == 2
    used = await store.tokens_used("team-t", utc_day(now_ms()))
    assert used == spent
    assert metric("team-t") - before == spent
    # A commit that did not land (a zombie's stale one, a duplicate) counts nothing.
    spec = load_spec_text(SPEC, "t.yaml").spec
    step = results[0]
    for verdict in ("stale", "duplicate", "gone", "conflict"):
        await step_commit.commit_answered(store, spec, verdict, 0, step,
                                          {"namespace": "team-t"}, time.perf_counter())
    assert await store.tokens_used("team-t", utc_day(now_ms())) == spent


def test_hostile_values_are_refused_naming_the_field(settings: DurableSettings,
                                                      tmp_path: Path) -> None:
    env = {"DURABLE_REDIS_URL": settings.redis_url, "DURABLE_KEY_PREFIX": settings.key_prefix,
           "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}

    def durable(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*durable_bin(), "quotas", *args], env=env, capture_output=True,
                              text=True, timeout=120, check=False)

    for value in ("0", "-5", "abc", "1e30", str(10**13)):
        bad = durable("set", "team-t", "--tokens-per-day", value)
        assert bad.returncode == 2 and "--tokens-per-day" in bad.stdout + bad.stderr, value
    bad = durable("set", "team-t")
    assert bad.returncode == 2 and "--tokens-per-day" in bad.stdout + bad.stderr
    done = durable("set", "team-t", "--tokens-per-day", "5000", "--over", "queue")
    assert done.returncode == 0, done.stderr
    listed = durable("list", "--json").stdout.replace(" ", "")
    assert '"tokens_per_day":5000' in listed and '"tokens_today":0' in listed
    assert '"running_sessions":null' in listed
    table = durable("list").stdout
    assert "0 / 5000" in table
    # `durable submit` in a namespace whose day is spent: exit 1 naming the quota.
    done = durable("set", "team-t", "--tokens-per-day", "5000")
    assert done.returncode == 0, done.stderr
    redis = Redis.from_url(settings.redis_url)
    redis.set(f"{settings.key_prefix}:quota:team-t:tokens:{utc_day(now_ms())}", 5000)
    spec = tmp_path / "s.yaml"
    spec.write_text(chain_spec(1))
    refused = subprocess.run([*durable_bin(), "submit", str(spec), "--namespace", "team-t"],
                             env=env, capture_output=True, text=True, timeout=120,
                             check=False)
    assert refused.returncode == 1 and "quota" in refused.stdout + refused.stderr
    assert not redis.keys(f"{settings.key_prefix}:*:s:*")
    with pytest.raises(ValidationError, match="tokens_per_day"):
        NamespaceQuota(namespace="team-t", tokens_per_day=0)
    with pytest.raises(ValidationError):
        NamespaceQuota(namespace="team-t")
