"""A fleet against a provider's account limit (issue 26): real `arq` workers, a local
OpenAI-compatible server that takes `--per-second` requests a second and `--at-once` in
flight and answers 429 + Retry-After beyond, and chains of `--steps` steps.

    python -m bench.capacity                          # three runs, about two minutes
    python -m bench.capacity --modes learned --sessions 20 --json out.json

Modes, each a fresh keyspace on one private redis-server:
- `off`: DURABLE_CAPACITY_ENABLED=false, every worker meets the limit alone (as before);
- `learned`: nothing declared; the server names its limit in every answer, as OpenAI
  does (`x-ratelimit-limit-requests`), and the fleet paces itself under it;
- `silent`: nothing declared, and the server names its limit only on a 429: the fleet
  learns it by meeting it;
- `declared`: DURABLE_CAPACITY_LIMITS names the server's limits;
- `fair`: fair share (limits declared): `--sessions` chains alone, then beside one
  session of `--branches` parallel branches submitted first; printed: the chains' p95
  completion time in both runs and its ratio (the goal: <= 2x). Use enough
  `--concurrency` that every branch and step is taken at once (a waiting step costs a
  coroutine): then the provider key's fair share, not the stream's order, decides.

Printed per mode: sessions completed and failed, requests answered and throttled (and
the share throttled), goodput (accepted requests a second from the first answered to the
last) as a share of the server's limit, the wall time (worker start-up included) and the
requests accepted in each second. Goodput depends on the server's latency
(`--delay-s`) against its concurrency: 6 at once x 0.4 s caps it at 15 a second, so
the 10-a-second limit binds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.limited_llm import limited_llm
from bench.procs import Procs, clean_env
from bench.redis_server import start_redis

SPEC = """
version: 0
name: capacity-{n}
runtime: {{provider: openai, model_id: gpt-limited, host: "{host}",
          failure_policy: {{retries: 2, backoff: exponential, wait_min: 1, wait_max: 4}}}}
agents: {{a: {{prompt: "You answer."}}}}
pattern: {{type: chain, config: {{steps: [{steps}]}}}}
"""


@contextlib.asynccontextmanager
async def _fleet(args: argparse.Namespace, redis_url: str, logdir: Path, prefix: str,
                 name: str, limits: bool | None) -> AsyncIterator[tuple[Any, Procs, Any]]:
    """The limited server, a store on `prefix` and `args.workers` workers calling it.
    limits: None turns fleet capacity off, False leaves the limit to be learned, True
    declares the server's limit."""
    from strands_durable.provider_policy import current_provider_policy
    from strands_durable.settings import DurableSettings
    from strands_durable.store.connect import open_store

    with limited_llm(per_second=args.per_second, at_once=args.at_once,
                     delay_s=args.delay_s, names_limit=name != "silent") as server:
        env = clean_env(DURABLE_REDIS_URL=redis_url, DURABLE_KEY_PREFIX=prefix,
                        DURABLE_METRICS_PORT="0", DURABLE_WORKER_CONCURRENCY=str(args.concurrency),
                        DURABLE_OPENAI_HOSTS=server.url(), OPENAI_API_KEY="bench")
        if limits is None:
            env["DURABLE_CAPACITY_ENABLED"] = "false"
        elif limits:
            env["DURABLE_CAPACITY_LIMITS"] = json.dumps([{
                "provider": "openai", "model": "gpt-limited", "rpm": args.per_second * 60,
                "in_flight": args.at_once}])
        os.environ["DURABLE_OPENAI_HOSTS"] = server.url()  # this process loads the specs
        current_provider_policy.cache_clear()
        procs = Procs(logdir)
        store = open_store(DurableSettings(redis_url=redis_url, key_prefix=prefix))
        await store.prepare()
        try:
            for _ in range(args.workers):
                procs.start(f"{name}-worker", ["strands_durable.worker.WorkerSettings"], env)
            await _all_up(store, procs, args.workers)
            yield server, procs, store
        finally:
            procs.stop()
            await store.close()


async def _all_up(store: Any, procs: Procs, workers: int, within_s: float = 120.0) -> None:
    """Wait until every worker heartbeats: sessions submitted while the others still
    import would run on the first one up, and the fleet's first seconds would measure
    this machine's start-up, not the fleet against the provider's limit."""
    deadline = time.monotonic() + within_s
    while len(await store.heartbeats()) < workers:
        if procs.dead() or time.monotonic() > deadline:
            raise SystemExit(f"the workers did not all start:\n{procs.tail()}")
        await asyncio.sleep(0.1)


