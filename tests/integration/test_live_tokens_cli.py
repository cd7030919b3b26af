"""`durable watch ID --tokens` against a real `arq worker`: the CLI prints what the
step's model writes from the session's live stream (a line per step attempt, then the
text), and ends with the session, exit 0; with --json, one LiveEntry per line whose
text is the committed response. The scripted model writes its reply a word at a time."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from strands_durable.sessions.live import LiveEntry
from strands_durable.sessions.start import start_session
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.store import Store

pytestmark = pytest.mark.integration

REPLY = "the quick brown fox jumps over the lazy dog"
SPEC = f"""
version: 0
name: tokens
runtime:
  provider: scripted
  script:
    word_delay_s: 0.02
    rules: [{{reply: "{REPLY}"}}]
agents: {{writer: {{prompt: "You write."}}}}
pattern:
  type: chain
  config: {{steps: [{{agent: writer, input: "one"}}, {{agent: writer, input: "two"}}]}}
"""


async def test_watch_tokens_prints_the_models_text_as_the_worker_streams_it(
        fleet_factory: Callable[..., Any], store: Store) -> None:
    fleet = fleet_factory()
    fleet.start_worker()
    sid, _ = await start_session(store, load_spec_text(SPEC, "tokens.yaml"))
    shown = await asyncio.to_thread(fleet.cli, "watch", sid, "--tokens", "--timeout", "120")
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "--- step:0 (agent writer, attempt 1)" in text
    assert "--- step:1 (agent writer, attempt 1)" in text
    assert text.count(REPLY) == 2

    lines = (await asyncio.to_thread(fleet.cli, "watch", sid, "--tokens", "--json")).stdout
    entries = [LiveEntry.model_validate(json.loads(line)) for line in lines.splitlines()]
    assert [e.kind for e in entries if e.kind != "text"] == [
        "attempt", "turn_end", "attempt", "turn_end"]
    results = await store.results(sid)
    for result in results:
        streamed = "".join(e.text for e in entries if e.kind == "text" and e.step == result.key)
        assert streamed == result.response == REPLY
    assert len({e.id for e in entries}) == len(entries)
