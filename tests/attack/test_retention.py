"""Unbounded growth and what anyone may read (issue 10, row 12): ended sessions and
their idempotency keys used to stay forever, events per session were uncapped, dead
workers' consumers lingered an hour, /healthz listed worker host-pid names to anyone
and /metrics listened on 0.0.0.0. Now the scheduler role expires completed, failed and
cancelled sessions past DURABLE_RETENTION_DAYS (30) with every key they own, a
session's events are capped at about DURABLE_EVENTS_MAX (10,000), consumers of workers
silent for DURABLE_WORKER_RETIRE_S (120 s) are retired, /healthz tells the status alone
without the token and /metrics binds DURABLE_METRICS_HOST (loopback by default).
Real redis-server, the real `durable scheduler` process, HTTP through the ASGI app."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from helpers import REPO, RedisServer, StepBreakpoints, free_port, wait_for, wait_for_sync
from helpers.api import TOKEN, asgi_client, chain_spec, make_app
from helpers.fleet import durable_bin

from strands_durable import metrics
from strands_durable.models import Event, now_ms
from strands_durable.sessions.control import cancel, pause
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.connect import open_store
from strands_durable.store.keys import CONSUMER_GROUP
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

DAY_MS = 86_400_000
LUA = REPO / "store" / "lua"

SPEC = """
version: 0
name: NAME
runtime:
  provider: scripted
  failure_policy: {retries: 0}
  script: {rules: [{contains: "boom", error: "exploded"}]}
agents:
  a: {prompt: "You are a."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "INPUT"}
"""


def spec(name: str, input_: str = "one") -> str:
    return SPEC.replace("NAME", name).replace("INPUT", input_)


async def start(store: Store, text: str, key: str | None = None) -> str:
    return (await start_session(store, load_spec_text(text, "spec.yaml"), key))[0]


async def has_status(store: Store, sid: str, status: str) -> bool:
    return (await store.get_session(sid)).status.value == status


async def keys_of(store: Store, sid: str) -> list[str]:
    return [k async for k in store.redis.scan_iter(f"{store.keys.prefix}*{sid}*")]


async def backdate(store: Store, sid: str, days: float) -> None:
    """As if the session had last changed `days` ago (the indexes retention reads)."""
    record = await store.get_session(sid)
    shard = store.keys.shard(sid)
    score = now_ms() - int(days * DAY_MS)
    await store.redis.zadd(store.keys.index_status(shard, record.status), {sid: score})
    await store.redis.zadd(store.keys.index_all(shard), {sid: score})


@contextmanager
def scheduler_process(redis_server: RedisServer, prefix: str, log: Path,
                      **env: str) -> Iterator[subprocess.Popen[bytes]]:
    environ = {**os.environ, "DURABLE_REDIS_URL": redis_server.url,
               "DURABLE_KEY_PREFIX": prefix, "DURABLE_SCHEDULER_CHECK_S": "0.2",
               "DURABLE_METRICS_PORT": "0", "PYTHONUNBUFFERED": "1", **env}
    with log.open("wb") as out:
        proc = subprocess.Popen([*durable_bin(), "scheduler"], cwd=REPO, env=environ,
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


# -- retention -----------------------------------------------------------------------------
async def test_the_scheduler_expires_ended_sessions_past_retention(
        redis_server: RedisServer, prefix: str, store: Store, consumer: StepConsumer,
        breakpoints: StepBreakpoints, tmp_path: Path) -> None:
    assert DurableSettings.model_fields["retention_days"].default == 30
    try:
        # Cancelled and paused while their step runs; "busy" stays running to the end.
        for workflow in ("stopped", "held", "busy"):
            breakpoints.set(workflow, "step:0")
        old = {"completed": await start(store, spec("done"), key="order-1"),
               "failed": await start(store, spec("bad", "boom")),
               "cancelled": await start(store, spec("stopped"))}
        kept = {"paused": await start(store, spec("held")),
                "running": await start(store, spec("busy")),
                "recent": await start(store, spec("fresh"))}
        for workflow in ("stopped", "held", "busy"):
            await breakpoints.wait(workflow, "step:0")
        # Their steps stay at the breakpoint: a step that finished later would touch the
        # session (its update time) after the backdating below.
        await cancel(store, old["cancelled"])
        await pause(store, kept["paused"])
        for status, sid in [*old.items(), *kept.items()]:
            want = "completed" if status == "recent" else status
            await wait_for(lambda s=sid, w=want: has_status(store, s, w), what=f"a {want} one")
        for sid in [*old.values(), kept["paused"], kept["running"]]:
            await backdate(store, sid, days=31)
        idem = store.keys.idempotency(store.keys.shard(old["completed"]), "order-1")
        assert await store.redis.exists(idem)

        with scheduler_process(redis_server, prefix, tmp_path / "scheduler.log"):
            async def expired() -> bool:
                return not any([await store.exists(sid) for sid in old.values()])

            await wait_for(expired, what="the scheduler to expire the old ended sessions")
        for sid in old.values():
            assert await keys_of(store, sid) == [], f"keys of {sid} left behind"
        assert not await store.redis.exists(idem)  # the idempotency key went with it
        for name, sid in kept.items():
            assert await store.exists(sid), name  # recent, running or paused: kept
    finally:  # a step left at a breakpoint would hold the consumer's stop
        for workflow in ("stopped", "held", "busy"):
            breakpoints.clear(workflow, "step:0")


async def test_retention_zero_keeps_everything(settings: DurableSettings, store: Store,
                                               consumer: StepConsumer) -> None:
    from strands_durable.scheduler.service import SchedulerService

    sid = await start(store, spec("done"))
    await wait_for(lambda: has_status(store, sid, "completed"), what="completion")
    await backdate(store, sid, days=400)
    keep = SchedulerService(settings.model_copy(update={"retention_days": 0}), store)
    assert await keep.expire_sessions(now_ms()) == []
    assert await store.exists(sid)
    expire = SchedulerService(settings, store)
    assert await expire.expire_sessions(now_ms()) == [sid]


# -- events per session --------------------------------------------------------------------
def test_every_event_write_is_capped() -> None:
    """Every XADD to a session's event stream goes through the capped helper: the Lua
    scripts' add_events (MAXLEN ~) with the cap passed in, and the Python writes."""
    lib = (LUA / "_lib.lua").read_text()
    assert re.search(r"XADD', events_key, 'MAXLEN', '~', maxlen", lib)
    for script in LUA.glob("*.lua"):
        text = script.read_text()
        for call in re.findall(r"add_events\(([^)]*)\)", text):
            if script.name != "_lib.lua":
                assert len(call.split(",")) == 3, f"{script.name}: add_events({call})"
        for line in text.splitlines():
            # The other XADDs park an entry on the shard's dead letters (dead_letter.lua's
            # and park_entry.lua's dead_key), not on a session's events; an import writes
            # the exported events with their own ids, a count sessions/transfer.py refuses
            # past DURABLE_EVENTS_MAX before the script runs; the live stream is capped by
            # its own MAXLEN (DURABLE_LIVE_MAX) and expires.
            dead_letters = {"dead_letter.lua": "'XADD', dead_key",
                            "park_entry.lua": "'XADD', dead_key",
                            "import_session.lua": "'XADD', events_key, event[1]",
                            "live_append.lua": "'XADD', live_key, 'MAXLEN', '~', maxlen"}
            if "XADD" in line and not line.lstrip().startswith("--"):
                assert script.name == "_lib.lua" or (
                    dead_letters.get(script.name, "-") in line), f"{script.name}: {line}"
    rooms = ("store", "sessions", "scheduler", "worker", "api", "metrics")
    for path in [path for room in rooms for path in REPO.glob(f"{room}/**/*.py")]:
        text = path.read_text()
        for match in re.finditer(r"xadd\((?:[^()]|\([^()]*\))*\)", text, re.S):
            if ".events(" in match.group(0):
                assert "maxlen=" in match.group(0), f"{path.name}: {match.group(0)}"