async def _run_mode(mode: str, args: argparse.Namespace, redis_url: str, logdir: Path
                    ) -> dict[str, Any]:
    from strands_durable.models import SessionStatus
    from strands_durable.sessions.start import start_session
    from strands_durable.spec.loader import load_spec_text

    limits = None if mode == "off" else mode == "declared"  # silent: learned too
    samples: list[_Sample] = []
    async with _fleet(args, redis_url, logdir, f"cap{mode}{os.getpid()}", mode,
                      limits) as (server, procs, store):
        try:
            steps = ", ".join(f'{{agent: a, input: "step {i} of {{{{ n }}}}"}}'
                              for i in range(args.steps))
            started = time.monotonic()
            ids = []
            for n in range(args.sessions):
                spec = load_spec_text(SPEC.format(n=n, host=server.url("/v1"), steps=steps),
                                      f"capacity-{n}.yaml", {"n": n})
                ids.append((await start_session(store, spec))[0])
            deadline = started + args.timeout_s
            statuses: list[SessionStatus] = []
            sampling = asyncio.create_task(_sample(store, server, samples))
            while time.monotonic() < deadline:
                statuses = [(await store.get_session(sid)).status for sid in ids]
                if SessionStatus.RUNNING not in statuses:
                    break
                if procs.dead():
                    raise SystemExit(f"a worker died:\n{procs.tail()}")
                await asyncio.sleep(0.25)
            elapsed = time.monotonic() - started
            sampling.cancel()
            states = await store.capacity_states()
        finally:
            procs.stop()
        total = server.accepted + server.throttled
        times = sorted(server.accepted_at)
        per_second = [sum(1 for t in times if times[0] + i <= t < times[0] + i + 1)
                      for i in range(int(times[-1] - times[0]) + 1)] if times else []
        busy_s = max(times[-1] - times[0], 1e-9) if len(times) > 1 else elapsed
        return {
            "mode": mode, "sessions": len(ids),
            "completed": statuses.count(SessionStatus.COMPLETED),
            "failed": statuses.count(SessionStatus.FAILED),
            "running": statuses.count(SessionStatus.RUNNING),
            "requests": total, "accepted": server.accepted, "throttled": server.throttled,
            "throttled_at_once": server.throttled_at_once,
            "throttled_share": server.throttled / total if total else 0.0,
            # From the first request answered to the last: the workers' start-up (seconds
            # of imports on this machine) is not the provider's time.
            "goodput_per_s": server.accepted / busy_s,
            "goodput_of_limit": server.accepted / busy_s / args.per_second,
            "accepted_each_second": per_second,
            "peak_at_once": server.peak_at_once, "seconds": elapsed,
            **_gate_view(samples, times, args.per_second),
            "learned_rpm": states[0].learned_rpm if states else 0.0,
            "learned_in_flight": states[0].learned_in_flight if states else 0.0,
        }


@dataclass(frozen=True)
class _Sample:
    at: float  # monotonic, the server's clock
    waiting: int  # requests the fleet holds back for the key (told to wait)
    leases: int  # the fleet's leases in flight
    at_server: int  # requests the server is answering


async def _sample(store: Any, server: Any, samples: list[_Sample]) -> None:
    """The fleet's view of the key every 0.1 s: whether requests waited for the gate."""
    while True:
        states = await store.capacity_states()
        waiting = sum(s.waiting_requests for s in states)
        leases = sum(s.in_flight for s in states)
        samples.append(_Sample(time.monotonic(), waiting, leases, server._in_flight))
        await asyncio.sleep(0.1)


def _gate_view(samples: list[_Sample], accepted_at: list[float], limit: float
               ) -> dict[str, Any]:
    """Where the goodput went: the share of the busy time in which requests waited for
    the gate (the rest, the workers had nothing to send: on a loaded machine, CPU), and
    the goodput within it (what the gate let through while it held requests back)."""
    if not accepted_at or len(samples) < 2:
        return {"gate_bound_share": 0.0, "gate_bound_goodput_of_limit": 0.0,
                "mean_leases": 0.0, "mean_at_server": 0.0}
    first, last = accepted_at[0], accepted_at[-1]
    bound_s, bound_accepted = 0.0, 0
    busy = [(a, b) for a, b in itertools.pairwise(samples)
            if a.at < last and b.at > first]
    for a, b in busy:
        if a.waiting > 0 and b.waiting > 0:
            bound_s += b.at - a.at
            bound_accepted += sum(1 for t in accepted_at if a.at <= t < b.at)
    span = max(last - first, 1e-9)
    return {"gate_bound_share": min(1.0, bound_s / span),
            "gate_bound_goodput_of_limit": bound_accepted / bound_s / limit if bound_s else 0.0,
            "mean_leases": sum(a.leases for a, _ in busy) / max(1, len(busy)),
            "mean_at_server": sum(a.at_server for a, _ in busy) / max(1, len(busy))}


