"""Namespaces' quotas of sessions not yet ended, on a real redis-server through the real
ASGI app: over the quota a submit is refused with a 429 and writes nothing; places come
back when sessions end (or a submit died midway); concurrent submits never overshoot;
`over: queue` creates the session paused and the scheduler's round resumes it once a
place is free; `durable quotas` sets, lists and deletes them."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from helpers.api import TOKEN, asgi_client, chain_spec, error_of, make_app
from helpers.fleet import durable_bin

from strands_durable.access import NAMESPACE_HEADER, QUEUED_FOR_QUOTA, NamespaceQuota
from strands_durable.sessions import control
from strands_durable.sessions.quotas import STALE_RESERVATION_MS, admit_queued
from strands_durable.settings import DurableSettings
from strands_durable.store.store import Store

pytestmark = pytest.mark.integration
TEAM = {NAMESPACE_HEADER: "team-a"}


@pytest.fixture
def quota_app(settings: DurableSettings) -> FastAPI:
    return make_app(settings, api_token=TOKEN)


async def submit(client: httpx.AsyncClient, name: str = "q") -> httpx.Response:
    return await client.post("/v1/sessions", json={"spec": chain_spec(2, name=name)},
                             headers=TEAM)


async def session_count(store: Store) -> int:
    """Sessions' meta hashes in Redis (the keys that are exactly `<tag>:s:<id>`)."""
    count = 0
    async for key in store.redis.scan_iter(match=f"{store.keys.prefix}:*:s:*", count=1000):
        name = key.decode() if isinstance(key, bytes) else key
        count += name.rsplit(":s:", 1)[1].count(":") == 0
    return count


async def test_over_the_quota_a_submit_is_refused_and_writes_nothing(
        quota_app: FastAPI, store: Store) -> None:
    await store.set_quota(NamespaceQuota(namespace="team-a", running_sessions=2))
    async with asgi_client(quota_app, token=TOKEN) as c:
        first = (await submit(c)).json()["session_id"]
        assert (await submit(c)).status_code == 201
        before = await session_count(store)
        assert before >= 2
        r = await submit(c)
        err = error_of(r, 429)
        assert err["code"] == "quota_exceeded" and err["details"]["namespace"] == "team-a"
        assert r.headers["retry-after"]
        assert await session_count(store) == before
        # Another namespace, and the default one, are not counted against team-a.
        r = await c.post("/v1/sessions", json={"spec": chain_spec(1)})
        assert r.status_code == 201
        # A session that ends gives its place back.
        await control.cancel(store, first)
        assert (await submit(c)).status_code == 201
        assert error_of(await submit(c), 429)["code"] == "quota_exceeded"


async def test_a_reservation_left_by_a_dead_submit_is_given_back(quota_app: FastAPI,
                                                                store: Store) -> None:
    await store.set_quota(NamespaceQuota(namespace="team-a", running_sessions=1))
    old = 1_000  # a reservation from long ago: its submit died between reserve and create
    assert await store.reserve_place("team-a", "r:dead", 1, old)
    async with asgi_client(quota_app, token=TOKEN) as c:
        assert (await submit(c)).status_code == 201
    places = dict(await store.active_places("team-a"))
    assert "r:dead" not in places and len(places) == 1
    assert STALE_RESERVATION_MS < 10 ** 9


async def test_concurrent_submits_never_overshoot_the_quota(quota_app: FastAPI,
                                                            store: Store) -> None:
    await store.set_quota(NamespaceQuota(namespace="team-a", running_sessions=3))
    async with asgi_client(quota_app, token=TOKEN) as c:
        # 9: the render stage takes 10 at once (2 workers, 8 waiting); more get a 503.
        answers = await asyncio.gather(*(submit(c, name=f"q{i}") for i in range(9)))
    codes = sorted(r.status_code for r in answers)
    assert codes == [201] * 3 + [429] * 6, codes
    assert len(await store.active_places("team-a")) == 3


async def test_over_the_quota_with_queue_the_session_waits_then_runs(
        quota_app: FastAPI, store: Store) -> None:
    await store.set_quota(NamespaceQuota(namespace="team-a", running_sessions=1,
                                         over="queue"))
    async with asgi_client(quota_app, token=TOKEN) as c:
        first = (await submit(c)).json()["session_id"]
        r = await submit(c)
        assert r.status_code == 201 and r.json()["status"] == "paused"
        queued = r.json()["session_id"]
        doc = (await c.get(f"/v1/sessions/{queued}", headers=TEAM)).json()
        assert doc["paused_reason"] == QUEUED_FOR_QUOTA
        assert await admit_queued(store) == 0  # no place yet
        assert (await store.get_session(queued)).status.value == "paused"
        await control.cancel(store, first)
        assert await admit_queued(store) == 1
        assert (await store.get_session(queued)).status.value == "running"
        assert await store.queued_first("team-a", 10) == []
        # A queued session resumed by hand is simply no longer queued.
        third = (await submit(c)).json()["session_id"]
        await control.cancel(store, third)
        assert await admit_queued(store) == 0
        assert await store.queued_first("team-a", 10) == []


def test_durable_quotas_set_list_delete(settings: DurableSettings, tmp_path: Path) -> None:
    env = {"DURABLE_REDIS_URL": settings.redis_url, "DURABLE_KEY_PREFIX": settings.key_prefix,
           "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}

    def durable(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*durable_bin(), *args], env=env, capture_output=True,
                              text=True, timeout=120, check=False)

    done = durable("quotas", "set", "team-a", "--running-sessions", "5", "--over", "queue")
    assert done.returncode == 0, done.stderr
    listed = durable("quotas", "list", "--json")
    assert '"running_sessions":5' in listed.stdout.replace(" ", "")
    done = durable("quotas", "set", "team-b", "--weight", "3", "--steps-in-flight", "40")
    assert done.returncode == 0, done.stderr
    assert "at most 40 step(s) in flight; weight 3" in done.stdout
    listed = json.loads(durable("quotas", "list", "--json").stdout)
    assert [(q["weight"], q["steps_in_flight"]) for q in listed] == [(None, None), (3, 40)]
    bad = durable("quotas", "set", "team-b", "--weight", "0")
    assert bad.returncode == 2 and "--weight" in bad.stdout + bad.stderr
    bad = durable("quotas", "set", "Team A", "--running-sessions", "5")
    assert bad.returncode == 2 and "Team A" in bad.stdout + bad.stderr
    bad = durable("quotas", "set", "team-a", "--running-sessions", "5", "--over", "drop")
    assert bad.returncode == 2 and "--over" in bad.stdout + bad.stderr
    assert durable("quotas", "delete", "team-a").returncode == 0
    gone = durable("quotas", "delete", "team-a")
    assert gone.returncode == 1 and "no quota" in gone.stdout + gone.stderr
    trail = durable("audit", "--namespace", "team-a", "--json").stdout
    assert "quota_set" in trail and "quota_drop" in trail