async def test_a_sessions_events_stay_near_the_cap(settings: DurableSettings,
                                                   breakpoints: StepBreakpoints) -> None:
    capped = settings.model_copy(update={"events_max": 100})
    store = open_store(capped)
    await store.prepare()
    consumer = StepConsumer(capped, store)
    await consumer.start()

    async def long_history(sid: str) -> str:
        """500 events written behind the store's back: a long-lived session's history."""
        events = store.keys.events(sid)
        async with store.redis.pipeline(transaction=False) as pipe:
            for i in range(500):
                pipe.xadd(events, {"type": "note", "detail": str(i)})
            await pipe.execute()
        return events

    try:
        # Steps (gate and commit scripts) trim as they write: the long history is written
        # while step:1 waits at its breakpoint, so steps 1 and 2 still have to write.
        breakpoints.set("stepping", "step:1")
        stepping = await start(store, chain_spec(3, name="stepping"))
        await breakpoints.wait("stepping", "step:1")
        events = await long_history(stepping)
        breakpoints.clear("stepping", "step:1")
        await wait_for(lambda: has_status(store, stepping, "completed"), what="completion")
        lengths = {"steps": await store.redis.xlen(events)}
        # A control script (pause) trims: the session is running (held at step:0).
        breakpoints.set("pausing", "step:0")
        paused = await start(store, chain_spec(2, name="pausing"))
        await breakpoints.wait("pausing", "step:0")
        events = await long_history(paused)
        await pause(store, paused)
        lengths["control"] = await store.redis.xlen(events)
        breakpoints.clear("pausing", "step:0")
        # The store's Python write trims.
        events = await long_history(stepping)
        await store.add_event(stepping, Event("note", detail="python"))
        lengths["python"] = await store.redis.xlen(events)
    finally:
        await consumer.stop(grace_s=0)
        await store.redis.aclose()
    # MAXLEN ~ trims whole stream nodes (100 entries by default): from cap to cap + 99.
    for path, length in lengths.items():
        assert 100 <= length < 200, (path, length)


