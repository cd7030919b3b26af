"""`python -m bench.redis_instructions`: the redis-server's instructions per no-op step,
counted by valgrind, for comparing two commits on a machine too noisy for the Redis CPU
row (`python -m bench`: Redis CPU per no-op step, target <= 120 us).

That row divides the server's CPU seconds by the steps; on this shared 2-core machine it
read 121-207 us for the same code on one morning. This runs the same workload (one real
`arq` worker, DURABLE_BENCH_NOOP, chains of 10 steps, concurrency 8) against a
redis-server under `valgrind --tool=callgrind`, counts only while the sessions run (the
bench's checks after them are left out), and prints the instructions per step with the
server functions that cost the most, inclusive. Server-side only: the worker is not
under valgrind. The count includes the bench's polls for completion (a few ZCARDs every
50 ms) and the sessions' creation.

What it depends on: how many sessions run at once (the status indexes are small sorted
sets, listpacks, below 128 sessions a shard, whose ZADD walks them; a skiplist beyond),
the chain's length, the redis-server's version (this machine: 7.0). It takes 15-30 s.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.redis_server import start_redis
from bench.throughput import run_ours

STEPS = 10
CONCURRENCY = 8
# Server functions worth showing, inclusive of what they call.
SHOWN = ("evalShaCommand", "luaCallFunction", "lua_pushlstring", "parseReply",
         "zaddCommand", "xaddCommand", "xreadCommand", "hsetCommand", "hmgetCommand",
         "__vfprintf_internal", "readQueryFromClient")
TOTAL = re.compile(r"^\s*([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", re.M)
LINE = re.compile(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+\S*?:(\w+) ", re.M)


def _control(*args: str) -> None:
    subprocess.run(["callgrind_control", *args], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


async def counted(sessions: int, logdir: Path, out: Path) -> int:
    """Steps run while counted; the server's profile is written to `out`."""
    server = start_redis(launcher=["valgrind", "--tool=callgrind", "--instr-atstart=no",
                                   f"--callgrind-out-file={out}"])
    pid = str(server.process.pid)
    try:
        # Scripts loaded and structures made before anything is counted.
        await run_ours(server.url, logdir, workers=1, noop=True, sessions=10, steps=STEPS,
                       concurrency=CONCURRENCY, timeout_s=600)

        def clock(on: bool) -> None:
            _control("-i", "on" if on else "off", pid)

        result = await run_ours(server.url, logdir, workers=1, noop=True, sessions=sessions,
                                steps=STEPS, concurrency=CONCURRENCY, timeout_s=1800,
                                clock=clock)
        _control("-d", pid)  # written now: the server is killed, not shut down
    finally:
        server.stop()
    return result.units


def per_step(profile: Path, steps: int) -> tuple[float, dict[str, float]]:
    flat = subprocess.run(["callgrind_annotate", str(profile)], check=True,
                          capture_output=True, text=True).stdout
    inclusive = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(profile)],
                               check=True, capture_output=True, text=True).stdout
    total = TOTAL.search(flat)
    if total is None:
        raise SystemExit(f"bench.redis_instructions: no totals in {profile}")
    shown: dict[str, float] = {}
    for count, name in LINE.findall(inclusive):
        if name in SHOWN and name not in shown:
            shown[name] = int(count.replace(",", "")) / steps
    return int(total.group(1).replace(",", "")) / steps, shown


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.redis_instructions",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sessions", type=int, default=100,
                   help=f"chains of {STEPS} no-op steps, all submitted at once (default 100)")
    p.add_argument("--logdir", type=Path, default=Path("/tmp/bench-redis-instructions"))
    args = p.parse_args(argv)
    for tool in ("valgrind", "callgrind_control", "callgrind_annotate"):
        if shutil.which(tool) is None:
            p.error(f"{tool} is not installed (Debian: apt-get install valgrind)")
    args.logdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="durable-redis-instructions-") as tmp:
        out = Path(tmp) / "redis.callgrind"
        steps = asyncio.run(counted(args.sessions, args.logdir, out))
        dumps = sorted(Path(tmp).glob("redis.callgrind*"), key=lambda f: f.stat().st_size)
        if not dumps:
            raise SystemExit("bench.redis_instructions: callgrind wrote no profile")
        total, shown = per_step(dumps[-1], steps)
    print(f"redis-server, instructions per no-op step: {total:,.0f} ({steps:,} steps: "
          f"{args.sessions} chains of {STEPS}, one worker, concurrency {CONCURRENCY}; "
          f"valgrind, user space)")
    for name in SHOWN:
        if name in shown:
            print(f"  {shown[name]:>10,.0f}  {name} (inclusive)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
