"""Fair share of a provider key (store/lua/capacity_acquire.lua, worker/capacity.py) on a
real redis-server: capacity goes round the sessions that wait for it, so one session with
200 requests waiting does not starve 50 small ones, and a session's priority (submitted
with --priority or the API's `priority`) weighs its turns. Grants are counted; nothing
here depends on how fast the machine is."""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, wait_for
from helpers.api import asgi_client, make_app
from helpers.fleet import durable_bin

from bench.limited_llm import limited_llm
from strands_durable.models import SessionStatus
from strands_durable.provider_policy import CapacityPolicy
from strands_durable.sessions.start import new_session, start_session
from strands_durable.sessions.status import session_status
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.capacity import Candidate, DeclaredLimits, ProviderKey
from strands_durable.store.store import Store
from strands_durable.worker.capacity import CANDIDATES, CapacityGate

KEY = ProviderKey("openai", "gpt-fair", "http://127.0.0.1:1/v1")
ONE_AT_ONCE = DeclaredLimits(in_flight=1)


async def _ask(store: Store, process: str, candidates: list[Candidate]) -> str | None:
    """One process's ask; a grant is given back at once (its request done)."""
    grant = await store.capacity_acquire(KEY, ONE_AT_ONCE, candidates, 30_000, 1_000,
                                         process, sum(c.waiting for c in candidates))
    if not grant.granted:
        return None
    await store.capacity_release(KEY, ONE_AT_ONCE, grant.lease_id, 0, True)
    return grant.session


async def test_a_big_session_in_one_process_does_not_starve_small_ones_in_another(
        store: Store) -> None:
    """Process A holds one session with 200 requests waiting; process B holds 50
    sessions with one each. They ask in turn, A first each round."""
    big_left, small = 200, [f"small-{i}" for i in range(50)]
    served: list[str] = []
    n = 0
    while len(served) < 70:
        n += 1
        if big_left:
            who = await _ask(store, "A", [Candidate("big", f"big-{n}", 1, waiting=big_left)])
            if who:
                big_left -= 1
                served.append(who)
        heads = [Candidate(s, f"{s}-{n}", 1) for s in small[:CANDIDATES]]
        if heads and (who := await _ask(store, "B", heads)):
            small.remove(who)
            served.append(who)
    # A session that starts waiting joins at the virtual time (the pass last served) and
    # the big one may run at most one grant ahead of it: with the 16 sessions a process
    # asks for at once, the big session has about one grant in 16 while small ones wait
    # (without fair share, asking first in every round, it would have one in two).
    last_small = max(i for i, s in enumerate(served) if s != "big")
    big_before = served[:last_small].count("big")
    assert small == [] and big_before <= 50 // CANDIDATES + 3, served[:last_small + 1]
    # Nobody else waits now: the big session has every grant (capacity is not left idle).
    assert set(served[last_small + 1:]) == {"big"} and len(served) - last_small > 10


async def test_within_a_process_sessions_take_turns(store: Store) -> None:
    """One gate (one worker): 200 requests of one session queued first, then one request
    each of 50 sessions, one request at once on the key: the 50 are served among the
    first ones, not after the 200."""
    policy = CapacityPolicy(capacity_limits='[{"provider": "openai", "in_flight": 1}]')
    gate = CapacityGate(store, policy, process="w1")
    order: list[str] = []

    async def request(session: str) -> None:
        lease, _ = await gate.acquire(KEY, 1, 0.0, None, session)
        order.append(session)
        await asyncio.sleep(0)  # the request's own await
        await gate.release(lease, 1, succeeded=True)

    big_sid, smalls = str(uuid.uuid4()), [str(uuid.uuid4()) for _ in range(50)]
    holder, _ = await gate.acquire(KEY, 1, 0.0, None)  # the key is busy while they queue
    big = [asyncio.create_task(request(big_sid)) for _ in range(200)]

    async def queued(n: int) -> bool:
        return gate.waiting(KEY) == n

    await wait_for(lambda: queued(200), timeout_s=30, what="the big one's requests queued")
    small = [asyncio.create_task(request(s)) for s in smalls]
    await wait_for(lambda: queued(250), timeout_s=30, what="every request queued")
    await gate.release(holder, 1, succeeded=True)
    await asyncio.gather(*big, *small)
    assert len(order) == 250
    last_small = max(i for i, s in enumerate(order) if s != big_sid)
    assert order[:last_small].count(big_sid) <= 50 // CANDIDATES + 3, "".join(
        "B" if s == big_sid else "s" for s in order)


async def test_priority_weighs_the_turns(store: Store) -> None:
    """Two sessions with many requests waiting, priorities 20 and 10 (weights 2 and 1):
    of 30 grants the first has about twice the second's."""
    served = Counter()
    for n in range(30):
        who = await _ask(store, "A", [Candidate("high", f"h{n}", 1, weight=2.0, waiting=99),
                                      Candidate("low", f"l{n}", 1, weight=1.0, waiting=99)])
        assert who is not None
        served[who] += 1
    assert 18 <= served["high"] <= 22 and served["low"] == 30 - served["high"]


SPEC = """
version: 0
name: prioritised
runtime: {provider: scripted}
agents: {a: {prompt: "You answer."}}
pattern: {type: chain, config: {steps: [{agent: a, input: "one"}]}}
"""


