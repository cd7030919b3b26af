"""`python -m bench.cluster`: no-op steps/s of real `arq strands_durable.worker.WorkerSettings`
processes against a private Redis Cluster of 1, 2 and 3 primaries (no replicas, loopback),
the same fleet and load on each; the ratio to 1 primary, and each node's CPU.

Shard k's slot is placed on primary k % N (bench/cluster_nodes.py), so each primary
serves the same number of shards; sessions pick a random shard, as in production. After
each run every step of every session is checked to have committed exactly once."""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from bench.cluster_nodes import HOST, BenchCluster, start_bench_cluster
from bench.integrity import CommittedTwice, check_once, completed_sessions
from bench.procs import Procs, clean_env
from bench.redis_server import PrivateRedis, start_redis
from bench.redis_stats import RedisSnapshot
from bench.specs import chain_spec
from bench.throughput import WORKER_START_TIMEOUT_S, BenchError, _wait, fresh_prefix
from strands_durable.models import SessionStatus
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.store import Store


@dataclass
class NodeCost:
    port: int
    shards: int  # shards whose slot this primary serves
    busy: float  # redis-server CPU seconds / wall seconds of the window
    cpu_us: float  # per step of the whole run
    round_trips: float  # per step of the whole run


@dataclass
class ClusterRow:
    primaries: int
    workers: int
    shards: int
    steps: int
    seconds: float  # the median run's
    runs: list[float] = field(default_factory=list)
    nodes: list[NodeCost] = field(default_factory=list)  # the median run's

    @property
    def rate(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "rate": round(self.rate, 1)}


@dataclass
class Standalone:
    """One plain redis-server, for the row the cluster rows are compared with (primaries
    0 in the table): the same fleet, shards and load."""

    server: PrivateRedis
    shards: int

    @property
    def ports(self) -> list[int]:
        return [self.server.port]

    @property
    def url(self) -> str:
        return self.server.url

    def serving(self, shard: int) -> int:
        return self.server.port

    def stop(self) -> None:
        self.server.stop()


Target = BenchCluster | Standalone


def start_target(primaries: int, shards: int) -> Target:
    if primaries == 0:
        return Standalone(start_redis(), shards)
    return start_bench_cluster(primaries, shards)


async def _snapshots(cluster: Target) -> list[RedisSnapshot]:
    snaps = []
    for port in cluster.ports:
        client = Redis(host=HOST, port=port)
        try:
            snaps.append(await RedisSnapshot.take(client))
        finally:
            await client.aclose()
    return snaps


async def _all_done(store: Store, sessions: int, procs: Procs) -> bool:
    keys = store.keys
    done = failed = 0
    for shard in range(keys.shards):  # one slot per shard: one command each
        done += int(await store.redis.zcard(keys.index_status(shard, SessionStatus.COMPLETED)))
        failed += int(await store.redis.zcard(keys.index_status(shard, SessionStatus.FAILED)))
    if failed:
        raise BenchError(f"{failed} bench session(s) failed:\n{procs.tail()}")
    return done >= sessions


async def _timed(store: Store, cluster: Target, procs: Procs, sessions: int,
                 steps: int, timeout_s: float) -> tuple[float, list[NodeCost]]:
    """Submit `sessions` chains, wait until all completed; seconds and each node's cost."""
    loaded = chain_spec(steps)
    before = await _snapshots(cluster)
    t0 = time.perf_counter()
    made = await asyncio.gather(*(start_session(store, loaded) for _ in range(sessions)))
    assert all(created for _, created in made)
    await _wait(lambda: _all_done(store, sessions, procs), timeout_s,
                f"{sessions} sessions to complete", procs, interval_s=0.02)
    elapsed = time.perf_counter() - t0
    after = await _snapshots(cluster)
    total = sessions * steps
    served = [sum(cluster.serving(k) == port for k in range(cluster.shards))
              for port in cluster.ports]
    nodes = [NodeCost(port, n, (a.cpu_s - b.cpu_s) / elapsed,
                      (a.cpu_s - b.cpu_s) * 1e6 / total, (a.reads - b.reads) / total)
             for port, n, b, a in zip(cluster.ports, served, before, after, strict=True)]
    return elapsed, nodes


async def run_cluster(primaries: int, logdir: Path, *, workers: int, shards: int,
                      sessions: int, steps: int, concurrency: int,
                      timeout_s: float) -> tuple[float, list[NodeCost]]:
    """One run: a fresh cluster (a plain redis-server for 0 primaries), `workers` no-op
    workers, `sessions` x `steps` steps."""
    try:
        cluster = start_target(primaries, shards)
    except RuntimeError as exc:
        raise BenchError(str(exc)) from None
    prefix = fresh_prefix(f"cluster{primaries}")
    settings = DurableSettings(redis_url=cluster.url, key_prefix=prefix, shards=shards,
                               worker_concurrency=concurrency)
    store = open_store(settings)
    env = clean_env(DURABLE_REDIS_URL=cluster.url, DURABLE_KEY_PREFIX=prefix,
                    DURABLE_SHARDS=str(shards), DURABLE_WORKER_CONCURRENCY=str(concurrency),
                    DURABLE_LOG_LEVEL="WARNING", DURABLE_BENCH_NOOP="1",
                    DURABLE_METRICS_PORT="0")
    procs = Procs(logdir)
    try:
        await store.prepare()
        for _ in range(workers):
            procs.start(f"worker-p{primaries}", ["strands_durable.worker.WorkerSettings"], env)

        async def beating() -> bool:
            return int(await store.redis.hlen(store.keys.workers())) >= workers

        await _wait(beating, WORKER_START_TIMEOUT_S, f"{workers} worker heartbeat(s)", procs,
                    interval_s=0.05)
        elapsed, nodes = await _timed(store, cluster, procs, sessions, steps, timeout_s)
        procs.stop()
        sids = await completed_sessions(store.redis, store.keys)
        try:
            await check_once(store.redis, store.keys, sids, steps)
        except CommittedTwice as exc:
            raise BenchError(f"EXACTLY-ONCE BROKEN: {exc}") from None
    finally:
        procs.stop()
        await store.redis.aclose()
        cluster.stop()
    return elapsed, nodes


