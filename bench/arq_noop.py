"""arq settings for the reference runs: `arq bench.arq_noop.WorkerSettings`.

A no-op job (and `agent_step`, the same Strands call as our step: bench/arq_agent.py),
burst mode, `max_jobs` like our worker concurrency. Workers wait at a
start barrier (so interpreter start-up is not timed) and record when they finish.
Configured by env: BENCH_ARQ_PORT, BENCH_ARQ_QUEUE, BENCH_ARQ_MAX_JOBS, BENCH_ARQ_POLL_DELAY.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from arq.connections import RedisSettings

from bench.arq_agent import agent_step

QUEUE = os.environ.get("BENCH_ARQ_QUEUE", "bench:arq")
READY_KEY = f"{QUEUE}:ready"
GO_KEY = f"{QUEUE}:go"
DONE_KEY = f"{QUEUE}:done"


async def noop(ctx: dict[str, Any]) -> None:
    return None


async def _startup(ctx: dict[str, Any]) -> None:
    redis = ctx["redis"]
    await redis.incr(READY_KEY)
    while not await redis.exists(GO_KEY):
        await asyncio.sleep(0.002)


async def _shutdown(ctx: dict[str, Any]) -> None:
    await ctx["redis"].rpush(DONE_KEY, repr(time.time()))


class WorkerSettings:
    functions = [noop, agent_step]
    on_startup = _startup
    on_shutdown = _shutdown
    redis_settings = RedisSettings(host="127.0.0.1", port=int(os.environ.get("BENCH_ARQ_PORT",
                                                                             "6379")))
    queue_name = QUEUE
    max_jobs = int(os.environ.get("BENCH_ARQ_MAX_JOBS", "8"))
    poll_delay = float(os.environ.get("BENCH_ARQ_POLL_DELAY", "0.5"))
    burst = True
    health_check_interval = 3600