async def test_a_sessions_priority_is_stored_and_read_by_the_gate(store: Store) -> None:
    planned = replace(new_session(load_spec_text(SPEC, "p.yaml")), priority=30)
    sid, _ = await store.create_session(planned)
    gate = CapacityGate(store, CapacityPolicy())
    assert await gate.weight(sid) == 3.0
    assert (await session_status(store, sid)).priority == 30
    plain, _ = await store.create_session(new_session(load_spec_text(SPEC, "p.yaml")))
    assert await gate.weight(plain) == 1.0
    assert (await session_status(store, plain)).priority == 10
    # A namespace's weight in fair dispatch multiplies its sessions' share.
    store.fair_weights = "team-a=2"
    tenant, _ = await store.create_session(replace(planned, namespace="team-a"))
    assert await gate.weight(tenant) == 6.0


@pytest.mark.parametrize("priority", [0, 101, -1, "5", True, 1.5, 10**30])
async def test_the_api_refuses_a_priority_out_of_bounds(settings: DurableSettings,
                                                        priority: object) -> None:
    async with asgi_client(make_app(settings)) as client:
        reply = await client.post("/v1/sessions", json={"spec": SPEC, "priority": priority})
        assert reply.status_code == 422, reply.text
        assert "priority" in reply.text and len(reply.text) < 2_000


async def test_the_api_and_the_cli_submit_with_a_priority(
        settings: DurableSettings, store: Store, tmp_path: Path) -> None:
    async with asgi_client(make_app(settings)) as client:
        reply = await client.post("/v1/sessions", json={"spec": SPEC, "priority": 50})
        assert reply.status_code == 201, reply.text
        sid = reply.json()["session_id"]
        assert (await client.get(f"/v1/sessions/{sid}")).json()["priority"] == 50
    path = tmp_path / "p.yaml"
    path.write_text(SPEC)
    env = {"DURABLE_REDIS_URL": settings.redis_url, "DURABLE_KEY_PREFIX": settings.key_prefix}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        import os
        return subprocess.run([*durable_bin(), *args], cwd=REPO, env={**os.environ, **env},
                              capture_output=True, text=True, timeout=120)

    refused = await asyncio.to_thread(cli, "submit", str(path), "--priority", "0")
    assert refused.returncode == 2 and "priority" in refused.stderr.lower()
    done = await asyncio.to_thread(cli, "submit", str(path), "--priority", "7")
    assert done.returncode == 0, done.stderr
    assert (await session_status(store, done.stdout.strip())).priority == 7


WIDE = """
version: 0
name: wide
runtime: {{provider: openai, model_id: gpt-fair, host: "{host}", max_parallel: 200}}
agents: {{a: {{prompt: "You answer."}}}}
pattern: {{type: parallel, config: {{branches: [{branches}]}}}}
"""
SMALL = """
version: 0
name: small-{n}
runtime: {{provider: openai, model_id: gpt-fair, host: "{host}"}}
agents: {{a: {{prompt: "You answer."}}}}
pattern: {{type: chain, config: {{steps: [{{agent: a, input: "small {n}"}}]}}}}
"""


@pytest.mark.timeout(300)
async def test_a_real_worker_serves_small_sessions_beside_a_wide_one(
        fleet_factory: Callable[..., Any], store: Store,
        allow_provider_host: Callable[[str, str], None],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A real `arq` worker takes one session of 200 parallel branches (submitted first)
    and 20 one-step sessions at once; the key allows 2 requests at once. The small
    sessions all complete while the wide one has had a few of its 200 turns."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    limits = '[{"provider": "openai", "model": "gpt-fair", "in_flight": 2}]'
    with limited_llm(per_second=10_000, at_once=100, delay_s=0.02) as server:
        allow_provider_host("openai", server.url())
        host = server.url("/v1")
        branches = ", ".join(f'{{id: b{i}, steps: [{{agent: a, input: "b{i}"}}]}}'
                             for i in range(200))
        wide, _ = await start_session(store, load_spec_text(
            WIDE.format(host=host, branches=branches), "w.yaml"))
        smalls = [(await start_session(store, load_spec_text(
            SMALL.format(n=n, host=host), f"s{n}.yaml")))[0] for n in range(20)]
        # Every entry is on the stream before the worker starts, and it takes them all.
        fleet = fleet_factory(worker_concurrency=300, worker_adaptive_concurrency="false",
                              capacity_limits=limits)
        fleet.start_worker()

        async def ended() -> bool:
            records = [await store.get_session(sid) for sid in [wide, *smalls]]
            return all(r.status != SessionStatus.RUNNING for r in records)

        await wait_for(ended, timeout_s=240, what="every session to end")
        for sid in [wide, *smalls]:
            assert (await store.get_session(sid)).status == SessionStatus.COMPLETED
        last_small = max([f["at"] for sid in smalls for _, f in await store.events(sid)
                          if f["type"] == "step_completed"])
        wide_done = [f["at"] for _, f in await store.events(wide)
                     if f["type"] == "step_completed"]
        assert len(wide_done) == 200 and server.peak_at_once <= 2
        # First come, first served would finish the 200 branches first (they queued
        # first); with fair share the small ones have their turns among the first (14 on
        # a quiet run here: the wide one's requests reach the key before theirs do).
        before = sum(1 for at in wide_done if at <= last_small)
        assert before <= 50, f"{before} of the wide session's steps before the last small one"
