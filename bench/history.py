"""A single-turn agent step at a fixed restored history, ours beside arq making the same
call (issue 26): `python -m bench.history`.

    python -m bench.history                            # 0, 2 and 20 messages, 600 steps each
    python -m bench.history --restored 0,20 --steps 1000 --repeat 3 --json out.json

For each history length H, `--steps` one-step agent calls that each restore H messages:
- ours: one real `arq strands_durable.worker.WorkerSettings` process. Sessions of a chain
  of H/2 + 1 steps (bench/specs.py: the `scripted` model, reply "ok") whose first H/2
  steps have already run: one such session is run to its checkpoint H/2 by a worker, then
  forked `--steps` times from it (sessions/checkpoints.py), all with no worker running, so
  each fork's one step is queued and restores the H messages of its lane. Then a worker
  starts; the time is from the first step's `step_started` event to the last one's
  `step_completed` (the events' stream ids, ms), the worker's start-up left out.
- arq: the same number of `agent_step` jobs (bench/arq_agent.py: the lane's H messages
  read from Redis, a Strands `Agent` on the same model and system prompt, the same
  prompt, the reply stored), released together to one burst-mode worker once it is up,
  poll_delay 0.01 s; timed from the release to its end.
Both at `--concurrency` (8: our DURABLE_WORKER_CONCURRENCY, arq's max_jobs); with
`--lean-arq` arq's Strands gets our worker's trims too (worker/lean_strands.py). Printed: steps
a second of both and the ratio (the target: >= 1.3x), and Redis round trips per step.
What it depends on: the history (each restored message is read, decoded and handed to
Strands on both sides; ours also commits the two new ones and plans the next step), the
model's latency (none here: the CPU of the step is all there is), the concurrency.
A step of an agent with tools also journals each model turn and tool result
(worker/journal.py); a one-turn agent without tools writes none: its reply goes into the
step's commit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.procs import Procs, clean_env
from bench.redis_server import start_redis
from bench.redis_stats import RedisCost, RedisSnapshot
from bench.specs import chain_spec
from bench.throughput import WORKER_START_TIMEOUT_S, BenchError, _wait, fresh_prefix, run_arq


@dataclass(frozen=True)
class Row:
    restored: int
    ours: list[float]  # steps/s of each run
    arq: list[float]
    ours_cost: RedisCost  # what a step cost Redis, the last run's
    arq_cost: RedisCost

    @property
    def ratio(self) -> float:
        return statistics.median(self.ours) / statistics.median(self.arq)


async def _queue_forks(store: Any, url: str, logdir: Path, restored: int, steps: int,
                       concurrency: int) -> list[str]:
    """`steps` sessions, each with one step queued that restores `restored` messages."""
    from strands_durable.models import SessionStatus
    from strands_durable.sessions.checkpoints import fork_from_checkpoint
    from strands_durable.sessions.start import start_session

    spec = chain_spec(restored // 2 + 1)
    if restored == 0:
        return [(await start_session(store, spec))[0] for _ in range(steps)]
    base = (await start_session(store, spec))[0]
    procs = Procs(logdir)
    procs.start("history-base", ["strands_durable.worker.WorkerSettings"],
                _env(url, store.keys.prefix, concurrency))
    try:
        async def done() -> bool:
            return (await store.get_session(base)).status == SessionStatus.COMPLETED

        await _wait(done, WORKER_START_TIMEOUT_S, "the base session", procs)
    finally:
        procs.stop()
    return [await fork_from_checkpoint(store, base, restored // 2) for _ in range(steps)]


def _env(url: str, prefix: str, concurrency: int) -> dict[str, str]:
    return clean_env(DURABLE_REDIS_URL=url, DURABLE_KEY_PREFIX=prefix,
                     DURABLE_WORKER_CONCURRENCY=str(concurrency), DURABLE_LOG_LEVEL="WARNING")


def _ms(entry_id: str) -> int:
    return int(entry_id.split("-", 1)[0])


async def run_ours(url: str, logdir: Path, restored: int, steps: int, concurrency: int,
                   timeout_s: float) -> tuple[float, RedisCost]:
    """(steps/s, what a step cost Redis) of one worker taking the queued forks."""
    from strands_durable.models import SessionStatus
    from strands_durable.settings import DurableSettings
    from strands_durable.store.connect import open_store

    prefix = fresh_prefix(f"hist{restored}")
    store = open_store(DurableSettings(redis_url=url, key_prefix=prefix))
    await store.prepare()
    procs = Procs(logdir)
    try:
        sids = await _queue_forks(store, url, logdir, restored, steps, concurrency)
        before = await RedisSnapshot.take(store.redis)
        procs.start("history", ["strands_durable.worker.WorkerSettings"],
                    _env(url, prefix, concurrency))
        keys = store.keys
        done_keys = [keys.index_status(k, SessionStatus.COMPLETED) for k in range(keys.shards)]
        expected = steps + (1 if restored else 0)  # the forks, and the base they came from
        polls = 0

        async def all_done() -> bool:
            nonlocal polls
            polls += 1
            async with store.redis.pipeline(transaction=False) as pipe:
                for key in done_keys:
                    pipe.zcard(key)
                return sum(await pipe.execute()) >= expected

        await _wait(all_done, timeout_s, f"{steps} forked steps", procs, interval_s=0.05)
        after = await RedisSnapshot.take(store.redis)
        starts, ends = [], []
        for sid in sids:
            for entry_id, fields in await store.events(sid):
                kind = fields.get("type")
                if kind == "step_started":
                    starts.append(_ms(entry_id))
                elif kind == "step_completed":
                    ends.append(_ms(entry_id))
        if len(ends) < steps:
            raise BenchError(f"{len(ends)} of {steps} steps completed")
        # Only the forks' own step ran here (the base's ran before the clock).
        elapsed_s = max(1, max(ends) - min(starts)) / 1000
        cost = RedisCost.between(before, after, steps, own_reads=polls)
        return steps / elapsed_s, cost
    finally:
        procs.stop()
        await store.redis.aclose()


def _calls(cost: RedisCost) -> str:
    return ", ".join(f"{name} {n:g}" for name, n in cost.calls.items())


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.history", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--restored", default="0,2,20", help="history lengths (even numbers)")
    p.add_argument("--steps", type=int, default=600, help="steps (and arq jobs) per row")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--repeat", type=int, default=1, help="runs per side, interleaved")
    p.add_argument("--lean-arq", action="store_true",
                   help="give arq's Strands our worker's trims too (worker/lean_strands.py)")
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--json", type=Path, default=None)
    return p.parse_args(argv)


async def _rows(args: argparse.Namespace, redis: Any, logdir: Path) -> list[Row]:
    rows = []
    for restored in [int(x) for x in args.restored.split(",")]:
        if restored < 0 or restored % 2:
            raise SystemExit(f"--restored: {restored} is not an even number >= 0")
        ours: list[float] = []
        theirs: list[float] = []
        ours_cost = arq_cost = RedisCost()
        for _ in range(args.repeat):  # interleaved: both sides see the same load
            rate, ours_cost = await run_ours(redis.url, logdir, restored, args.steps,
                                           args.concurrency, args.timeout)
            ours.append(rate)
            result = await run_arq(redis.port, logdir, workers=1, jobs=args.steps,
                                   max_jobs=args.concurrency, poll_delay=0.01,
                                   timeout_s=args.timeout,
                                   agent_chains=(args.steps, restored // 2 + 1),
                                   restored=restored, lean=args.lean_arq)
            theirs.append(result.rate)
            arq_cost = result.redis or RedisCost()
        rows.append(Row(restored, ours, theirs, ours_cost, arq_cost))
        row = rows[-1]
        print(f"{restored:>8} {statistics.median(ours):>12,.0f} "
              f"{statistics.median(theirs):>12,.0f} {row.ratio:>7.2f}x "
              f"{ours_cost.round_trips:>9.2f} {arq_cost.round_trips:>8.2f}   "
              f"(runs: ours {', '.join(f'{r:,.0f}' for r in ours)}; "
              f"arq {', '.join(f'{r:,.0f}' for r in theirs)})", flush=True)
        print(f"{'':>9}commands a step, ours: {_calls(ours_cost)}; arq: {_calls(arq_cost)}")
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"a one-turn agent step restoring N messages, {args.steps} steps, one worker, "
          f"concurrency {args.concurrency}; arq's Strands "
          f"{'with' if args.lean_arq else 'without'} our trims; target ours / arq >= 1.3x")
    print(f"{'restored':>8} {'ours st/s':>12} {'arq st/s':>12} {'ratio':>8} "
          f"{'RT ours':>9} {'RT arq':>8}")
    redis = start_redis()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
            rows = asyncio.run(_rows(args, redis, Path(tmp)))
    except BenchError as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        return 2
    finally:
        redis.stop()
    if args.json:
        args.json.write_text(json.dumps([
            {"restored": row.restored, "ours": row.ours, "arq": row.arq, "ratio": row.ratio,
             "ours_redis": row.ours_cost.to_dict(), "arq_redis": row.arq_cost.to_dict()}
            for row in rows], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
