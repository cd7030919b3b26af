"""Operator control over HTTP on a real redis-server with a real worker: pause, resume,
cancel, signal (HITL); 409 for what a session's status forbids (seed 003)."""

from __future__ import annotations

import httpx
import pytest
from helpers import StepBreakpoints, wait_for
from helpers.api import HITL, chain_spec, error_of, submit, wait_status

from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

UNKNOWN = "00000000-0000-4000-8000-000000000000"


async def committed(store: Store, sid: str, n: int) -> bool:
    return (await store.get_session(sid)).steps_committed >= n


async def test_pause_then_resume_completes(client: httpx.AsyncClient, store: Store,
                                           consumer: StepConsumer,
                                           breakpoints: StepBreakpoints) -> None:
    breakpoints.set("plain", "step:0")
    sid = await submit(client, chain_spec(4))
    await breakpoints.wait("plain", "step:0")
    r = await client.post(f"/v1/sessions/{sid}/pause")
    assert r.status_code == 200 and r.json() == {"session_id": sid, "status": "paused",
                                                 "notes": []}
    err = error_of(await client.post(f"/v1/sessions/{sid}/pause"), 409)
    assert err["code"] == "invalid_transition"
    assert err["details"] == {"session_id": sid, "status": "paused", "action": "pause"}
    # The running step commits; nothing after it runs while paused.
    breakpoints.clear("plain", "step:0")
    await wait_for(lambda: committed(store, sid, 1), what="the running step to commit")
    doc = (await client.get(f"/v1/sessions/{sid}")).json()
    assert doc["status"] == "paused" and doc["steps_committed"] == 1
    r = await client.post(f"/v1/sessions/{sid}/resume")
    assert r.status_code == 200 and r.json()["status"] == "running"
    doc = await wait_status(client, sid, "completed")
    assert doc["steps_committed"] == 4
    err = error_of(await client.post(f"/v1/sessions/{sid}/resume"), 409)
    assert err["details"]["status"] == "completed"


async def test_resume_with_variables_and_budgets(client: httpx.AsyncClient,
                                                 consumer: StepConsumer) -> None:
    spec = chain_spec(3).replace("runtime:\n", "runtime:\n  budgets: {max_steps: 1}\n")
    sid = await submit(client, spec)
    doc = await wait_status(client, sid, "paused")
    assert "max_steps" in doc["paused_reason"]
    # Still over budget: refused, nothing changes.
    err = error_of(await client.post(f"/v1/sessions/{sid}/resume", json={}), 409)
    assert err["code"] == "conflict" and "max_steps" in err["message"]
    r = await client.post(f"/v1/sessions/{sid}/resume",
                          json={"budgets": {"max_steps": 10}, "variables": {"topic": "y"}})
    assert r.status_code == 200, r.text
    assert any("max_steps=10" in n for n in r.json()["notes"])
    doc = await wait_status(client, sid, "completed")
    assert doc["variables"]["topic"] == "y"
    err = error_of(await client.post(f"/v1/sessions/{sid}/resume",
                                     json={"budgets": {"max_cost": 1}}), 422)
    assert err["code"] == "invalid_request"


async def test_resume_with_a_new_spec_reports_the_change(client: httpx.AsyncClient,
                                                         store: Store) -> None:
    sid = await submit(client, chain_spec(2))
    await client.post(f"/v1/sessions/{sid}/pause")
    bad = error_of(await client.post(f"/v1/sessions/{sid}/resume",
                                     json={"spec": "version: 0\nname: [x"}), 422)
    assert bad["code"] == "invalid_spec"
    assert (await store.get_session(sid)).status.value == "paused"
    r = await client.post(f"/v1/sessions/{sid}/resume",
                          json={"spec": chain_spec(2).replace("You are a.", "You are A.")})
    assert r.status_code == 200, r.text
    assert any("spec changed" in n for n in r.json()["notes"])


async def test_cancel(client: httpx.AsyncClient, store: Store) -> None:
    sid = await submit(client, chain_spec(2))
    r = await client.post(f"/v1/sessions/{sid}/cancel")
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    for action in ("cancel", "pause", "resume"):
        err = error_of(await client.post(f"/v1/sessions/{sid}/{action}"), 409)
        assert err["details"] == {"session_id": sid, "status": "cancelled", "action": action}
    err = error_of(await client.post(f"/v1/sessions/{sid}/signal", json={"response": "x"}),
                   409)
    assert err["code"] == "invalid_transition"


async def test_signal_answers_a_hitl_step(client: httpx.AsyncClient,
                                          consumer: StepConsumer) -> None:
    sid = await submit(client, HITL)
    doc = await wait_status(client, sid, "paused")
    assert doc["paused_reason"].startswith("waiting for human input at step:1")
    # What the human is asked, with the step's rendered context.
    [waiting] = doc["waiting"]
    assert (waiting["step"], waiting["prompt"]) == ("step:1", "Approve the draft?")
    assert waiting["context_display"] == "Draft: a: draft it"
    # Resume without the answer is refused, the session keeps waiting.
    err = error_of(await client.post(f"/v1/sessions/{sid}/resume"), 409)
    assert "human input" in err["message"]
    err = error_of(await client.post(f"/v1/sessions/{sid}/signal", json={}), 422)
    assert "body.response" in err["message"]
    r = await client.post(f"/v1/sessions/{sid}/signal", json={"response": "ship it"})
    assert r.status_code == 200, r.text
    doc = await wait_status(client, sid, "completed")
    assert doc["waiting"] == [] and doc["final_response"] == "a: final after ship it"
    history = doc["pattern_state"]["step_history"]
    assert history[1]["response"] == "ship it"
    assert history[2]["response"] == "a: final after ship it"
    art = await client.get(f"/v1/sessions/{sid}/artifacts/approved.md")
    assert art.text == "a: final after ship it"
    err = error_of(await client.post(f"/v1/sessions/{sid}/signal", json={"response": "again"}),
                   409)
    assert err["details"]["status"] == "completed"


async def test_signal_to_a_session_not_waiting_is_409(client: httpx.AsyncClient) -> None:
    sid = await submit(client, chain_spec(2))
    await client.post(f"/v1/sessions/{sid}/pause")
    err = error_of(await client.post(f"/v1/sessions/{sid}/signal", json={"response": "x"}), 409)
    assert "not waiting for human input" in err["message"]


@pytest.mark.parametrize("action", ["pause", "resume", "cancel"])
async def test_control_of_an_unknown_session_is_404(client: httpx.AsyncClient,
                                                    action: str) -> None:
    err = error_of(await client.post(f"/v1/sessions/{UNKNOWN}/{action}"), 404)
    assert err["code"] == "session_not_found"
    err = error_of(await client.post(f"/v1/sessions/{UNKNOWN}/signal", json={"response": "x"}),
                   404)
    assert err["code"] == "session_not_found"