BIG = """
version: 0
name: big
runtime: {{provider: openai, model_id: gpt-limited, host: "{host}", max_parallel: {n}}}
agents: {{a: {{prompt: "You answer."}}}}
pattern: {{type: parallel, config: {{branches: [{branches}]}}}}
"""


async def _chains_p95(args: argparse.Namespace, redis_url: str, logdir: Path, big: bool
                      ) -> float:
    """The chains' p95 completion time (s from their submit), with or without the big
    session submitted first."""
    from strands_durable.models import SessionStatus
    from strands_durable.sessions.start import start_session
    from strands_durable.spec.loader import load_spec_text

    async with _fleet(args, redis_url, logdir, f"capfair{int(big)}{os.getpid()}", "fair",
                      True) as (server, procs, store):
        host = server.url("/v1")
        if big:
            branches = ", ".join(f'{{id: b{i}, steps: [{{agent: a, input: "b{i}"}}]}}'
                                 for i in range(args.branches))
            await start_session(store, load_spec_text(
                BIG.format(host=host, n=args.branches, branches=branches), "big.yaml"))
        steps = ", ".join(f'{{agent: a, input: "step {i}"}}' for i in range(args.steps))
        started = time.monotonic()
        ids = [(await start_session(store, load_spec_text(
            SPEC.format(n=n, host=host, steps=steps), f"c{n}.yaml")))[0]
            for n in range(args.sessions)]
        done: dict[str, float] = {}
        while len(done) < len(ids) and time.monotonic() < started + args.timeout_s:
            for sid in ids:
                if sid not in done and (await store.get_session(sid)).status \
                        != SessionStatus.RUNNING:
                    done[sid] = time.monotonic() - started
            if procs.dead():
                raise SystemExit(f"a worker died:\n{procs.tail()}")
            await asyncio.sleep(0.1)
    times = sorted(done.values()) or [float("inf")]
    return times[min(len(times) - 1, int(0.95 * len(ids)))]


def _fair(args: argparse.Namespace, redis_url: str, logdir: Path) -> dict[str, Any]:
    alone = asyncio.run(_chains_p95(args, redis_url, logdir, big=False))
    beside = asyncio.run(_chains_p95(args, redis_url, logdir, big=True))
    print(f"     fair: {args.sessions} chains of {args.steps}: p95 {alone:.1f} s alone, "
          f"{beside:.1f} s beside one session of {args.branches} branches: "
          f"{beside / alone:.2f}x (goal <= 2x)", flush=True)
    return {"mode": "fair", "p95_alone_s": alone, "p95_beside_big_s": beside,
            "ratio": beside / alone}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default="off,silent,learned,declared")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--per-second", type=int, default=10)
    parser.add_argument("--at-once", type=int, default=6)
    parser.add_argument("--delay-s", type=float, default=0.4)
    parser.add_argument("--timeout-s", type=float, default=300)
    parser.add_argument("--branches", type=int, default=200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-capacity-") as tmp:
        redis = start_redis(workdir=Path(tmp))
        try:
            for mode in args.modes.split(","):
                if mode == "fair":
                    rows.append(_fair(args, redis.url, Path(tmp)))
                    continue
                row = asyncio.run(_run_mode(mode, args, redis.url, Path(tmp)))
                rows.append(row)
                print(f"{mode:>9}: {row['completed']}/{row['sessions']} completed, "
                      f"{row['failed']} failed; {row['requests']} requests, "
                      f"{row['throttled']} throttled ({row['throttled_share']:.1%}, "
                      f"{row['throttled_at_once']} of them at once); "
                      f"goodput {row['goodput_per_s']:.2f}/s = {row['goodput_of_limit']:.2f} "
                      f"of the limit; peak {row['peak_at_once']} at once; "
                      f"{row['seconds']:.1f} s", flush=True)
                if mode != "off":
                    print(f"{'':>11}requests waited for the gate {row['gate_bound_share']:.0%} "
                          f"of the time, goodput then {row['gate_bound_goodput_of_limit']:.2f} "
                          f"of the limit; leases {row['mean_leases']:.1f}, at the server "
                          f"{row['mean_at_server']:.1f} on average; learned "
                          f"{row['learned_rpm']:g} rpm, {row['learned_in_flight']:.1f} at once")
                print(f"{'':>11}accepted each second: {row['accepted_each_second']}")
        finally:
            redis.stop()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