def table(rows: list[ClusterRow], args: argparse.Namespace) -> list[str]:
    head = (f"{'primaries':>9} {'workers':>7} {'shards':>6} {'steps':>6} {'seconds':>7} "
            f"{'steps/s':>8} {'x 1 primary':>11}  redis CPU per node: busy % (us/step, RT/step)")
    out = [f"Redis Cluster, no-op steps: {args.sessions} x {args.steps}-step chains, "
           f"concurrency {args.concurrency}, median of {args.repeat} run(s)", head,
           "-" * len(head)]
    base = next((r.rate for r in rows if r.primaries == 1), None)
    for r in rows:
        ratio = f"{r.rate / base:.2f}" if base and r.primaries else "-"
        nodes = "; ".join(f"{n.busy * 100:.0f}% ({n.cpu_us:.0f}, {n.round_trips:.2f})"
                          for n in r.nodes)
        label = str(r.primaries) if r.primaries else "none"
        rates = sorted(r.steps / s for s in r.runs if s > 0)
        spread = (f"  [{len(rates)} runs: {rates[0]:,.0f}-{rates[-1]:,.0f}]"
                  if len(rates) > 1 else "")
        out.append(f"{label:>9} {r.workers:>7} {r.shards:>6} {r.steps:>6} "
                   f"{r.seconds:>7.2f} {r.rate:>8,.0f} {ratio:>11}  {nodes}{spread}")
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.cluster", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--primaries", default="1,2,3",
                   help="primary counts (default 1,2,3); 0: a plain redis-server, no "
                        "cluster, for comparison")
    p.add_argument("--workers", type=int, default=4,
                   help="worker processes, the same for every row (default 4)")
    p.add_argument("--shards", type=int, default=12,
                   help="DURABLE_SHARDS, spread evenly over the primaries (default 12)")
    p.add_argument("--sessions", type=int, default=60)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--repeat", type=int, default=1, help="runs per row, median reported")
    p.add_argument("--quick", action="store_true", help="24 x 10-step chains: a smoke run")
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args(argv)
    if args.quick:
        args.sessions, args.steps = 24, 10
    try:
        args.counts = [int(x) for x in args.primaries.split(",") if x.strip()]
    except ValueError:
        p.error(f"--primaries: numbers separated by commas, got {args.primaries!r}")
    if not args.counts or min(args.counts) < 0 or max(args.counts) > args.shards:
        p.error("--primaries: each between 0 (no cluster) and --shards")
    return args


async def bench(args: argparse.Namespace) -> list[ClusterRow]:
    logdir = Path(tempfile.mkdtemp(prefix="durable-bench-cluster-"))
    rows: list[ClusterRow] = []
    runs: dict[int, list[tuple[float, list[NodeCost]]]] = {n: [] for n in args.counts}
    ok = False
    try:
        for rep in range(args.repeat):  # interleaved: every row sees the same noise
            for n in args.counts:
                what = f"{n} primar{'y' if n == 1 else 'ies'}" if n else "plain redis-server"
                log(f"{what}, {args.workers} workers, "
                    f"run {rep + 1}/{args.repeat} ...")
                runs[n].append(await run_cluster(
                    n, logdir, workers=args.workers, shards=args.shards,
                    sessions=args.sessions, steps=args.steps, concurrency=args.concurrency,
                    timeout_s=args.timeout))
        for n in args.counts:
            mid = statistics.median(s for s, _ in runs[n])
            seconds, nodes = min(runs[n], key=lambda r: abs(r[0] - mid))
            rows.append(ClusterRow(n, args.workers, args.shards, args.sessions * args.steps,
                                   seconds, [s for s, _ in runs[n]], nodes))
        ok = True
    finally:
        if ok:
            shutil.rmtree(logdir, ignore_errors=True)
        else:
            log(f"worker logs kept in {logdir}")
    return rows


def log(msg: str) -> None:
    print(f"[bench.cluster] {msg}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        rows = asyncio.run(bench(args))
    except BenchError as exc:
        print(f"bench.cluster failed: {exc}", file=sys.stderr)
        return 2
    print("\n".join(table(rows, args)))
    if args.json:
        Path(args.json).write_text(json.dumps([r.to_dict() for r in rows], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
