"""Key confusion (issue 10, row 6): an id from outside names one thing only. A session
id is a UUID and nothing else: `<sid>:results` used to delete the real session's
results (CLI exit 0, HTTP 204) and `<sid>:events` to answer a WRONGTYPE traceback or
500. Now every entry point refuses it, the real `durable` CLI with exit 2 naming it,
HTTP with a 422 in the error envelope, and the store itself, with nothing in Redis
changed. Step keys, idempotency keys, checkpoint numbers, artifact names and agent ids
are bounded the same way."""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator

import httpx
import pytest
from helpers import REPO, RedisServer, wait_for
from helpers.api import chain_spec, error_of
from helpers.attack import snapshot
from helpers.fleet import durable_bin

from strands_durable.errors import DurableError
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

# Every per-session key is the meta key plus one of these: each was a way in.
SUFFIXES = ("results", "artifacts", "events", "order", "checkpoints", "convs", "failed",
            "held", "conv:a")


@pytest.fixture
async def finished(settings: DurableSettings, store: Store) -> AsyncIterator[str]:
    """A completed session with results, artifacts, checkpoints, events and a
    conversation: everything an attack could hit."""
    consumer = StepConsumer(settings, store)
    await consumer.start()
    try:
        sid, _ = await start_session(store, load_spec_text(chain_spec(2), "spec.yaml"))

        async def completed() -> bool:
            return (await store.get_session(sid)).status.value == "completed"

        await wait_for(completed, what="the session to complete")
    finally:
        await consumer.stop(grace_s=0)
    assert await store.artifacts(sid) and len(await store.results(sid)) == 2
    yield sid


def durable(redis_server: RedisServer, prefix: str, *args: str
            ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DURABLE_REDIS_URL": redis_server.url, "DURABLE_KEY_PREFIX": prefix}
    return subprocess.run([*durable_bin(), *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60)


def assert_usage_error(done: subprocess.CompletedProcess[str], bad: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert repr(bad)[:40] in done.stderr.replace("\n", ""), done.stderr


async def test_cli_refuses_a_session_id_naming_another_key(
        redis_server: RedisServer, prefix: str, store: Store, finished: str) -> None:
    before = await snapshot(store)
    for suffix in SUFFIXES:
        bad = f"{finished}:{suffix}"
        assert_usage_error(durable(redis_server, prefix, "sessions", "delete", bad), bad)
    bad = f"{finished}:results"
    for command in (["sessions", "show"], ["status"], ["history"], ["checkpoints"],
                    ["pause"], ["cancel"], ["resume"], ["requeue"], ["wait"], ["watch"]):
        assert_usage_error(durable(redis_server, prefix, *command, bad), bad)
    for bad in (finished.upper(), f" {finished}", "*", ""):
        assert_usage_error(durable(redis_server, prefix, "sessions", "delete", bad), bad)
    assert await snapshot(store) == before
    # and the real id still works.
    shown = durable(redis_server, prefix, "status", finished, "--json")
    assert shown.returncode == 0 and '"completed"' in shown.stdout


BAD_IDS = [f"SID:{s}" for s in SUFFIXES] + ["SID-upper", "SIDx", "*", "{s0}", "x" * 5000]
ROUTES = [("GET", ""), ("GET", "/events"), ("GET", "/events?follow=1"),
          ("GET", "/artifacts"), ("GET", "/artifacts/plain-report.md"),
          ("GET", "/checkpoints"), ("GET", "/checkpoints/1"), ("DELETE", ""),
          ("POST", "/pause"), ("POST", "/cancel"), ("POST", "/resume"),
          ("POST", "/signal"), ("POST", "/requeue")]


def bad_id(template: str, sid: str) -> str:
    return sid.upper() if template == "SID-upper" else template.replace("SID", sid)


async def test_http_answers_422_for_a_session_id_naming_another_key(
        client: httpx.AsyncClient, store: Store, finished: str) -> None:
    before = await snapshot(store)
    for template in BAD_IDS:
        bad = bad_id(template, finished)
        for method, tail in ROUTES:
            body = {"response": "yes"} if tail == "/signal" else None
            r = await client.request(method, f"/v1/sessions/{bad}{tail}", json=body)
            err = error_of(r, 422)
            assert "session id" in err["message"] and "UUID" in err["message"], err
    assert await snapshot(store) == before
    assert (await client.get(f"/v1/sessions/{finished}")).json()["status"] == "completed"


async def test_the_store_refuses_what_is_not_a_session_id(store: Store, finished: str
                                                          ) -> None:
    """The internal guard: code that skipped the edge's check still cannot name a key."""
    before = await snapshot(store)
    for suffix in SUFFIXES:
        bad = f"{finished}:{suffix}"
        for call in (store.delete_session(bad), store.get_session(bad), store.events(bad),
                     store.artifacts(bad), store.results(bad), store.checkpoints(bad)):
            with pytest.raises(DurableError, match="session id"):
                await call
    with pytest.raises(DurableError, match="conversation lane"):
        await store.conversation(finished, "a\nb", 10)
    with pytest.raises(DurableError, match="idempotency key"):
        store.keys.idempotency(0, "a b")
    assert await snapshot(store) == before


def test_a_consumer_name_is_bounded(settings: DurableSettings, store: Store) -> None:
    for bad in ("a b", "x" * 300, "tab\there"):
        with pytest.raises(DurableError, match="consumer name"):
            StepConsumer(settings, store, name=bad)


async def test_other_ids_are_bounded_at_the_edges(
        redis_server: RedisServer, prefix: str, client: httpx.AsyncClient, store: Store,
        finished: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    before = await snapshot(store)
    # Step keys (`requeue --step`, the requeue body): no control characters, bounded.
    for step in ("step:0\nstep:1", "s" * 600):
        assert_usage_error(durable(redis_server, prefix, "requeue", finished, "--step", step),
                           step)
        err = error_of(await client.post(f"/v1/sessions/{finished}/requeue",
                                         json={"step": step}), 422)
        assert "step" in err["message"]
    # Idempotency keys: 1-255 printable ASCII characters without spaces.
    spec = tmp_path / "spec.yaml"
    spec.write_text(chain_spec(1))
    for key in ("a b", "k" * 256, "tab\there"):
        assert_usage_error(durable(redis_server, prefix, "submit", str(spec),
                                   "--idempotency-key", key), key)
    for key in ("a b", "caf\u00e9"):
        err = error_of(await client.post("/v1/sessions", json={"spec": chain_spec(1)},
                                         headers={"Idempotency-Key": key.encode()}), 422)
        assert "Idempotency-Key" in err["message"]
    # Checkpoint numbers: a huge one is "no such checkpoint", never a Redis error.
    done = durable(redis_server, prefix, "checkpoints", finished, str(10**30))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "checkpoint" in done.stderr
    error_of(await client.get(f"/v1/sessions/{finished}/checkpoints/{10**30}"), 422)
    error_of(await client.post(f"/v1/sessions/{finished}/resume",
                               json={"from_checkpoint": 10**30}), 422)
    # Artifact names: no control characters.
    err = error_of(await client.get(f"/v1/sessions/{finished}/artifacts/a%01b"), 422)
    assert "artifact name" in err["message"]
    # Agent ids name conversation keys: a spec with a control character in one is refused.
    bad_agent = chain_spec(1).replace("  a: {prompt:", '  "a\\u0000": {prompt:').replace(
        "agent: a,", 'agent: "a\\u0000",')
    err = error_of(await client.post("/v1/sessions", json={"spec": bad_agent}), 422)
    assert err["code"] == "invalid_spec" and "agent id" in err["message"]
    assert await snapshot(store) == before
