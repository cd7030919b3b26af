"""The schedules failover drill (issue 30): `durable scheduler` replicas, the leader
killed (SIGKILL) every K seconds and a fresh replica started in its place, one schedule
firing every few seconds (overlap allow). At the end it reads Redis: for every tick the
schedule had in the drill, how many sessions carry that tick's idempotency key (each
session's own `idempotency_key` field, not the key's lookup, so a second session would
show), how late the first one was created, and the run the schedule recorded.

    python -m bench.schedule_failover   # 3 replicas, a kill every 20 s, 5 min, every 10 s
    python -m bench.schedule_failover --seconds 60 --kill-every 15 --cron "* * * * * */2"

It starts a private redis-server unless --redis-url is given. Exit 0 when each tick was
fired exactly once, 1 otherwise (2: the drill itself failed). tests/chaos/
test_schedule_failover.py runs a short version of it.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from bench.procs import REPO, clean_env
from bench.redis_server import start_redis
from strands_durable.models import now_ms
from strands_durable.scheduler.schedule_ops import ScheduleOptions, new_schedule, timing_of
from strands_durable.scheduler.schedules import ticks_after
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.connect import open_store
from strands_durable.store.schedules import idempotency_key
from strands_durable.store.store import Store

NAME = "drill"
SPEC = """
version: 0
name: scheduled-drill
runtime: {provider: scripted}
agents:
  a: {prompt: "You are a."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "tick"}
