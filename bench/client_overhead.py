"""The Python client's cost over a raw HTTP call (issue 28's goal: `Client.get` p50 within
1 ms of a raw httpx call on the same route).

One `durable api` process on a private redis-server, one session in it. The same route,
GET /v1/sessions/{id}, is called by a raw `httpx.Client` (bearer header, JSON parsed to a
dict) and by `strands_durable.Client.get` (the same, plus decoding into the API's
`SessionDetail` model and mapping errors), each keeping one connection alive; then the
same with `httpx.AsyncClient` and `AsyncClient.get`. The calls alternate in batches so
machine noise falls on both sides. What a figure depends on: the session's size (the
document decoded; here one running chain session) and the API's own time, which both
sides pay.

    python -m bench.client_overhead [--calls 2000] [--batch 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from bench.latency import percentile
from bench.procs import clean_env
from bench.redis_server import free_port, start_redis
from bench.throughput import BenchError, fresh_prefix
from strands_durable.client import AsyncClient, Client
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.connect import open_store

TOKEN = "bench-client-overhead-token"
SPEC = """
version: 0
name: client-overhead
runtime: {provider: scripted}
agents: {a: {prompt: "You answer."}}
pattern: {type: chain, config: {steps: [{agent: a, input: "one"}, {agent: a, input: "two"}]}}
"""


def timed_ms(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


async def timed_ms_async(call: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await call()
    return (time.perf_counter() - started) * 1000


def sync_row(base: str, sid: str, calls: int, batch: int) -> dict[str, float]:
    raw_ms: list[float] = []
    ours_ms: list[float] = []
    headers = {"authorization": f"Bearer {TOKEN}"}
    path = f"/v1/sessions/{sid}"
    with httpx.Client(base_url=base, headers=headers, timeout=30) as raw, \
            Client(base, token=TOKEN) as ours:
        def raw_get() -> Any:
            response = raw.get(path)
            response.raise_for_status()
            return response.json()

        for _ in range(3):  # warm both connections and code paths
            raw_get()
            ours.get(sid)
        for _ in range(calls // batch):
            raw_ms += [timed_ms(raw_get) for _ in range(batch)]
            ours_ms += [timed_ms(lambda: ours.get(sid)) for _ in range(batch)]
    return summary(raw_ms, ours_ms)


async def async_row(base: str, sid: str, calls: int, batch: int) -> dict[str, float]:
    raw_ms: list[float] = []
    ours_ms: list[float] = []
    headers = {"authorization": f"Bearer {TOKEN}"}
    path = f"/v1/sessions/{sid}"
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as raw, \
            AsyncClient(base, token=TOKEN) as ours:
        async def raw_get() -> Any:
            response = await raw.get(path)
            response.raise_for_status()
            return response.json()

        async def ours_get() -> Any:
            return await ours.get(sid)

        for _ in range(3):
            await raw_get()
            await ours_get()
        for _ in range(calls // batch):
            raw_ms += [await timed_ms_async(raw_get) for _ in range(batch)]
            ours_ms += [await timed_ms_async(ours_get) for _ in range(batch)]
    return summary(raw_ms, ours_ms)


def summary(raw_ms: list[float], ours_ms: list[float]) -> dict[str, float]:
    raw50, ours50 = percentile(raw_ms, 50), percentile(ours_ms, 50)
    return {"calls": len(raw_ms), "raw_p50_ms": round(raw50, 3),
            "client_p50_ms": round(ours50, 3), "p50_over_ms": round(ours50 - raw50, 3),
            "raw_p95_ms": round(percentile(raw_ms, 95), 3),
            "client_p95_ms": round(percentile(ours_ms, 95), 3)}


async def one_session(redis_url: str, prefix: str) -> str:
    store = open_store(DurableSettings(redis_url=redis_url, key_prefix=prefix))
    await store.prepare()
    try:
        sid, _ = await start_session(store, load_spec_text(SPEC, "overhead.yaml"))
        return sid
    finally:
        await store.close()


def wait_answering(base: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise BenchError("durable api did not answer /healthz")


def run(calls: int, batch: int) -> dict[str, Any]:
    redis = start_redis()
    prefix = fresh_prefix("client")
    port = free_port()
    env = clean_env(DURABLE_REDIS_URL=redis.url, DURABLE_KEY_PREFIX=prefix,
                    DURABLE_API_TOKEN=TOKEN, DURABLE_METRICS_PORT="0")
    api = subprocess.Popen([sys.executable, "-m", "strands_durable.api.cli", "api",
                            "--host", "127.0.0.1", "--port", str(port)], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_answering(base)
        sid = asyncio.run(one_session(redis.url, prefix))
        return {"sync": sync_row(base, sid, calls, batch),
                "async": asyncio.run(async_row(base, sid, calls, batch))}
    finally:
        api.kill()
        api.wait(timeout=30)
        redis.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.client_overhead", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = run(args.calls, args.batch)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for name, row in rows.items():
        print(f"client overhead ({name}): GET /v1/sessions/{{id}} p50 {row['client_p50_ms']} ms "
              f"through the client vs {row['raw_p50_ms']} ms raw httpx = "
              f"+{row['p50_over_ms']} ms (target <= 1 ms); p95 {row['client_p95_ms']} vs "
              f"{row['raw_p95_ms']} ms; {row['calls']} calls each, alternating batches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
