"""A spec's own lower provider limits, `runtime.capacity` (our extension: strands-cli's
schema has none): checked at load (hostile values refused with the field named, exit 2 in
the CLI, 422 in the API), kept by the acquire script beside the fleet's limits on a real
redis-server (the tighter of both holds: a spec lowers, never raises), and end to end a
real `arq` worker keeps a spec's one-at-once limit against a local OpenAI-compatible
server though the fleet declares nothing: the server holds each request until the test lets
it go, so exactly one is in progress while the other branches wait, never two."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for
from helpers.api import asgi_client, make_app
from helpers.held_llm import GatedLLM, gated_llm

from strands_durable.errors import SpecError
from strands_durable.models import SessionStatus
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.capacity import Candidate, DeclaredLimits, ProviderKey, SpecScope
from strands_durable.store.store import Store

KEY = ProviderKey("openai", "gpt-own", "http://127.0.0.1:1/v1")
SPEC = """
version: 0
name: own-limits
runtime:
  provider: scripted
  capacity: {capacity}
agents: {{a: {{prompt: "You answer."}}}}
pattern: {{type: chain, config: {{steps: [{{agent: a, input: "one"}}]}}}}
"""


def spec_with(capacity: str) -> str:
    return SPEC.format(capacity=capacity)


def test_a_spec_declares_its_own_limits() -> None:
    spec = load_spec_text(spec_with("{rpm: 60, in_flight: 2}"), "s.yaml").spec
    own = spec.runtime.capacity
    assert own is not None and (own.rpm, own.tpm, own.in_flight) == (60, None, 2)
    assert own.scope_id("own-limits") == own.scope_id("own-limits") != own.scope_id("other")
    # Another tenant's spec of the same name and limits keeps a budget of its own.
    assert own.scope_id("own-limits", "team-a") != own.scope_id("own-limits", "team-b")
    assert own.scope_id("own-limits", "team-a") != own.scope_id("own-limits")
    assert load_spec_text(spec_with("{}"), "s.yaml").spec.runtime.capacity is not None
    assert load_spec_text(SPEC.replace("  capacity: {capacity}\n", "").format(),
                          "s.yaml").spec.runtime.capacity is None


@pytest.mark.parametrize(("value", "path"), [
    ("{rpm: -1}", "runtime.capacity.rpm"),
    ("{rpm: 0}", "runtime.capacity.rpm"),
    ("{rpm: '60'}", "runtime.capacity.rpm"),
    ("{rpm: 1.5}", "runtime.capacity.rpm"),
    ("{rpm: true}", "runtime.capacity.rpm"),
    ("{tpm: 100000000000000000000}", "runtime.capacity.tpm"),
    ("{in_flight: 100001}", "runtime.capacity.in_flight"),
    ("{in_flight: {nested: 1}}", "runtime.capacity.in_flight"),
    ("{in_flight: null}", None),  # null is "not declared": allowed
    ("{burst: 3}", "runtime.capacity"),
    ("{" + "k" * 500 + ": 1}", "runtime.capacity"),
    ("fast", "runtime.capacity"),
    ("[1, 2]", "runtime.capacity"),
], ids=lambda v: str(v)[:30])
def test_hostile_limits_are_refused_naming_the_field(value: str, path: str | None) -> None:
    if path is None:
        load_spec_text(spec_with(value), "s.yaml")
        return
    with pytest.raises(SpecError) as info:
        load_spec_text(spec_with(value), "s.yaml")
    assert info.value.path == path and len(str(info.value)) < 300


def test_durable_validate_exits_2_naming_the_field(tmp_path: Path) -> None:
    import subprocess

    from helpers import REPO
    from helpers.fleet import durable_bin

    path = tmp_path / "bad.yaml"
    path.write_text(spec_with("{rpm: -5}"))
    done = subprocess.run([*durable_bin(), "validate", str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "runtime.capacity.rpm" in done.stdout + done.stderr


async def test_the_api_answers_422_naming_the_field(settings: DurableSettings) -> None:
    async with asgi_client(make_app(settings)) as client:
        reply = await client.post("/v1/sessions", json={"spec": spec_with("{in_flight: 0}")})
        assert reply.status_code == 422, reply.text
        error = reply.json()["error"]
        assert error["details"]["path"] == "runtime.capacity.in_flight"


async def _take(store: Store, lease: str, fleet: DeclaredLimits, scope: SpecScope | None,
                session: str = "s") -> Any:
    return await store.capacity_acquire(KEY, fleet, [Candidate(session, lease, 1, scope=scope)],
                                        30_000, 1_000)


async def test_the_tighter_of_the_fleets_and_the_specs_limit_holds(store: Store) -> None:
    own = SpecScope("a" * 16, DeclaredLimits(in_flight=1))
    fleet = DeclaredLimits(in_flight=3)
    assert (await _take(store, "a1", fleet, own)).granted
    refused = await _take(store, "a2", fleet, own)
    assert not refused.granted and refused.reason == "spec_in_flight"
    # Another spec's calls (or none's) still have the fleet's room.
    assert (await _take(store, "b1", fleet, None, "t")).granted
    assert (await _take(store, "b2", fleet, SpecScope("b" * 16, DeclaredLimits(in_flight=5)),
                        "u")).granted
    # The fleet is full now (3): a spec's higher limit raises nothing.
    full = await _take(store, "c1", fleet, SpecScope("c" * 16, DeclaredLimits(in_flight=9)),
                       "v")
    assert not full.granted and full.reason == "in_flight"
    # The spec's own lease given back frees its own room.
    await store.capacity_release(KEY, fleet, "a1", 0, True, own)
    await store.capacity_release(KEY, fleet, "b1", 0, True, None)
    assert (await _take(store, "a3", fleet, own)).granted


async def test_a_specs_requests_per_minute_are_its_own(store: Store) -> None:
    own = SpecScope("d" * 16, DeclaredLimits(rpm=60))  # one a second, a bucket of one
    assert (await _take(store, "d1", DeclaredLimits(), own)).granted
    refused = await _take(store, "d2", DeclaredLimits(), own)
    assert not refused.granted and refused.reason == "spec_requests_per_minute"
    assert 1 <= refused.wait_ms <= 1_000
    assert (await _take(store, "e1", DeclaredLimits(), None, "t")).granted


BRANCHES = 4
IN_FLIGHT = 1
PARALLEL = """
version: 0
name: own-parallel
runtime:
  provider: openai
  model_id: gpt-own
  host: "{host}"
  max_parallel: {branches}
  capacity: {{in_flight: {in_flight}}}
