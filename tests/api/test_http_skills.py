"""A spec sent over HTTP with skills is refused (422, naming `skills`): the server never
reads a skill directory a spec names; the same spec from its file runs."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from helpers.api import error_of

from strands_durable.store.store import Store

pytestmark = pytest.mark.integration

SPEC = Path(__file__).resolve().parents[1] / "fixtures" / "skills" / "skills-notes.yaml"


async def test_a_spec_with_skills_sent_as_text_is_refused_and_nothing_is_stored(
        client: httpx.AsyncClient, store: Store) -> None:
    before = {k async for k in store.redis.scan_iter(f"{store.keys.prefix}:*")}
    r = await client.post("/v1/sessions", json={"spec": SPEC.read_text()})
    error = error_of(r, 422)
    assert error["code"] == "invalid_spec"
    assert error["details"]["path"] == "skills"
    assert "relative to the spec's file" in error["details"]["problem"]
    assert {k async for k in store.redis.scan_iter(f"{store.keys.prefix}:*")} == before