"""
LEADS = re.compile(r"scheduler \S+ leads \(fence (\d+)\)")


@dataclass
class TickRow:
    tick_ms: int
    sessions: int
    late_s: float | None  # the first session's creation after the tick
    recorded: str  # the run the schedule recorded


@dataclass
class DrillResult:
    rows: list[TickRow]
    kills: list[int] = field(default_factory=list)  # when each leader was killed (ms)
    extra_sessions: int = 0  # sessions of ticks outside the drill's range

    @property
    def twice(self) -> list[TickRow]:
        return [r for r in self.rows if r.sessions > 1]

    @property
    def missed(self) -> list[TickRow]:
        return [r for r in self.rows if r.sessions == 0]

    def table(self) -> str:
        lines = ["| tick (UTC) | sessions | created after tick | recorded run | leader killed |",
                 "|---|---|---|---|---|"]
        previous = self.rows[0].tick_ms - 1 if self.rows else 0
        for row in self.rows:
            # A kill since the tick before: this tick's leader is a new one.
            killed = [k for k in self.kills if previous < k <= row.tick_ms]
            previous = row.tick_ms
            late = f"{row.late_s:.2f} s" if row.late_s is not None else "-"
            lines.append(f"| {_utc(row.tick_ms)} | {row.sessions} | {late} | {row.recorded} "
                         f"| {'yes, ' + _utc(killed[-1]) if killed else ''} |")
        lates = [r.late_s for r in self.rows if r.late_s is not None]
        lines.append("")
        lines.append(f"{len(self.rows)} ticks, {len(self.kills)} leader kills: "
                     f"{sum(r.sessions == 1 for r in self.rows)} fired exactly once, "
                     f"{len(self.twice)} more than once, {len(self.missed)} never; "
                     f"created after the tick: median {_median(lates):.2f} s, "
                     f"max {max(lates, default=0):.2f} s")
        return "\n".join(lines)


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S.%f")[:-3]


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else 0.0


class Replicas:
    """`durable scheduler` processes, each logging to its own file."""

    def __init__(self, env: dict[str, str], logdir: Path) -> None:
        self.env, self.logdir = env, logdir
        self.procs: list[tuple[subprocess.Popen[bytes], Path]] = []

    def start(self) -> None:
        log = self.logdir / f"scheduler-{len(self.procs) + 1}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "strands_durable.api.cli",
                                     "scheduler", "--metrics-port", "0"], cwd=REPO,
                                    env=self.env, stdout=out, stderr=subprocess.STDOUT)
        self.procs.append((proc, log))

    def leader(self) -> subprocess.Popen[bytes] | None:
        """The live replica that took the lock last (the highest fence logged)."""
        best: tuple[int, subprocess.Popen[bytes]] | None = None
        for proc, log in self.procs:
            fences = [int(f) for f in LEADS.findall(log.read_text(errors="replace"))]
            if proc.poll() is None and fences and (best is None or max(fences) > best[0]):
                best = (max(fences), proc)
        return best[1] if best else None

    def stop(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc, _ in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


async def _wait_leader(replicas: Replicas, timeout_s: float) -> subprocess.Popen[bytes]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        leader = replicas.leader()
        if leader is not None:
            return leader
        await asyncio.sleep(0.1)
    raise RuntimeError("no scheduler replica took the lead")


async def _kill_leaders(replicas: Replicas, seconds: float, kill_every_s: float) -> list[int]:
    kills: list[int] = []
    started = time.monotonic()
    while time.monotonic() - started + kill_every_s <= seconds:
        await asyncio.sleep(kill_every_s)
        leader = await _wait_leader(replicas, 60)
        leader.kill()  # SIGKILL: no release of the lock, the standbys wait its TTL out
        leader.wait(timeout=10)
        kills.append(now_ms())
        replicas.start()  # keep the replica count
    await asyncio.sleep(max(0.0, seconds - (time.monotonic() - started)))
    return kills


async def _tick_table(store: Store, created_ms: int, until_ms: int) -> DrillResult:
    schedule = await store.get_schedule(NAME)
    ticks = ticks_after(timing_of(schedule), created_ms, until_ms, limit=100_000)
    by_key: dict[str, list[int]] = {}
    for record in await store.list_sessions(limit=100_000):
        key = record.raw.get("idempotency_key", "")
        created = record.started_ms  # its creation: nothing pauses these sessions
        by_key.setdefault(key, []).append(created)
    runs = {r.tick_ms: r for r in await store.schedule_runs(NAME)}
    rows = []
    for tick in ticks:
        made = sorted(by_key.pop(idempotency_key(NAME, tick), []))
        run = runs.get(tick)
        rows.append(TickRow(tick, len(made), (made[0] - tick) / 1000 if made else None,
                            run.outcome if run else "(not kept)"))
    return DrillResult(rows, extra_sessions=sum(len(v) for v in by_key.values()))


async def run_drill(redis_url: str, logdir: Path, *, seconds: float, kill_every_s: float,
                    cron: str, replicas: int = 3, lock_ttl_ms: int = 10_000,
                    prefix: str | None = None) -> DrillResult:
    prefix = prefix or f"drill{int(time.time())}"
    settings = DurableSettings(redis_url=redis_url, key_prefix=prefix)
    store = open_store(settings)
    env = clean_env(DURABLE_REDIS_URL=redis_url, DURABLE_KEY_PREFIX=prefix,
                    DURABLE_LOG_LEVEL="INFO", DURABLE_SCHEDULER_LOCK_TTL_MS=str(lock_ttl_ms),
                    DURABLE_TIMER_POLL_MS="100")
    group = Replicas(env, logdir)
    try:
        await store.prepare()
        loaded = load_spec_text(SPEC, "drill.yaml")
        schedule = new_schedule(NAME, loaded, ScheduleOptions(cron=cron, overlap="allow"))
        await store.create_schedule(schedule)
        for _ in range(replicas):
            group.start()
        result_kills = await _kill_leaders(group, seconds, kill_every_s)
        until = now_ms()
        last = ticks_after(timing_of(schedule), until - 120_000, until, limit=100_000)[-1:]

        async def caught_up() -> bool:
            cursor = (await store.schedule_cursors()).get(NAME, 0)
            return not last or cursor >= last[0]

        deadline = time.monotonic() + 60
        while not await caught_up():
            if time.monotonic() > deadline:
                raise RuntimeError("the schedule's cursor never reached the drill's end")
            await asyncio.sleep(0.1)
        group.stop()
        result = await _tick_table(store, schedule.created_ms, until)
        result.kills = result_kills
        return result
    finally:
        group.stop()
        await store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--kill-every", type=float, default=20)
    parser.add_argument("--cron", default="* * * * * */10")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--lock-ttl-ms", type=int, default=10_000,
                        help="DURABLE_SCHEDULER_LOCK_TTL_MS: how long a dead leader's lock "
                        "holds the standbys off (default 10000, the setting's default)")
    parser.add_argument("--redis-url")
    args = parser.parse_args()
    server = None if args.redis_url else start_redis()
    url = args.redis_url or (server.url if server else "")
    logdir = Path(tempfile.mkdtemp(prefix="schedule-drill-"))
    try:
        result = asyncio.run(run_drill(url, logdir, seconds=args.seconds,
                                       kill_every_s=args.kill_every, cron=args.cron,
                                       replicas=args.replicas,
                                       lock_ttl_ms=args.lock_ttl_ms))
    except RuntimeError as exc:
        print(f"drill failed: {exc} (logs in {logdir})", file=sys.stderr)
        return 2
    finally:
        if server is not None:
            server.stop()
    print(result.table())
    return 0 if not result.twice and not result.missed else 1


if __name__ == "__main__":
    sys.exit(main())
