"""`python -m bench.failover`: how soon a dead worker's steps run again, before and after
fast failover, with real `arq strands_durable.worker.WorkerSettings` processes on a
private redis-server.

- **drill** (issue 34's): 2 workers, 48 sessions of a 5-step chain (0.4 s a step); once
  the first wave has committed, the worker holding the most steps is SIGKILLed. For
  each step it held: the time from the kill to the step starting again on the other
  worker (its `step_started`/`step_reclaimed` event), and by what: a death declaration
  (`step_reclaimed` "after ... was declared dead") or the idle claim; then the time
  until every session is done. Every step of every session is checked to have
  committed once, and each session's results to be those of a calm run.
- **chaos**: 4 workers, 40 sessions of an 8-step chain (0.4 s a step); every second a
  random worker is SIGKILLed and a new one started, until all have ended or for
  `--chaos-kill-s` (120 s) at most, then the fleet is left alone: time until all ended,
  kills, sessions completed and failed (a step delivered `max_deliveries` times is
  dead-lettered), re-runs by declaration and by idle claim; committed once, as a calm
  run when all completed.
- **soak** (`--soak-s`, 0 to skip): the no-false-death check. One worker's event loop is
  held for 2 s every 10 s (DURABLE_LOOP_STALL=2:10) beside a normal one and 2 CPU hogs,
  under a steady load; afterwards: the stalls it logged, the declarations of death
  (must be 0) and the sessions done.

"before" is the same code with DURABLE_FAILOVER=false (re-claim after claim_idle_ms
only, as before issue 34); "after" is the defaults. Progress on stderr, tables on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.failover_soak import SoakResult, run_soak
from bench.integrity import CommittedTwice, check_once, completed_sessions
from bench.latency import percentile
from bench.procs import Procs, clean_env
from bench.redis_server import start_redis
from bench.specs import chain_spec
from bench.throughput import WORKER_START_TIMEOUT_S, BenchError, _wait, fresh_prefix
from strands_durable.models import SessionStatus
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.keys import CONSUMER_GROUP
from strands_durable.store.store import Store

MODES = {"before": {"DURABLE_FAILOVER": "false"}, "after": {}}


@dataclass
class Run:
    mode: str
    orphans: int = 0  # steps the killed worker held
    rerun_s: list[float] = field(default_factory=list)  # kill -> each one started again
    by_declaration: int = 0
    by_idle_claim: int = 0
    kill_to_done_s: float = 0.0
    total_s: float = 0.0
    kills: int = 0
    completed: int = 0  # chaos: sessions completed, failed (dead-lettered) by the end
    failed: int = 0
    finished: bool = True  # chaos: every session ended within --timeout


def at_s(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def start_workers(procs: Procs, store: Store, env: dict[str, str], n: int) -> None:
    for _ in range(n):
        procs.start("worker", ["strands_durable.worker.WorkerSettings"], env)

    async def beating() -> bool:
        return int(await store.redis.hlen(store.keys.workers())) >= n

    await _wait(beating, WORKER_START_TIMEOUT_S, f"{n} worker heartbeat(s)", procs, 0.05)


async def done_count(store: Store) -> int:
    return len(await completed_sessions(store.redis, store.keys))


async def ended_count(store: Store, sids: list[str]) -> int:
    return sum([(await store.get_session(s)).status != SessionStatus.RUNNING for s in sids])


async def responses(store: Store, sids: list[str]) -> list[list[str]]:
    return sorted([[r.response for r in await store.results(sid)] for sid in sids])


async def checked(store: Store, sids: list[str], steps: int, calm: list[list[str]] | None
                  ) -> None:
    try:
        await check_once(store.redis, store.keys, sids, steps)
    except CommittedTwice as exc:
        raise BenchError(f"EXACTLY-ONCE BROKEN: {exc}") from None
    if calm is not None and await responses(store, sids) != calm:
        raise BenchError("results differ from a calm run's")


def pid_of(consumer: str) -> int:
    return int(consumer.rsplit("-", 2)[1])


async def held_by(store: Store, consumer: str) -> list[tuple[str, str]]:
    """(session, step) of every entry pending under `consumer` on shard 0."""
    stream = store.keys.stream(0)
    pending = await store.redis.xpending_range(stream, CONSUMER_GROUP, "-", "+", 1000,
                                               consumername=consumer)
    held = []
    for p in pending:
        for _, f in await store.redis.xrange(stream, p["message_id"], p["message_id"]):
            held.append((f["sid"], f["step"]))
    return held


async def reruns(store: Store, run: Run, held: list[tuple[str, str]], victim: str,
                 killed: float) -> None:
    for sid, step in held:
        for _, f in await store.events(sid):
            if f["step"] != step or f["worker"] == victim or \
                    f["type"] not in ("step_started", "step_reclaimed") or at_s(f["at"]) < killed:
                continue
            run.rerun_s.append(at_s(f["at"]) - killed)
            if "declared dead" in f.get("detail", ""):
                run.by_declaration += 1
            else:
                run.by_idle_claim += 1
            break


async def drill_once(redis_url: str, logdir: Path, mode: str, sessions: int, steps: int,
                     delay_s: float, calm: list[list[str]] | None, timeout_s: float) -> Run:
    prefix = fresh_prefix(f"failover-{mode}")
    store = open_store(DurableSettings(redis_url=redis_url, key_prefix=prefix))
    await store.prepare()
    env = clean_env(DURABLE_REDIS_URL=redis_url, DURABLE_KEY_PREFIX=prefix,
                    DURABLE_LOG_LEVEL="INFO", DURABLE_METRICS_PORT="0", **MODES[mode])
    procs, run = Procs(logdir), Run(mode)
    loaded = chain_spec(steps, delay_s)
    try:
        await start_workers(procs, store, env, 2)
        t0 = time.time()
        sids = [sid for sid, _ in await asyncio.gather(
            *(start_session(store, loaded) for _ in range(sessions)))]

        async def first_wave() -> bool:
            return sum([(await store.get_session(s)).steps_committed for s in sids]) >= 16

        await _wait(first_wave, timeout_s, "the first wave of steps", procs)
        holding = await store.group_consumers(0)
        victim = max(holding, key=lambda c: holding[c][0])
        proc = next(p for p in procs.procs if p.pid == pid_of(victim))
        proc.kill()
        killed = time.time()
        proc.wait(timeout=30)
        held = await held_by(store, victim)
        run.orphans, run.kills = len(held), 1

        async def all_done() -> bool:
            return await done_count(store) >= sessions

        await _wait(all_done, timeout_s, f"{sessions} sessions ({mode})", _Survivors(procs))
        run.kill_to_done_s, run.total_s = time.time() - killed, time.time() - t0
        await reruns(store, run, held, victim, killed)
        await checked(store, sids, steps, calm)
    finally:
        procs.stop()
        await store.redis.aclose()
    return run


class _Survivors(Procs):
    """What `_wait` asks while the killed worker is gone: only the others count."""

    def __init__(self, procs: Procs) -> None:
        super().__init__(procs.logdir, procs.procs, procs.logs)

    def dead(self) -> list[Any]:
        return [p for p in self.procs if p.poll() is not None and p.returncode != -9]


async def calm_run(redis_url: str, logdir: Path, sessions: int, steps: int, delay_s: float,
                   timeout_s: float) -> list[list[str]]:
    """The results of the same sessions with nothing killed (2 workers)."""
    prefix = fresh_prefix("failover-calm")
    store = open_store(DurableSettings(redis_url=redis_url, key_prefix=prefix))
    await store.prepare()
    procs = Procs(logdir)
    env = clean_env(DURABLE_REDIS_URL=redis_url, DURABLE_KEY_PREFIX=prefix,
                    DURABLE_LOG_LEVEL="WARNING", DURABLE_METRICS_PORT="0")
    try:
        await start_workers(procs, store, env, 2)
        loaded = chain_spec(steps, delay_s)
        sids = [sid for sid, _ in await asyncio.gather(
            *(start_session(store, loaded) for _ in range(sessions)))]

        async def all_done() -> bool:
            return await done_count(store) >= sessions

        await _wait(all_done, timeout_s, "the calm run", procs)
        await checked(store, sids, steps, None)
        return await responses(store, sids)
    finally:
        procs.stop()
        await store.redis.aclose()


async def chaos_once(redis_url: str, logdir: Path, mode: str, args: argparse.Namespace,
                     calm: list[list[str]] | None) -> Run:
    prefix = fresh_prefix(f"chaos-{mode}")
    store = open_store(DurableSettings(redis_url=redis_url, key_prefix=prefix))
    await store.prepare()
    env = clean_env(DURABLE_REDIS_URL=redis_url, DURABLE_KEY_PREFIX=prefix,
                    DURABLE_LOG_LEVEL="INFO", DURABLE_METRICS_PORT="0", **MODES[mode])
    procs, run, rng = Procs(logdir), Run(mode), random.Random(args.seed)
    steps = args.chaos_steps
    try:
        await start_workers(procs, store, env, args.chaos_workers)
        live = list(procs.procs)
        t0 = time.time()
        sids = [sid for sid, _ in await asyncio.gather(*(start_session(
            store, chain_spec(steps, args.delay_s)) for _ in range(args.chaos_sessions)))]
        # A kill and a fresh worker every second for --chaos-kill-s at most, then the
        # fleet is left alone until every session has ended (or --timeout).
        while await ended_count(store, sids) < len(sids):
            if time.time() - t0 > args.timeout:
                run.finished = False
                break
            await asyncio.sleep(1.0)
            if time.time() - t0 > args.chaos_kill_s:
                continue
            victim = rng.randrange(len(live))
            live[victim].kill()
            live[victim].wait(timeout=30)
            live[victim] = procs.start("worker", ["strands_durable.worker.WorkerSettings"], env)
            run.kills += 1
        run.total_s = time.time() - t0
        for sid in sids:
            status = (await store.get_session(sid)).status
            run.completed += status == SessionStatus.COMPLETED
            run.failed += status == SessionStatus.FAILED
            for _, f in await store.events(sid):
                if f["type"] == "step_reclaimed":
                    if "declared dead" in f.get("detail", ""):
                        run.by_declaration += 1
                    else:
                        run.by_idle_claim += 1
        done = await completed_sessions(store.redis, store.keys)
        await checked(store, [s for s in sids if s in done], steps,
                      calm if run.completed == len(sids) else None)
        await checked(store, sids, steps, calm)
    finally:
        procs.stop()
        await store.redis.aclose()
    return run


def drill_table(runs: list[Run]) -> list[str]:
    lines = ["| mode | runs | steps held by the killed worker | kill to re-run: min / p50 / "
             "p90 / max (s) | re-run by declaration / idle claim | kill to all done (s) |",
             "|---|---|---|---|---|---|"]
    for mode in MODES:
        mine = [r for r in runs if r.mode == mode]
        if not mine:
            continue
        delays = [d for r in mine for d in r.rerun_s]
        spread = " / ".join(f"{percentile(delays, p):.1f}" for p in (0, 50, 90, 100))
        done = " ".join(f"{r.kill_to_done_s:.1f}" for r in mine)
        lines.append(f"| {mode} | {len(mine)} | {sum(r.orphans for r in mine)} | {spread} | "
                     f"{sum(r.by_declaration for r in mine)} / "
                     f"{sum(r.by_idle_claim for r in mine)} | {done} |")
    return lines


def chaos_table(runs: list[Run]) -> list[str]:
    lines = ["| mode | kills | re-runs by declaration / idle claim | sessions completed / "
             "failed | until all ended (s) |", "|---|---|---|---|---|"]
    lines += [f"| {r.mode} | {r.kills} | {r.by_declaration} / {r.by_idle_claim} | "
              f"{r.completed} / {r.failed} | "
              f"{f'{r.total_s:.1f}' if r.finished else f'not after {r.total_s:.0f}'} |"
              for r in runs]
    return lines


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.failover", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=3, help="drill runs per mode (default 3)")
    p.add_argument("--sessions", type=int, default=48)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--delay-s", type=float, default=0.4, help="each step's model delay")
    p.add_argument("--chaos-workers", type=int, default=4)
    p.add_argument("--chaos-sessions", type=int, default=40)
    p.add_argument("--chaos-steps", type=int, default=8)
    p.add_argument("--chaos-kill-s", type=float, default=120.0,
                   help="kill a worker every second for this long at most")
    p.add_argument("--soak-s", type=float, default=600.0, help="0 skips the soak")
    p.add_argument("--skip", default="", help="comma-separated: drill, chaos, soak")
    p.add_argument("--modes", default="before,after",
                   help="which of before (DURABLE_FAILOVER=false), after (the defaults)")
    p.add_argument("--seed", type=int, default=34)
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--json", type=Path, help="also write every number here")
    return p.parse_args(argv)


def save(args: argparse.Namespace, out: dict[str, Any]) -> None:
    """Every number so far, to --json (a later failure keeps what was measured)."""
    if args.json:
        soak = out["soak"]
        args.json.write_text(json.dumps({
            "drill": [asdict(r) for r in out["drill"]],
            "chaos": [asdict(r) for r in out["chaos"]],
            "soak": asdict(soak) if soak else None}, indent=2))


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    skip = set(filter(None, args.skip.split(",")))
    modes = [m for m in MODES if m in args.modes.split(",")]
    server = start_redis()
    logdir = Path(tempfile.mkdtemp(prefix="bench-failover-"))
    out: dict[str, Any] = {"drill": [], "chaos": [], "soak": None}
    try:
        if "drill" not in skip:
            calm = await calm_run(server.url, logdir, args.sessions, args.steps, args.delay_s,
                                  args.timeout)
            for i in range(args.repeat):
                for mode in modes:
                    log(f"drill {mode} {i + 1}/{args.repeat}")
                    out["drill"].append(await drill_once(
                        server.url, logdir, mode, args.sessions, args.steps, args.delay_s,
                        calm, args.timeout))
                    save(args, out)
        if "chaos" not in skip:
            calm = await calm_run(server.url, logdir, args.chaos_sessions, args.chaos_steps,
                                  args.delay_s, args.timeout)
            for mode in modes:
                log(f"chaos {mode}")
                out["chaos"].append(await chaos_once(server.url, logdir, mode, args, calm))
                save(args, out)
        if "soak" not in skip and args.soak_s > 0:
            log(f"soak {args.soak_s:.0f}s")
            out["soak"] = await run_soak(server.url, logdir, args.soak_s, args.delay_s)
    finally:
        server.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        out = asyncio.run(bench(args))
    except BenchError as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        return 2
    print(f"drill: 2 workers, {args.sessions} sessions x {args.steps} steps ({args.delay_s}s "
          "each), the worker holding most steps SIGKILLed after the first wave")
    print("\n".join(drill_table(out["drill"])))
    print(f"\nchaos: {args.chaos_workers} workers, {args.chaos_sessions} x {args.chaos_steps} "
          "steps, a random worker SIGKILLed and replaced every second")
    print("\n".join(chaos_table(out["chaos"])))
    soak: SoakResult | None = out["soak"]
    if soak is not None:
        print("\n" + soak.text())
    save(args, out)
    return 0 if soak is None or soak.declared == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
