"""A step waiting for provider capacity is visible and does not look failed or stuck: a real
`arq` worker's step waits behind a lease this test holds (a declared limit of one request
at once) on a real redis-server. The session stays `running` with the step listed under
`waiting_for_capacity` (status document, `durable status`, the API); `durable workers`
and `durable capacity` show the key's limit, use and the waiting request, as the
console's fleet page does; when the lease is given back the step runs and the session
completes, its events saying how long it waited."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from helpers import wait_for
from helpers.api import asgi_client, make_app
from helpers.console import TOKEN

from bench.limited_llm import limited_llm
from strands_durable.api.watch import step_rows
from strands_durable.models import SessionStatus
from strands_durable.provider_policy import CapacityPolicy
from strands_durable.sessions.start import start_session
from strands_durable.sessions.status import capacity_waits, session_status
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.capacity import ProviderKey
from strands_durable.store.store import Store
from strands_durable.worker.capacity import CapacityGate

SPEC = """
version: 0
name: visible
runtime: {{provider: openai, model_id: gpt-visible, host: "{host}"}}
agents: {{a: {{prompt: "You answer."}}}}
pattern: {{type: chain, config: {{steps: [{{agent: a, input: "one"}}]}}}}
"""
LIMITS = json.dumps([{"provider": "openai", "model": "gpt-visible", "in_flight": 1}])


@pytest.mark.timeout(480)
async def test_a_waiting_step_is_shown_waiting_and_its_session_running(
        fleet_factory: Callable[..., Any], store: Store, settings: DurableSettings,
        allow_provider_host: Callable[[str, str], None],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with limited_llm(per_second=1000, at_once=100, delay_s=0.0) as server:
        allow_provider_host("openai", server.url())
        key = ProviderKey("openai", "gpt-visible", server.url("/v1"))
        # The one request allowed at once, leased for an hour: the default 30 s lease,
        # never renewed here, can lapse on a loaded machine before every view is read.
        gate = CapacityGate(store, CapacityPolicy(capacity_limits=LIMITS, capacity_lease_s=3600),
                            process="holder")
        held, _ = await gate.acquire(key, 1, 0.0, None)
        fleet = fleet_factory(capacity_limits=LIMITS)
        fleet.start_worker()
        sid, _ = await start_session(store, load_spec_text(SPEC.format(host=server.url("/v1")),
                                                           "v.yaml"))

        async def waiting() -> Any:
            doc = await session_status(store, sid)
            return doc if doc.waiting_for_capacity else None

        doc = await wait_for(waiting, timeout_s=180, what="the step to wait for capacity")
        assert doc.status == SessionStatus.RUNNING and doc.error is None
        [w] = doc.waiting_for_capacity
        assert (w.step, w.key, w.reason) == ("step:0", key.label, "in_flight")

        # Read again until shown: on a loaded machine the worker's lease on the step can
        # lapse and be taken back, and the step shows as started again before it waits.
        async def cli_shows_wait() -> Any:
            status = await asyncio.to_thread(fleet.cli_json, "status", sid)
            return status if status["waiting_for_capacity"] else None

        status = await wait_for(cli_shows_wait, timeout_s=120, what="`status --json` wait")
        assert status["status"] == "running"
        assert status["waiting_for_capacity"][0]["key"] == key.label

        async def table_shows_wait() -> str | None:
            table = (await asyncio.to_thread(fleet.cli, "status", sid)).stdout
            return table if "waiting_for_capacity" in table else None

        table = await wait_for(table_shows_wait, timeout_s=120, what="`status` wait")
        assert "in_flight" in table

        async def worker_waits() -> Any:
            docs = await asyncio.to_thread(fleet.cli_json, "workers")
            return docs if any(d["capacity_waiting"] for d in docs) else None

        [worker] = await wait_for(worker_waits, timeout_s=30, what="the worker's wait")
        assert worker["capacity_waiting"] == {key.label: 1}

        async def key_waits() -> Any:
            # A worker's registration lapses 3 s after its last ask: on a machine too
            # loaded for it to ask meanwhile the next read finds it again.
            docs = await asyncio.to_thread(fleet.cli_json, "capacity")
            return docs if docs and docs[0]["waiting"] else None

        [cap] = await wait_for(key_waits, timeout_s=30, what="the key's waiting request")
        assert cap["key"] == key.label and cap["in_force"] == {"rpm": None, "in_flight": 1}
        assert cap["in_flight"] == 1 and cap["waiting"] == 1 and cap["waiting_sessions"] == 1
        assert cap["waiting_by_worker"] == {worker["consumer"]: 1}
        shown = (await asyncio.to_thread(fleet.cli, "workers")).stdout
        assert "1 on" in shown and "provider capacity" in shown

        app = make_app(settings, api_token=TOKEN, capacity_limits=LIMITS)
        async with asgi_client(app, token=TOKEN) as api:
            got = (await api.get(f"/v1/sessions/{sid}")).json()
            assert got["status"] == "running" and got["waiting_for_capacity"][0]["step"] == "step:0"
        async with asgi_client(app) as browser:
            browser.headers["accept"] = "text/html"
            await browser.post("/ui/login", data={"token": TOKEN, "next": "/ui"})

            async def fleet_page_waits() -> str | None:
                page = (await browser.get("/ui/fleet")).text
                table = page.split('id="capacity"')[1].split("</table>")[0]
                row = next(r for r in table.split("<tr>") if key.label in r)
                return page if "1 at once" in row and "1 (1 sessions)" in row else None

            fleet_page = await wait_for(fleet_page_waits, timeout_s=30, what="the fleet page")
            worker_row = next(r for r in fleet_page.split("<tr>") if worker["consumer"] in r)
            assert f"1 on <span class=\"mono\">{key.label}</span>" in worker_row
            session_page = (await browser.get(f"/ui/sessions/{sid}")).text
            assert "Waiting for capacity" in session_page

        await gate.release(held, None, succeeded=True)

        async def completed() -> bool:
            return (await store.get_session(sid)).status == SessionStatus.COMPLETED

        await wait_for(completed, timeout_s=60, what="the session to complete")
        events = await store.events(sid)
        kinds = [f["type"] for _, f in events]
        assert kinds.index("capacity_wait") < kinds.index("capacity_granted") \
            < kinds.index("step_completed")
        assert "step_failed" not in kinds and "session_stuck" not in kinds
        assert (await session_status(store, sid)).waiting_for_capacity == []
        assert server.accepted == 1


def test_the_status_and_watch_follow_a_steps_wait_from_its_events() -> None:
    def event(kind: str, step: str = "s", detail: str = "") -> tuple[str, dict[str, str]]:
        return ("1-0", {"type": kind, "step": step, "attempt": "1", "at": "t",
                        "detail": detail})

    wait = event("capacity_wait", detail="openai/m@http://h:1/v1: backoff, next look in 9 ms")
    [w] = capacity_waits([event("step_started"), wait])
    assert (w.key, w.reason) == ("openai/m@http://h:1/v1", "backoff")
    assert capacity_waits([wait, event("capacity_granted", detail="waited 1.0s")]) == []
    assert capacity_waits([wait, event("step_reclaimed")]) == []
    assert len(capacity_waits([wait, event("step_started", "other")])) == 1
    [row] = step_rows([event("step_started"), wait], [])
    assert row.state == "waiting for capacity" and "backoff" in row.detail
    [row] = step_rows([wait, event("capacity_granted", detail="waited 1.0s")], [])
    assert row.state == "running" and row.detail == "waited 1.0s"
