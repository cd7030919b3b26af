"""Fair dispatch between namespaces: how long namespace B's sessions take beside a backlog
of namespace A's steps, against the same on an empty fleet (docs/tenants.md).

    python -m bench.fairness                 # 5,000 of A's steps queued, B: 20 chains of 3
    python -m bench.fairness --backlog 1000 --json out.json

Real StepConsumers (what `arq worker` starts), in this process, on a private
redis-server, every step a `scripted` model call of `--delay-s` (0.05 s). Each run:
  * empty: the consumers start, then B submits its chains (namespace team-b) at once;
  * backlog: A's one-step sessions (namespace team-a) are created first, the consumers
    start and run A for a moment, then B submits the same chains.
A session's time is from its submit to its completion (the completed index's score).
Printed: B's p50 / p95 / max in both runs, p95 backlog / empty (the goal: <= 1.5), and
how many of A's steps were still queued when B's last session completed. Every session
of both runs is checked to have committed each step exactly once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.integrity import CommittedTwice, check_once
from bench.latency import percentile
from bench.redis_server import start_redis
from bench.specs import chain_spec
from bench.throughput import BenchError, fresh_prefix
from strands_durable.models import SessionStatus
from strands_durable.sessions.start import in_namespace, new_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import LoadedSpec
from strands_durable.store.connect import open_store
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

CREATE_BATCH = 250  # A's sessions created concurrently at a time
TARGET = 1.5  # B's p95 beside the backlog / on an empty fleet (issue 29)


@dataclass
class RunResult:
    label: str
    backlog: int  # A's steps queued when B submitted
    p50_s: float
    p95_s: float
    max_s: float
    a_left: int  # A's sessions not completed when B's last one was
    seconds: float  # the run, to its last session's end


async def create(store: Store, loaded: LoadedSpec, namespace: str, n: int) -> list[str]:
    sids: list[str] = []
    for i in range(0, n, CREATE_BATCH):
        batch = [store.create_session(in_namespace(new_session(loaded), namespace))
                 for _ in range(min(CREATE_BATCH, n - i))]
        sids += [sid for sid, _ in await asyncio.gather(*batch)]
    return sids


async def completed_at(store: Store, sids: list[str], timeout_s: float) -> list[int]:
    """Each session's completion (ms, the completed index's score), once all are done."""
    done_key = store.keys.index_status(0, SessionStatus.COMPLETED)
    failed_key = store.keys.index_status(0, SessionStatus.FAILED)
    deadline = time.monotonic() + timeout_s
    while True:
        scores = [await store.redis.zscore(done_key, sid) for sid in sids]
        if all(s is not None for s in scores):
            return [int(s or 0) for s in scores]
        if await store.redis.zcard(failed_key):
            raise BenchError("a session failed")
        if time.monotonic() > deadline:
            raise BenchError(f"{sum(s is not None for s in scores)}/{len(sids)} of B's "
                             f"sessions done after {timeout_s:.0f}s")
        await asyncio.sleep(0.01)


async def one_run(url: str, args: argparse.Namespace, backlog: int) -> RunResult:
    settings = DurableSettings(redis_url=url, key_prefix=fresh_prefix("fair"),
                               worker_concurrency=args.concurrency)
    store = open_store(settings)
    consumers = [StepConsumer(settings, store) for _ in range(args.workers)]
    a_chain, b_chain = chain_spec(1, args.delay_s), chain_spec(args.steps, args.delay_s)
    try:
        a = await create(store, a_chain, "team-a", backlog)
        t0 = time.perf_counter()
        for consumer in consumers:
            await consumer.start()
        if backlog:
            await asyncio.sleep(args.head_start_s)  # A's steps are running: B arrives late
        queued = await store.redis.xlen(store.keys.stream(0)) + await deferred(store)
        submitted_ms = int(time.time() * 1000)
        b = await create(store, b_chain, "team-b", args.sessions)
        ends = await completed_at(store, b, args.timeout)
        done_key = store.keys.index_status(0, SessionStatus.COMPLETED)
        a_done = sum([1 for s in [await store.redis.zscore(done_key, sid) for sid in a]
                      if s is not None])
        await completed_at(store, a, args.timeout)
        seconds = time.perf_counter() - t0
        try:
            await check_once(store.redis, store.keys, b, args.steps)
            await check_once(store.redis, store.keys, a, 1)
        except CommittedTwice as exc:
            raise BenchError(f"EXACTLY-ONCE BROKEN: {exc}") from None
    finally:
        for consumer in consumers:
            await consumer.stop(grace_s=5)
        await store.redis.aclose()
    took = [(end - submitted_ms) / 1000 for end in ends]
    return RunResult("beside A's backlog" if backlog else "empty fleet", queued if backlog
                     else 0, percentile(took, 50), percentile(took, 95), max(took),
                     len(a) - a_done, seconds)


async def deferred(store: Store) -> int:
    """A's steps moved aside by the fair take (waiting on their namespace's list)."""
    return await store.deferred_steps(0)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.fairness", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backlog", type=int, default=5000, help="A's queued one-step sessions")
    p.add_argument("--sessions", type=int, default=20, help="B's chains")
    p.add_argument("--steps", type=int, default=3, help="steps of each of B's chains")
    p.add_argument("--delay-s", type=float, default=0.05, help="each model call (scripted)")
    p.add_argument("--workers", type=int, default=2, help="StepConsumers")
    p.add_argument("--concurrency", type=int, default=25, help="each one's step slots")
    p.add_argument("--head-start-s", type=float, default=1.0,
                   help="A runs this long before B submits")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--json", type=Path, default=None)
    return p.parse_args(argv)


async def run_fairness(url: str, args: argparse.Namespace) -> list[RunResult]:
    """The empty run, then the run beside A's backlog, on the redis-server at `url`."""
    return [await one_run(url, args, 0), await one_run(url, args, args.backlog)]


async def bench(args: argparse.Namespace) -> list[RunResult]:
    server = start_redis()
    try:
        return await run_fairness(server.url, args)
    finally:
        server.stop()


def table(args: argparse.Namespace, runs: list[RunResult]) -> list[str]:
    empty, busy = runs
    lines = [f"B: {args.sessions} chains x {args.steps} steps ({args.delay_s}s model calls), "
             f"{args.workers} consumers x {args.concurrency} slots",
             f"{'run':<20} {'A queued':>9} {'B p50 s':>8} {'B p95 s':>8} {'B max s':>8} "
             f"{'A left':>7}"]
    for r in runs:
        lines.append(f"{r.label:<20} {r.backlog:>9,} {r.p50_s:>8.3f} {r.p95_s:>8.3f} "
                     f"{r.max_s:>8.3f} {r.a_left:>7,}")
    ratio = busy.p95_s / empty.p95_s if empty.p95_s else float("nan")
    verdict = "met" if ratio <= TARGET else "MISSED"
    lines.append(f"B's p95 beside the backlog / empty fleet: {ratio:.2f}x "
                 f"(target <= {TARGET}x: {verdict})")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        runs = asyncio.run(bench(args))
    except BenchError as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        return 2
    print("\n".join(table(args, runs)))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in runs], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
