"""A session's record keeps its spec once, as the effective spec's JSON (what workers,
status, fork and resume read); a record written before that, which also kept the
submitted text, still reads, forks and resumes, and a resume with a new spec drops
its stale text."""

from __future__ import annotations

import pytest
from helpers import status_doc, wait_for

from strands_durable.models import SessionStatus
from strands_durable.sessions.checkpoints import fork_from_checkpoint
from strands_durable.sessions.control import resume
from strands_durable.sessions.start import spec_json, start_session
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

SPEC = """
version: 0
name: twice-told
runtime:
  provider: scripted
  failure_policy: {retries: 0}
  script: {rules: [{contains: "LAST", error: "down"}]}
agents:
  a: {prompt: "You are a."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "first on {{ topic }}"}
      - {agent: a, input: "LAST after {{ last_response }}"}
inputs:
  values: {topic: tides}
"""
FIXED = SPEC.replace('error: "down"', 'reply: "back up"')
OLD_TEXT = "# the spec as submitted, kept by records written before it was stored once\n"


async def status_is(store: Store, sid: str, status: SessionStatus) -> bool:
    return (await store.get_session(sid)).status == status


async def meta(store: Store, sid: str) -> dict[str, str]:
    raw = await store.redis.hgetall(store.keys.meta(sid))
    return {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes)
            else v for k, v in raw.items()}


async def test_a_new_session_keeps_its_spec_once_as_json(store: Store) -> None:
    loaded = load_spec_text(SPEC, "spec.yaml")
    sid, _ = await start_session(store, loaded)
    fields = await meta(store, sid)
    assert "spec_text" not in fields
    assert fields["spec_json"] == spec_json(loaded)
    # No other field holds the spec again, in either form.
    assert [k for k, v in fields.items() if "first on {{ topic }}" in v] == ["spec_json"]
    assert fields["spec_hash"] == loaded.spec_hash  # `run --auto-resume` still finds it
    doc = await status_doc(store, sid)
    assert (doc["workflow_name"], doc["pattern_type"]) == ("twice-told", "chain")


async def test_an_old_record_with_its_text_still_forks_and_resumes(
        store: Store, consumer: StepConsumer) -> None:
    sid, _ = await start_session(store, load_spec_text(SPEC, "spec.yaml"))
    await wait_for(lambda: status_is(store, sid, SessionStatus.FAILED), what="failure")
    await store.redis.hset(store.keys.meta(sid), "spec_text", OLD_TEXT)  # an old record
    before = await status_doc(store, sid)
    assert before["steps_committed"] == 1

    fork = await fork_from_checkpoint(store, sid, 1)
    assert "spec_text" not in await meta(store, fork)  # the fork copies the JSON only
    assert (await meta(store, fork))["spec_json"] == (await meta(store, sid))["spec_json"]
    await wait_for(lambda: status_is(store, fork, SessionStatus.FAILED), what="fork fails")

    outcome = await resume(store, sid, new_spec=load_spec_text(FIXED, "fixed.yaml"))
    assert any("spec changed" in n for n in outcome.notes)
    fields = await meta(store, sid)
    assert "spec_text" not in fields, "the old text of the replaced spec was kept"
    assert fields["spec_json"] == spec_json(load_spec_text(FIXED, "fixed.yaml"))
    await wait_for(lambda: status_is(store, sid, SessionStatus.COMPLETED), what="completion")
    history = (await status_doc(store, sid))["pattern_state"]["step_history"]
    assert history[1]["response"] == "back up"


async def test_a_resume_without_a_new_spec_leaves_an_old_record_alone(
        store: Store, consumer: StepConsumer) -> None:
    sid, _ = await start_session(store, load_spec_text(SPEC, "spec.yaml"))
    await wait_for(lambda: status_is(store, sid, SessionStatus.FAILED), what="failure")
    await store.redis.hset(store.keys.meta(sid), "spec_text", OLD_TEXT)
    await resume(store, sid, variables={"topic": "waves"})
    # Its spec did not change, so its text is not stale: only a new spec replaces it.
    assert (await meta(store, sid))["spec_text"] == OLD_TEXT
    await wait_for(lambda: status_is(store, sid, SessionStatus.FAILED), what="fails again")
