"""POST /v1/sessions on a real redis-server: YAML text or an object, overrides,
idempotency, and every refusal (413, 422) leaving nothing behind."""

from __future__ import annotations

import json

import httpx
import pytest
import yaml
from helpers.api import HITL, chain_spec, error_of, submit, wait_status

from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration


async def keys_of(store: Store) -> set[str]:
    return {k async for k in store.redis.scan_iter(f"{store.keys.prefix}:*")}


async def test_yaml_text_is_stored_with_its_first_step_before_the_answer(
        client: httpx.AsyncClient, store: Store) -> None:
    r = await client.post("/v1/sessions", json={"spec": chain_spec(2),
                                                "variables": {"topic": "tides"}})
    assert r.status_code == 201, r.text
    sid = r.json()["session_id"]
    assert r.json() == {"session_id": sid, "status": "running", "created": True}
    assert r.headers["location"] == f"/v1/sessions/{sid}"
    # No worker runs here: what is there was written before the response.
    record = await store.get_session(sid)
    assert record.variables["topic"] == "tides"
    assert await store.redis.xlen(store.keys.stream(store.keys.shard(sid))) == 1
    types = [f["type"] for _, f in await store.events(sid)]
    assert types == ["session_started", "step_scheduled"]
    # and the Location it names answers.
    doc = (await client.get(r.headers["location"])).json()
    assert doc["session_id"] == sid and doc["workflow_name"] == "plain"


async def test_spec_as_an_object_with_provider_and_script_overrides(
        client: httpx.AsyncClient, consumer: StepConsumer) -> None:
    spec = yaml.safe_load(chain_spec(1))
    spec["runtime"]["provider"] = "ollama"  # overridden back to scripted below
    sid = await submit(client, spec, provider="scripted",
                       script={"rules": [{"agent": "a", "reply": "from the script"}]})
    doc = await wait_status(client, sid, "completed")
    assert doc["pattern_state"]["step_history"][0]["response"] == "from the script"


async def test_same_idempotency_key_same_session(client: httpx.AsyncClient,
                                                 store: Store) -> None:
    body = {"spec": chain_spec(1)}
    first = await client.post("/v1/sessions", json=body, headers={"Idempotency-Key": "k-1"})
    again = await client.post("/v1/sessions", json=body, headers={"Idempotency-Key": "k-1"})
    other = await client.post("/v1/sessions", json=body, headers={"Idempotency-Key": "k-2"})
    assert first.status_code == 201 and again.status_code == 200
    assert again.json()["session_id"] == first.json()["session_id"]
    assert again.json()["created"] is False and "location" not in again.headers
    assert again.headers["content-location"] == first.headers["location"]
    assert other.status_code == 201 and other.json()["session_id"] != first.json()["session_id"]
    assert len(await store.list_sessions()) == 2


async def test_an_idempotency_key_is_bound_to_the_priority_too(
        client: httpx.AsyncClient, store: Store) -> None:
    body = {"spec": chain_spec(1)}
    key = {"Idempotency-Key": "k-prio"}
    first = await client.post("/v1/sessions", json={**body, "priority": 50}, headers=key)
    again = await client.post("/v1/sessions", json={**body, "priority": 50}, headers=key)
    assert first.status_code == 201 and again.status_code == 200
    assert again.json()["session_id"] == first.json()["session_id"]
    # The same spec and variables at another priority, or at none (the default): another
    # request, refused rather than answered with a session at the wrong priority.
    for other in ({**body, "priority": 1}, body):
        err = error_of(await client.post("/v1/sessions", json=other, headers=key), 409)
        assert err["code"] == "idempotency_key_reused" and "priority" in err["message"]
    # The default priority written out is the same request as none.
    plain = {"Idempotency-Key": "k-plain"}
    first = await client.post("/v1/sessions", json=body, headers=plain)
    again = await client.post("/v1/sessions", json={**body, "priority": 10}, headers=plain)
    assert (first.status_code, again.status_code) == (201, 200)
    assert len(await store.list_sessions()) == 2


