"""A worker killed (kill -9) while it holds provider capacity: its reservations are
leases, so they come back by themselves within DURABLE_CAPACITY_LEASE_S of its last
renewal, never leaked. A real `arq` worker runs steps against a local OpenAI-compatible
server that holds its requests open, with the fleet's limit declared at 2 requests at
once: the worker holds both and its other steps wait. After the kill every lease it held
expires within the lease time (their expiry scores say so), a second worker re-claims
the dead one's steps and gets their capacity, and every session completes, each step
committed once, never more than 2 requests at once at the server, no lease left over."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest
from helpers import wait_for

from bench.limited_llm import limited_llm
from strands_durable.models import SessionStatus
from strands_durable.sessions.start import start_session
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.capacity import ProviderKey
from strands_durable.store.store import Store

pytestmark = pytest.mark.chaos

SPEC = """
version: 0
name: held-{n}
runtime: {{provider: openai, model_id: gpt-held, host: "{host}"}}
agents: {{a: {{prompt: "You answer."}}}}
pattern: {{type: chain, config: {{steps: [{{agent: a, input: "one {n}"}}]}}}}
"""
SESSIONS = 4
# Renewed every LEASE_S / 3: long enough that a worker's event loop stalled by a loaded
# machine still renews in time (a lapsed lease would let a third request in, which is
# the lease doing its job, not the drill's subject), short enough to wait out.
LEASE_S = 9
LIMITS = json.dumps([{"provider": "openai", "model": "gpt-held", "in_flight": 2}])


@pytest.mark.timeout(300)
async def test_a_killed_workers_reservations_come_back_within_the_lease(
        fleet_factory: Callable[..., Any], store: Store,
        allow_provider_host: Callable[[str, str], None],
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with limited_llm(per_second=1000, at_once=100, delay_s=0.0) as server:
        server.answering.clear()
        allow_provider_host("openai", server.url())
        host = server.url("/v1")
        leases = store.keys.capacity_leases(ProviderKey("openai", "gpt-held", host).digest)
        fleet = fleet_factory(capacity_limits=LIMITS, capacity_lease_s=LEASE_S,
                              claim_idle_ms=1000, worker_concurrency=8)
        victim = fleet.start_worker()
        sids = [(await start_session(store, load_spec_text(
            SPEC.format(n=n, host=host), f"h{n}.yaml")))[0] for n in range(SESSIONS)]

        seen: dict[str, int] = {}

        async def holding_both() -> list[tuple[str, float]] | None:
            held = await store.redis.zrange(leases, 0, -1, withscores=True)
            seen.update(leases=len(held), accepted=server.accepted,
                        at_server=server.in_flight)
            return held if len(held) == 2 and server.accepted == 2 else None

        try:
            await wait_for(holding_both, timeout_s=120, what="the worker to hold both leases")
        except AssertionError as timed_out:
            raise AssertionError(f"{timed_out}; last seen: {seen}") from None
        fleet.kill(victim, signal.SIGKILL)
        killed_ms = int(time.time() * 1000)  # the workers write expiries in this clock
        held = await store.redis.zrange(leases, 0, -1, withscores=True)
        assert len(held) == 2
        # Each lease expires at most LEASE_S after the kill (its last renewal was before).
        assert all(expiry <= killed_ms + LEASE_S * 1000 for _, expiry in held), held
        server.answering.set()  # the dead worker's requests end; nobody reads them

        # Ended at the server before the next worker starts: on a loaded machine its
        # threads can take longer than a lease to end them, and the peak below would count them
        # beside the new worker's two.
        async def dead_requests_ended() -> bool:
            return server.in_flight == 0

        await wait_for(dead_requests_ended, timeout_s=60, what="the dead worker's requests "
                       "to end at the server")
        t0 = time.monotonic()
        fleet.start_worker()

        async def all_completed() -> bool:
            records = [await store.get_session(sid) for sid in sids]
            return all(r.status == SessionStatus.COMPLETED for r in records)

        await wait_for(all_completed, timeout_s=180, what="every session to complete")
        done_s = time.monotonic() - t0
        for sid in sids:
            kinds = [f["type"] for _, f in await store.events(sid)]
            assert kinds.count("step_completed") == 1, kinds
            assert "step_failed" not in kinds
        assert server.peak_at_once <= 2
        assert await store.redis.zcard(leases) == 0  # nothing left held after the run
        with capsys.disabled():
            print(f"\ncapacity kill drill: 2 leases held at kill -9, each expiring within "
                  f"{max(e for _, e in held) - killed_ms:.0f} ms of it (lease {LEASE_S} s); "
                  f"{SESSIONS} sessions completed {done_s:.1f} s after the second worker "
                  f"started, {server.accepted} requests, peak {server.peak_at_once} at once")

