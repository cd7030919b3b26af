"""What journaling one model turn costs, beside what committing a step costs (issue 26):
`python -m bench.journal_cost`.

    python -m bench.journal_cost                       # turns of 200 B, 2 KB and 20 KB
    python -m bench.journal_cost --steps 2000 --sizes 2000 --json out.json

An agent with tools writes each model turn and tool result to its step's journal
(worker/journal.py, store/lua/journal.lua) as it happens, one script call each, so that a
step re-run after a crash replays them instead of asking the model again; a one-turn
agent without tools writes none (its reply goes into the step's commit). This measures
that write alone, on a real redis-server: `--steps` steps taken by one consumer, then one
model turn (an assistant message with a tool call, `--sizes` bytes of text) journaled
for each, `--concurrency` at once as a worker's slots would, then each step committed
with a one-turn reply the same way. Printed per call: the worker's CPU (this process,
encoding and the client included), Redis's CPU (`used_cpu_user + used_cpu_sys`) and the
round trips. What it depends on: the turn's size (its JSON is sent and stored), the
concurrency (calls share the pipelined connection's writes), and the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from bench.redis_server import start_redis
from bench.redis_stats import RedisCost, RedisSnapshot
from bench.throughput import fresh_prefix
from strands_durable.models import (
    Event,
    EventType,
    SessionStatus,
    StepJob,
    StepResult,
    now_iso,
    now_ms,
)
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.records import CommitRequest, NewSession, TakenEntry
from strands_durable.store.store import Store

CONSUMER = "bench-journal"


@dataclass(frozen=True)
class Cost:
    worker_us: float  # this process's CPU per call
    redis: RedisCost

    def to_dict(self) -> dict[str, Any]:
        return {"worker_cpu_us": round(self.worker_us, 1), **self.redis.to_dict()}


def model_turn(size: int) -> str:
    """A model turn as the journal keeps it: an assistant message with text and a tool
    call, about `size` bytes of JSON."""
    text = ("lorem ipsum dolor sit amet " * (size // 27 + 1))[:max(size - 160, 1)]
    return json.dumps({"role": "assistant", "content": [
        {"text": text},
        {"toolUse": {"toolUseId": "tooluse_0123456789", "name": "lookup",
                     "input": {"query": "tides"}}}]})


async def measured(store: Store, calls: Sequence[Callable[[], Awaitable[object]]],
                   concurrency: int) -> Cost:
    pending = list(calls)
    before = await RedisSnapshot.take(store.redis)
    cpu0 = time.process_time()

    async def slot() -> None:
        while pending:
            if await pending.pop()() is False:  # a journal write refused: not a turn
                raise SystemExit("bench.journal_cost: a journal write was refused")

    await asyncio.gather(*(slot() for _ in range(concurrency)))
    cpu = time.process_time() - cpu0
    after = await RedisSnapshot.take(store.redis)
    return Cost(cpu * 1e6 / len(calls), RedisCost.between(before, after, len(calls)))


def new_session(n: int) -> NewSession:
    job = StepJob(session_id="", key="step:0", agent="a", input=f"question {n}")
    return NewSession(workflow_name="bench-journal", pattern_type="chain", spec_hash="h" * 64,
                      spec_json="{}", spec_digest="d", source="bench", variables={},
                      state={"current_step": 0}, jobs=[job], status=SessionStatus.RUNNING,
                      created_at=now_iso(), created_ms=now_ms())


def committed(entry: TakenEntry) -> CommitRequest:
    job = StepJob.from_json(entry.fields["job"])
    return CommitRequest(
        job=job, entry_id=entry.entry_id, consumer=CONSUMER, expected_version=1,
        result=StepResult(key=job.key, agent=job.agent, response="ok", worker=CONSUMER),
        state={"current_step": 1}, status=SessionStatus.COMPLETED,
        new_messages=[{"role": "user", "content": [{"text": job.input}]},
                      {"role": "assistant", "content": [{"text": "ok"}]}],
        events=[Event(EventType.STEP_COMPLETED, step=job.key, at=now_iso())],
        now_iso=now_iso(), now_ms=now_ms())


async def one_size(url: str, steps: int, size: int, concurrency: int) -> dict[str, Any]:
    store = open_store(DurableSettings(redis_url=url, key_prefix=fresh_prefix("journal")))
    await store.prepare()
    try:
        for n in range(steps):
            await store.create_session(new_session(n))
        taken: list[TakenEntry] = []
        for shard in range(store.keys.shards):
            while batch := await store.take_new(shard, CONSUMER, 500, now_iso()):
                taken += batch
        turn = model_turn(size)
        jobs = [(StepJob.from_json(e.fields["job"]), e.entry_id) for e in taken]
        journal = await measured(store, [
            partial(store.journal, job, entry, CONSUMER, "m1", turn) for job, entry in jobs],
            concurrency)
        commit = await measured(store, [partial(store.commit, committed(entry))
                                        for entry in taken], concurrency)
    finally:
        await store.close()
    return {"turn_bytes": len(turn), "steps": len(taken), "journal": journal.to_dict(),
            "commit": commit.to_dict()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.journal_cost", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--sizes", default="200,2000,20000", help="turn sizes, bytes")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--json", help="also write the figures to this file")
    args = p.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    if args.steps < 1 or args.concurrency < 1 or not sizes or min(sizes) < 1:
        p.error("--steps, --concurrency and every --sizes value must be positive")
    server = start_redis()
    try:
        rows = [asyncio.run(one_size(server.url, args.steps, size, args.concurrency))
                for size in sizes]
    finally:
        server.stop()
    print(f"journal cost per model turn ({args.steps} steps, {args.concurrency} at once; "
          "per call: worker CPU, Redis CPU, round trips)")
    for row in rows:
        j, c = row["journal"], row["commit"]
        print(f"  turn of {row['turn_bytes']:>6,} B: journal {j['worker_cpu_us']:7.1f} us "
              f"+ Redis {j['cpu_us']:6.1f} us, {j['round_trips']:.2f} rt   |   the step's "
              f"commit {c['worker_cpu_us']:7.1f} us + Redis {c['cpu_us']:6.1f} us, "
              f"{c['round_trips']:.2f} rt")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