# -- dead workers' consumers ----------------------------------------------------------------
async def test_a_dead_workers_consumer_is_retired_within_minutes(
        redis_server: RedisServer, prefix: str, store: Store, consumer: StepConsumer,
        tmp_path: Path) -> None:
    assert DurableSettings.model_fields["worker_retire_s"].default <= 300
    stream = store.keys.stream(0)
    # A worker that joined the group (nothing left pending), beat ten minutes ago, died.
    await store.redis.xgroup_createconsumer(stream, CONSUMER_GROUP, "dead-host-1-abc")
    # The live worker's consumer, idle as long (nothing to read) but beating.
    await store.redis.xgroup_createconsumer(stream, CONSUMER_GROUP, consumer.name)
    await store.redis.hset(store.keys.workers(), "dead-host-1-abc",
                           json.dumps({"consumer": "dead-host-1-abc",
                                       "last_seen_ms": now_ms() - 600_000}))

    async def names() -> set[str]:
        return {c["name"] for c in await store.redis.xinfo_consumers(stream, CONSUMER_GROUP)}

    assert "dead-host-1-abc" in await names()
    with scheduler_process(redis_server, prefix, tmp_path / "scheduler.log",
                           DURABLE_WORKER_RETIRE_S="5"):  # the live one beats within it under load
        async def retired() -> bool:
            return "dead-host-1-abc" not in await names() and not await store.redis.hexists(
                store.keys.workers(), "dead-host-1-abc")

        await wait_for(retired, what="the dead worker's consumer to be retired")
    # The live in-process worker, idle but beating, is untouched.
    assert consumer.name in await names()
    assert await store.redis.hexists(store.keys.workers(), consumer.name)


# -- /healthz ----------------------------------------------------------------------------------
async def test_healthz_tells_the_status_alone_without_the_token(
        settings: DurableSettings, store: Store, consumer: StepConsumer) -> None:
    app = make_app(settings, api_token=TOKEN)
    async with asgi_client(app) as anonymous:
        async def ok() -> httpx.Response | None:
            r = await anonymous.get("/healthz")
            return r if r.json().get("status") == "ok" else None

        r = await wait_for(ok, what="a healthy fleet")
        assert r.status_code == 200 and r.json() == {"status": "ok"}
        assert consumer.name not in r.text
        wrong = await anonymous.get("/healthz", headers={"Authorization": "Bearer nope"})
        assert wrong.json() == {"status": "ok"}
    async with asgi_client(app, token=TOKEN) as allowed:
        doc = (await allowed.get("/healthz")).json()
        assert doc["workers"]["names"] == [consumer.name] and doc["redis"]["ok"] is True
    down = make_app(settings.model_copy(
        update={"redis_url": f"redis://127.0.0.1:{free_port()}/0"}), api_token=TOKEN)
    async with asgi_client(down) as anonymous:
        r = await anonymous.get("/healthz")
        assert r.status_code == 503 and r.json() == {"status": "unavailable"}


# -- /metrics' address ---------------------------------------------------------------------------
def listening_on(port: int) -> set[str]:
    """The local addresses with a TCP socket listening on `port` (Linux /proc)."""
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        if not os.path.exists(table):
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            addr, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port:
                if width == 8:
                    found.add(".".join(str(int(addr[i:i + 2], 16)) for i in (6, 4, 2, 0)))
                else:
                    found.add("::" if set(addr) == {"0"} else addr)
    return found


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs Linux /proc/net/tcp")
def test_metrics_listen_on_loopback_unless_told(redis_server: RedisServer, prefix: str,
                                                tmp_path: Path) -> None:
    class Idle:
        running = 0
        slot_limit = 1

    port = free_port()
    server = metrics.start_worker_metrics(port, Idle(), concurrency=1)
    assert server is not None
    try:
        assert listening_on(port) == {"127.0.0.1"}
    finally:
        metrics.stop_worker_metrics(server)
    for host, expected in ((None, {"127.0.0.1"}), ("0.0.0.0", {"0.0.0.0"})):
        port = free_port()
        env = {"DURABLE_METRICS_PORT": str(port)}
        if host:
            env["DURABLE_METRICS_HOST"] = host
        with scheduler_process(redis_server, prefix, tmp_path / f"s{port}.log", **env):
            wait_for_sync(lambda p=port: listening_on(p), what="the scheduler's /metrics")
            assert listening_on(port) == expected
