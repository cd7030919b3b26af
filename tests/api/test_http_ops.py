"""Checkpoints, forks and requeue over HTTP on a real redis-server with a real worker;
the failing model is a real (tiny) Ollama server whose model gets pulled mid-test."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest
from helpers.api import chain_spec, error_of, submit, wait_status
from helpers.fake_ollama import FakeOllama, fake_ollama

from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

UNKNOWN = "00000000-0000-4000-8000-000000000000"

# The writer's model is not pulled yet: its step fails for good until it is.
OLLAMA_SPEC = """
version: 0
name: report
runtime:
  provider: scripted
  host: HOST
  failure_policy: {retries: 0}
agents:
  researcher: {prompt: "You research."}
  writer: {prompt: "You write.", provider: ollama, model_id: llama3}
pattern:
  type: chain
  config:
    steps:
      - {agent: researcher, input: "facts about tides"}
      - {agent: writer, input: "write up {{ steps[0].response }}"}
"""


@pytest.fixture
def ollama(allow_provider_host: Callable[[str, str], None]) -> Iterator[FakeOllama]:
    with fake_ollama() as server:
        allow_provider_host("ollama", server.url)
        yield server


async def test_checkpoints_list_and_one(client: httpx.AsyncClient,
                                        consumer: StepConsumer) -> None:
    sid = await submit(client, chain_spec(3))
    await wait_status(client, sid, "completed")
    r = await client.get(f"/v1/sessions/{sid}/checkpoints")
    assert r.status_code == 200, r.text
    items = r.json()["items"]
    assert [c["n"] for c in items] == [1, 2, 3]
    assert [c["step"] for c in items] == ["step:0", "step:1", "step:2"]
    assert all(c["clean"] and c["type"] == "step" for c in items)
    assert [c["status"] for c in items] == ["running", "running", "completed"]
    two = (await client.get(f"/v1/sessions/{sid}/checkpoints/2")).json()
    assert two["n"] == 2 and two["session_id"] == sid and two["steps_committed"] == 2
    assert [h["index"] for h in two["pattern_state"]["step_history"]] == [0, 1]
    assert two["token_usage"]["total_input_tokens"] > 0
    err = error_of(await client.get(f"/v1/sessions/{sid}/checkpoints/9"), 404)
    assert err["code"] == "checkpoint_not_found"
    assert err["details"] == {"session_id": sid, "n": 9, "count": 3}
    error_of(await client.get(f"/v1/sessions/{sid}/checkpoints/0"), 422)
    for path in ("checkpoints", "checkpoints/1"):
        err = error_of(await client.get(f"/v1/sessions/{UNKNOWN}/{path}"), 404)
        assert err["code"] == "session_not_found"


async def test_resume_from_a_checkpoint_forks_a_new_session(
        client: httpx.AsyncClient, store: Store, consumer: StepConsumer) -> None:
    sid = await submit(client, chain_spec(3))
    original = await wait_status(client, sid, "completed")
    r = await client.post(f"/v1/sessions/{sid}/resume",
                          json={"from_checkpoint": 1, "variables": {"topic": "kelp"}})
    assert r.status_code == 201, r.text
    fork = r.json()["session_id"]
    assert r.json() == {"session_id": fork, "forked_from": sid, "checkpoint": 1,
                        "status": "running"}
    assert r.headers["location"] == f"/v1/sessions/{fork}" and fork != sid
    doc = await wait_status(client, fork, "completed")
    history = doc["pattern_state"]["step_history"]
    before = original["pattern_state"]["step_history"]
    assert history[0] == before[0]  # copied, not re-run
    assert history[1]["response"] == "a: step 1 of kelp"
    assert doc["variables"]["topic"] == "kelp"
    # The original is kept as it was.
    assert (await client.get(f"/v1/sessions/{sid}")).json() == original
    # The last checkpoint completed the session: nothing follows it to fork.
    err = error_of(await client.post(f"/v1/sessions/{sid}/resume",
                                     json={"from_checkpoint": 3}), 409)
    assert err["code"] == "fork_refused"
    err = error_of(await client.post(f"/v1/sessions/{sid}/resume",
                                     json={"from_checkpoint": 1, "spec": chain_spec(3)}), 422)
    assert "from_checkpoint" in err["message"]
    err = error_of(await client.post(f"/v1/sessions/{sid}/resume",
                                     json={"from_checkpoint": 7}), 404)
    assert err["code"] == "checkpoint_not_found"
    assert len(await store.list_sessions()) == 2


async def test_requeue_after_the_cause_is_fixed_completes(
        client: httpx.AsyncClient, store: Store, consumer: StepConsumer,
        ollama: FakeOllama) -> None:
    sid = await submit(client, OLLAMA_SPEC.replace("HOST", ollama.url))
    doc = await wait_status(client, sid, "failed")
    assert 'model "llama3" not found' in doc["error"]
    nothing = error_of(await client.post(f"/v1/sessions/{sid}/requeue",
                                         json={"step": "step:0"}), 409)
    assert nothing["code"] == "nothing_to_requeue"
    assert nothing["details"] == {"session_id": sid, "step": "step:0"}

    plan = await client.post(f"/v1/sessions/{sid}/requeue", json={"dry_run": True})
    assert plan.status_code == 200, plan.text
    assert plan.json()["dry_run"] is True and plan.json()["statuses"] == {sid: "running"}
    assert [(s["step"], s["agent"]) for s in plan.json()["requeued"]] == [("step:1", "writer")]
    assert (await store.get_session(sid)).status.value == "failed"  # a dry run moves nothing

    ollama.pull("llama3")
    r = await client.post(f"/v1/sessions/{sid}/requeue")
    assert r.status_code == 200 and r.json()["dry_run"] is False
    doc = await wait_status(client, sid, "completed")
    assert doc["pattern_state"]["step_history"][1]["response"].startswith("ollama: write up")
    events = (await client.get(f"/v1/sessions/{sid}/events")).json()["items"]
    assert [(e["type"], e["step"]) for e in events if e["type"] == "step_requeued"] == [
        ("step_requeued", "step:1")]
    err = error_of(await client.post(f"/v1/sessions/{sid}/requeue"), 409)
    assert err["code"] == "invalid_transition" and err["details"]["status"] == "completed"
    err = error_of(await client.post(f"/v1/sessions/{UNKNOWN}/requeue"), 404)
    assert err["code"] == "session_not_found"