agents: {{a: {{prompt: "You answer."}}}}
pattern:
  type: parallel
  config:
    branches:
{body}
"""


async def capacity_view(store: Store, sid: str) -> tuple[set[str], set[str]]:
    """The session's steps told to wait for capacity and not granted it since, and its
    steps completed (from its events)."""
    waiting: set[str] = set()
    done: set[str] = set()
    for _, event in await store.events(sid):
        if event["type"] == "capacity_wait":
            waiting.add(event["step"])
        elif event["type"] == "capacity_granted":
            waiting.discard(event["step"])
        elif event["type"] == "step_completed":
            done.add(event["step"])
    return waiting - done, done


async def one_request_at_a_time(store: Store, sid: str, server: GatedLLM) -> None:
    """Each request held at the server until every other branch is accounted for (done,
    or told to wait for capacity): then exactly one request is in progress, the rest
    wait; let it go, and so on. A second request let through would be counted in
    progress at the server while it is held, never missed."""
    for n in range(BRANCHES):
        async def settled(n: int = n) -> bool:
            waiting, done = await capacity_view(store, sid)
            at_server = server.in_progress
            return (len(done) == n and server.accepted > n and at_server > 0
                    and at_server + len(waiting) + len(done) == BRANCHES)

        await wait_for(settled, timeout_s=60, what=f"request {n + 1} held, the rest waiting")
        waiting, _ = await capacity_view(store, sid)
        assert server.in_progress == IN_FLIGHT and server.peak == IN_FLIGHT, (
            f"{server.in_progress} requests at once (the spec allows {IN_FLIGHT}); "
            f"{len(waiting)} waiting")
        assert server.accepted == n + 1 and len(waiting) == BRANCHES - n - 1
        server.release(1)


@pytest.mark.timeout(240)
async def test_a_worker_keeps_a_specs_one_at_once_limit(
        fleet_factory: Callable[..., Any], store: Store,
        allow_provider_host: Callable[[str, str], None],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    body = "\n".join(f"      - id: b{i}\n        steps: [{{agent: a, input: \"b{i}\"}}]"
                     for i in range(BRANCHES))
    with gated_llm(allow_provider_host) as server:
        fleet = fleet_factory(worker_concurrency=16)
        fleet.start_worker()
        spec = PARALLEL.format(host=server.url("/v1"), branches=BRANCHES, in_flight=IN_FLIGHT,
                               body=body)
        sid, _ = await start_session(store, load_spec_text(spec, "p.yaml"))
        await one_request_at_a_time(store, sid, server)

        async def ended() -> Any:
            record = await store.get_session(sid)
            return record if record.status != SessionStatus.RUNNING else None

        record = await wait_for(ended, timeout_s=120, what="the session to end")
        assert record.status == SessionStatus.COMPLETED, record.error
        assert server.accepted == BRANCHES and server.peak == IN_FLIGHT
        waits = [f for _, f in await store.events(sid) if f["type"] == "capacity_wait"]
        assert len(waits) == BRANCHES - 1 and all("spec_in_flight" in f["detail"] for f in waits)
        states = await asyncio.to_thread(fleet.cli_json, "capacity")
        assert [s["in_flight"] for s in states] == [0]
        assert json.dumps(states).count("test-key") == 0  # no secret in the view
