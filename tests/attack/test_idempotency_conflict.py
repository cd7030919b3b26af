"""Idempotency keys bound to their request (issue 10, row 11): the same
Idempotency-Key with a different spec or different variables used to return the
first session silently. Now, as Stripe does, a key stands for one request: the same
request again answers the first session (200), a different one is refused with 409
saying so, and nothing is written. Real HTTP through the ASGI app and the real
`durable submit` on a real redis-server."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx
import pytest
import yaml
from helpers import REPO, RedisServer
from helpers.api import chain_spec, error_of
from helpers.attack import snapshot
from helpers.fleet import durable_bin

from strands_durable.store.store import Store

pytestmark = pytest.mark.integration

KEY = {"Idempotency-Key": "order-42"}


async def test_same_key_same_request_same_session_different_request_409(
        client: httpx.AsyncClient, store: Store) -> None:
    body = {"spec": chain_spec(2), "variables": {"topic": "tides"}}
    first = await client.post("/v1/sessions", json=body, headers=KEY)
    assert first.status_code == 201, first.text
    sid = first.json()["session_id"]
    again = await client.post("/v1/sessions", json=body, headers=KEY)
    assert again.status_code == 200 and again.json()["session_id"] == sid
    # The same spec sent as a JSON object is the same request.
    as_object = {**body, "spec": yaml.safe_load(body["spec"])}
    same = await client.post("/v1/sessions", json=as_object, headers=KEY)
    assert same.status_code == 200 and same.json()["session_id"] == sid

    before = await snapshot(store)
    for different in ({**body, "spec": chain_spec(3)},
                      {**body, "variables": {"topic": "waves"}},
                      {**body, "provider": "scripted", "script": {"delay_s": 1}}):
        err = error_of(await client.post("/v1/sessions", json=different, headers=KEY), 409)
        assert err["code"] == "idempotency_key_reused"
        assert "different request" in err["message"] and "order-42" in err["message"]
        assert sid not in err["message"]  # the key's holder learns nothing new
    assert await snapshot(store) == before
    assert [r.session_id for r in await store.list_sessions()] == [sid]


async def test_a_key_stored_before_digests_were_kept_still_answers_its_session(
        client: httpx.AsyncClient, store: Store) -> None:
    first = await client.post("/v1/sessions", json={"spec": chain_spec(1)},
                              headers={"Idempotency-Key": "old"})
    sid = first.json()["session_id"]
    # What earlier versions wrote: the bare session id.
    await store.redis.set(store.keys.idempotency(store.keys.shard(sid), "old"), sid)
    again = await client.post("/v1/sessions", json={"spec": chain_spec(3)},
                              headers={"Idempotency-Key": "old"})
    assert again.status_code == 200 and again.json()["session_id"] == sid


def durable(redis_server: RedisServer, prefix: str, *args: str
            ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DURABLE_REDIS_URL": redis_server.url, "DURABLE_KEY_PREFIX": prefix}
    return subprocess.run([*durable_bin(), *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60)


async def test_cli_submit_with_a_reused_key_and_another_request_exits_2(
        redis_server: RedisServer, prefix: str, store: Store, tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(chain_spec(2))
    submit = ("submit", str(spec), "--idempotency-key", "nightly-7")
    first = durable(redis_server, prefix, *submit, "--var", "topic=tides")
    assert first.returncode == 0, first.stderr
    sid = first.stdout.strip()
    again = durable(redis_server, prefix, *submit, "--var", "topic=tides")
    assert again.returncode == 0 and again.stdout.strip() == sid
    before = await snapshot(store)
    other = durable(redis_server, prefix, *submit, "--var", "topic=waves")
    assert other.returncode == 2, (other.stdout, other.stderr)
    assert "different request" in other.stderr and "Traceback" not in other.stderr
    assert other.stdout == ""
    spec.write_text(chain_spec(3))
    changed = durable(redis_server, prefix, *submit, "--var", "topic=tides")
    assert changed.returncode == 2 and "different request" in changed.stderr
    assert await snapshot(store) == before