async def test_hitl_spec_starts_running(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/sessions", json={"spec": HITL})
    assert r.status_code == 201 and r.json()["status"] == "running"


@pytest.mark.parametrize(("spec", "path", "problem"), [
    (chain_spec(1).replace("agent: a,", "agent: nobody,"), "pattern.config.steps[0].agent",
     "nobody"),
    (chain_spec(1).replace("{{ topic }}", "{{ topik }}"), "pattern.config.steps[0].input",
     "topik"),
    (chain_spec(1) + "security: {guardrails: {pii_redaction: true}}\n",
     "security.guardrails.pii_redaction", "not implemented"),
    ("version: 0\nname: [unclosed", "line 2", "invalid YAML"),
    ("- just\n- a list\n", "", "mapping at the top level"),
])
async def test_invalid_spec_is_422_with_the_field_path_and_writes_nothing(
        client: httpx.AsyncClient, store: Store, spec: str, path: str, problem: str) -> None:
    before = await keys_of(store)
    err = error_of(await client.post("/v1/sessions", json={"spec": spec},
                                     headers={"Idempotency-Key": "bad"}), 422)
    assert err["code"] == "invalid_spec"
    assert err["details"]["source"] == "spec"
    assert err["details"]["path"].startswith(path)
    assert problem in err["details"]["problem"] and problem in err["message"]
    assert await keys_of(store) == before


async def test_bad_variable_and_provider_are_422(client: httpx.AsyncClient) -> None:
    spec = chain_spec(1).replace("inputs:\n  values: {topic: x}",
                                 "inputs:\n  required: {n: integer}\n  values: {topic: x}")
    err = error_of(await client.post("/v1/sessions", json={"spec": spec,
                                                           "variables": {"n": "many"}}), 422)
    assert err["details"]["path"] == "variables.n"
    err = error_of(await client.post("/v1/sessions", json={"spec": chain_spec(1),
                                                           "provider": "nope"}), 422)
    assert err["code"] == "invalid_spec" and "nope" in err["message"]


@pytest.mark.parametrize(("body", "where"), [
    ({}, "body.spec"),
    ({"spec": 42}, "body.spec"),
    ({"spec": "x", "variables": []}, "body.variables"),
    ({"spec": "x", "colour": "red"}, "body.colour"),
    ({"spec": "x", "script": {"rules": [{"agent": "a"}]}}, "body.script.rules.0"),
])
async def test_request_validation_errors_use_the_envelope(client: httpx.AsyncClient,
                                                          body: dict[str, object],
                                                          where: str) -> None:
    err = error_of(await client.post("/v1/sessions", json=body), 422)
    assert err["code"] == "invalid_request"
    locs = [".".join(map(str, e["loc"])) for e in err["details"]["errors"]]
    assert any(loc.startswith(where) for loc in locs), locs
    assert where in err["message"]


async def test_malformed_json_and_bad_idempotency_key(client: httpx.AsyncClient) -> None:
    err = error_of(await client.post("/v1/sessions", content=b"{not json",
                                     headers={"Content-Type": "application/json"}), 422)
    assert err["code"] == "invalid_request"
    err = error_of(await client.post("/v1/sessions", json={"spec": chain_spec(1)},
                                     headers={"Idempotency-Key": "k" * 300}), 422)
    assert "Idempotency-Key" in err["message"]


def big_spec(size: int) -> str:
    padding = "x" * 1000
    lines = "".join(f"# {padding}\n" for _ in range(size // 1003 + 1))
    return chain_spec(1) + lines


async def test_spec_over_256_kib_is_413_and_writes_nothing(client: httpx.AsyncClient,
                                                           store: Store) -> None:
    before = await keys_of(store)
    spec = big_spec(300 * 1024)
    err = error_of(await client.post("/v1/sessions", json={"spec": spec}), 413)
    assert err["code"] == "payload_too_large"
    assert err["details"]["limit_bytes"] == 256 * 1024
    assert err["details"]["size_bytes"] == len(spec.encode())
    # As an object too: its JSON size counts.
    obj = {**yaml.safe_load(chain_spec(1)), "description": "y" * (257 * 1024)}
    error_of(await client.post("/v1/sessions", json={"spec": obj}), 413)
    assert await keys_of(store) == before
    # Just under the limit is fine.
    ok = big_spec(200 * 1024)
    assert (await client.post("/v1/sessions", json={"spec": ok})).status_code == 201


async def test_body_limit_checks_content_length_and_the_bytes_received(
        client: httpx.AsyncClient, store: Store) -> None:
    before = await keys_of(store)
    huge = json.dumps({"spec": big_spec(700 * 1024)}).encode()
    r = await client.post("/v1/sessions", content=huge,
                          headers={"Content-Type": "application/json"})
    assert error_of(r, 413)["details"]["size_bytes"] == len(huge)

    async def chunks():  # no Content-Length: only counting the bytes can catch it
        for i in range(0, len(huge), 64 * 1024):
            yield huge[i:i + 64 * 1024]

    r = await client.post("/v1/sessions", content=chunks(),
                          headers={"Content-Type": "application/json"})
    assert "content-length" not in r.request.headers
    assert error_of(r, 413)["code"] == "payload_too_large"
    assert await keys_of(store) == before
