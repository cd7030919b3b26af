"""The Python client against a real `durable api` process (token auth on) and real
`arq worker` processes on a private redis-server: async and sync, submit and wait,
events, pause/resume, a human's answer, fork, cancel, requeue, artifacts, the fleet,
errors by kind, and a worker killed (SIGKILL) while a client waits."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from helpers import REPO, free_port, wait_for, wait_for_sync
from helpers.api import HITL, api_process, chain_spec
from helpers.client import FAILING, NOPE
from helpers.fleet import Fleet, durable_bin

from strands_durable.api.schemas import EventOut
from strands_durable.client import AsyncClient, Client
from strands_durable.client.errors import ApiConflict, ApiInvalidInput, ApiNotFound, Unauthorized
from strands_durable.errors import Conflict, InvalidInput, NotFound

# Starts `durable api` and `arq worker` processes (tests/conftest.py SLOW_MODULES).
pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOKEN = "client-token-5ecret"


@pytest.fixture
def served(fleet_factory: Callable[..., Fleet], tmp_path: Path
           ) -> Iterator[tuple[Fleet, str]]:
    """A fleet of one worker (quick re-claims) behind a real `durable api`."""
    fleet = fleet_factory(claim_idle_ms=1500, heartbeat_s=0.5)
    fleet.start_worker()
    with api_process({**fleet.env, "DURABLE_API_TOKEN": TOKEN}, tmp_path / "api.log") as url:
        yield fleet, url


async def test_async_submit_wait_events_artifacts_fork(served: tuple[Fleet, str]) -> None:
    _, url = served
    async with AsyncClient(url, token=TOKEN) as client:
        started = await client.submit(chain_spec(3, name="report"), variables={"topic": "kelp"},
                                      idempotency_key="kelp-1")
        assert started.created and started.status == "running"
        again = await client.submit(chain_spec(3, name="report"), variables={"topic": "kelp"},
                                    idempotency_key="kelp-1")
        assert (again.session_id, again.created) == (started.session_id, False)
        sid = started.session_id

        done = await client.wait(sid, timeout=60, poll=0.1)
        assert done.status == "completed" and done.steps_committed == 3
        assert done.variables["topic"] == "kelp"

        followed = [e async for e in client.events(sid)]
        types = [e.type for e in followed]
        assert types.count("step_completed") == 3 and types[-1] == "session_completed"
        history = [e async for e in client.events(sid, follow=False)]
        assert [e.id for e in history] == [e.id for e in followed]
        later = [e async for e in client.events(sid, after=followed[0].id)]
        assert [e.id for e in later] == [e.id for e in followed[1:]]

        (art,) = await client.artifacts(sid)
        assert art.name == "report-report.md"
        body = await client.artifact(sid, art.name)
        assert body.startswith(b"# Report\n") and len(body) == art.size_bytes

        marks = await client.checkpoints(sid)
        assert [c.n for c in marks] == [1, 2, 3]
        assert (await client.checkpoint(sid, 1)).n == 1
        forked = await client.fork(sid, 1, variables={"topic": "tides"})
        assert forked.forked_from == sid and forked.checkpoint == 1
        assert (await client.wait(forked.session_id, timeout=60, poll=0.1)).status == "completed"

        listed = [s.session_id async for s in client.list(workflow="report", page_size=1)]
        assert sorted(listed) == sorted([sid, forked.session_id])
        await client.delete(forked.session_id)
        with pytest.raises(NotFound) as gone:
            await client.get(forked.session_id)
        assert gone.value.code == "session_not_found"


async def test_async_fleet_views(served: tuple[Fleet, str]) -> None:
    fleet, url = served
    async with AsyncClient(url, token=TOKEN) as client:
        health = await client.health()
        assert health.status in ("ok", "degraded") and health.redis and health.redis.ok

        async def alive() -> list[int | None]:
            return [w.pid for w in await client.workers() if w.alive]

        # The worker may not have sent its first heartbeat when the API answers.
        assert await wait_for(alive, what="the worker's first heartbeat") == \
            [fleet.workers[0].pid]
        assert (await client.health()).status == "ok"
        queue = await client.queue()
        assert queue.shards and set(queue.total) >= {"lag", "pending", "dead_letters"}
        assert "durable_" in await client.metrics()


def test_sync_pause_resume_signal_cancel(served: tuple[Fleet, str]) -> None:
    fleet, url = served
    with Client(url, token=TOKEN) as client:
        fleet.breakpoints.set("plain", "step:0")
        sid = client.submit(chain_spec(2)).session_id
        fleet.breakpoints.wait_sync("plain", "step:0")
        assert client.pause(sid).status == "paused"
        fleet.breakpoints.clear("plain", "step:0")
        # Paused at once: the running step may still commit, nothing new is scheduled.
        assert client.wait(sid, timeout=60, poll=0.1).status == "paused"
        assert client.resume(sid, budgets={"max_tokens": 100_000}).status == "running"
        assert client.wait(sid, timeout=60, poll=0.1).status == "completed"

        asking = client.submit(HITL).session_id
        waiting = client.wait(asking, timeout=60, poll=0.1)
        assert waiting.status == "paused" and waiting.waiting[0].prompt == "Approve the draft?"
        client.signal(asking, "approved")
        assert client.wait(asking, timeout=60, poll=0.1).status == "completed"
        assert client.artifact(asking, "approved.md")

        fleet.breakpoints.set("plain", "step:0")
        doomed = client.submit(chain_spec(2)).session_id
        assert client.cancel(doomed).status == "cancelled"
        fleet.breakpoints.clear("plain", "step:0")
        ended = [e.type for e in client.events(doomed)]
        assert "session_cancelled" in ended
        with pytest.raises(Conflict) as refused:
            client.pause(doomed)
        assert isinstance(refused.value, ApiConflict) and refused.value.status == 409
        assert refused.value.code == "invalid_transition"


def test_sync_requeue_a_failed_step(served: tuple[Fleet, str]) -> None:
    _, url = served
    with Client(url, token=TOKEN) as client:
        sid = client.submit(FAILING).session_id
        failed = client.wait(sid, timeout=60, poll=0.1)
        assert failed.status == "failed" and "the model is down" in (failed.error or "")
        dry = client.requeue(sid, dry_run=True)
        assert [r.step for r in dry.requeued] == ["step:0"] and dry.dry_run
        assert client.get(sid).status == "failed"
        moved = client.requeue(sid)
        assert moved.statuses[sid] == "running"
        assert client.wait(sid, timeout=60, poll=0.1).status == "failed"
        types = [e.type for e in client.events(sid, follow=False)]
        assert types.count("step_requeued") == 1


async def test_errors_by_kind(served: tuple[Fleet, str]) -> None:
    _, url = served
    async with AsyncClient(url, token=TOKEN) as client:
        with pytest.raises(NotFound) as missing:
            await client.get(NOPE)
        assert isinstance(missing.value, ApiNotFound) and missing.value.status == 404
        assert missing.value.code == "session_not_found"
        with pytest.raises(ApiInvalidInput) as bad:
            await client.submit("version: 0\nname: x\n")
        assert bad.value.code == "invalid_spec" and isinstance(bad.value, InvalidInput)
        with pytest.raises(InvalidInput):
            await client.get("not-a-uuid")
    async with AsyncClient(url, token="wrong-" + TOKEN) as intruder:
        with pytest.raises(Unauthorized) as denied:
            await intruder.list().__anext__()
        assert denied.value.status == 401 and denied.value.code == "unauthorized"
        assert TOKEN not in str(denied.value) + repr(denied.value) + repr(intruder)


async def test_wait_outlives_a_killed_worker(served: tuple[Fleet, str]) -> None:
    fleet, url = served
    async with AsyncClient(url, token=TOKEN) as client:
        fleet.breakpoints.set("plain", "step:1")
        sid = (await client.submit(chain_spec(3))).session_id
        waiting = asyncio.create_task(client.wait(sid, timeout=90, poll=0.1))
        (hit,) = await fleet.breakpoints.wait("plain", "step:1")
        victim = fleet.workers[0]
        assert (hit.session, hit.pid) == (sid, victim.pid)
        await asyncio.to_thread(fleet.kill, victim)  # SIGKILL mid-step
        assert not waiting.done()
        fleet.breakpoints.clear("plain", "step:1")
        fleet.start_worker()
        done = await waiting
        assert done.status == "completed" and done.steps_committed == 3
        reclaimed = [e.step async for e in client.events(sid, follow=False)
                     if e.type == "step_reclaimed"]
        assert reclaimed == ["step:1"]


def test_sync_wait_times_out_clearly(served: tuple[Fleet, str]) -> None:
    fleet, url = served
    with Client(url, token=TOKEN) as client:
        fleet.breakpoints.set("plain", "step:0")
        sid = client.submit(chain_spec(1)).session_id
        fleet.breakpoints.wait_sync("plain", "step:0")
        with pytest.raises(TimeoutError) as late:
            client.wait(sid, timeout=0.3, poll=0.1)
        assert isinstance(late.value, Conflict) and late.value.code == "wait_timeout"
        fleet.breakpoints.clear("plain", "step:0")
        assert client.wait(sid, timeout=60, poll=0.1).status == "completed"


def start_api(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    """`durable api` on `port`, answering /healthz before it is returned."""
    with log.open("ab") as out:
        proc = subprocess.Popen([*durable_bin(), "api", "--port", str(port)], cwd=REPO,
                                env=env, stdout=out, stderr=subprocess.STDOUT)

    def answering() -> bool:
        assert proc.poll() is None, log.read_text(errors="replace")
        try:
            return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    wait_for_sync(answering, timeout_s=60, what="durable api to answer")
    return proc


async def test_events_resume_across_an_api_restart(fleet_factory: Callable[..., Fleet],
                                                   tmp_path: Path) -> None:
    fleet = fleet_factory()
    fleet.start_worker()
    port, log = free_port(), tmp_path / "api.log"
    api = await asyncio.to_thread(start_api, fleet.env, port, log)
    try:
        async with AsyncClient(f"http://127.0.0.1:{port}", retries=20) as client:
            fleet.breakpoints.set("plain", "step:1")
            sid = (await client.submit(chain_spec(3))).session_id
            seen: list[EventOut] = []

            async def follow() -> None:
                async for event in client.events(sid):
                    seen.append(event)

            following = asyncio.create_task(follow())
            await fleet.breakpoints.wait("plain", "step:1")
            async def step_0_seen() -> bool:
                return any(e.type == "step_completed" for e in seen)

            await wait_for(step_0_seen, what="step:0's completion on the followed stream")
            api.kill()  # SIGKILL: the stream drops without its `end` frame
            api.wait(timeout=30)
            api = await asyncio.to_thread(start_api, fleet.env, port, log)
            fleet.breakpoints.clear("plain", "step:1")
            await asyncio.wait_for(following, timeout=90)
    finally:
        api.kill()
        api.wait(timeout=30)
    ids = [e.id for e in seen]
    assert ids == sorted(set(ids), key=lambda i: tuple(map(int, i.split("-"))))
    assert [e.step for e in seen if e.type == "step_completed"] == ["step:0", "step:1", "step:2"]
    assert seen[-1].type == "session_completed"
