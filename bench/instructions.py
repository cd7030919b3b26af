"""`python -m bench.instructions`: the worker's CPU instructions per no-op step, counted
by valgrind, for comparing two commits on a machine too noisy for timings.

On a shared 2-core machine the same throughput row can spread 3x between runs; the
number of instructions a step executes does not. This runs the in-process latency
workload (bench/latency.py: one StepConsumer, 12 no-op chains, 8 steps in flight, heap
frozen as a worker's is) twice under `valgrind --tool=callgrind`, with a short and a
long chain, and divides the difference in instructions by the difference in steps:
start-up, imports and the private redis-server (not under valgrind) drop out. User-space
instructions only: system calls (a socket send, a clock read) are not counted, and the
figure is not a time. Each run takes minutes (valgrind runs Python some 50x slower).
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

SESSIONS = 12
CONCURRENCY = 8
COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


async def workload(steps: int) -> None:
    from bench.latency import run_latency
    from bench.redis_server import start_redis

    server = start_redis()
    try:
        await run_latency(server.url, sessions=SESSIONS, steps=steps, low=(1, 2),
                          high=(steps - 1, steps), concurrency=CONCURRENCY,
                          timeout_s=3600, footprint_sample=0)
    finally:
        server.stop()


def counted(steps: int, workdir: Path) -> int:
    """User-space instructions of one whole run of `steps`-step chains."""
    out = workdir / f"callgrind.{steps}.out"
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
         "-m", "bench.instructions", "--child", str(steps)],
        capture_output=True, text=True, check=False)
    found = COLLECTED.search(proc.stderr)
    if proc.returncode != 0 or found is None:
        raise SystemExit(f"bench.instructions: the {steps}-step run failed "
                         f"(exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__)
    p.add_argument("--steps", default="50,200",
                   help="chain lengths of the short and the long run (default 50,200)")
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        asyncio.run(workload(args.child))
        return 0
    short, long = sorted(int(x) for x in args.steps.split(","))
    if not 2 < short < long:
        p.error("--steps: two chain lengths, the first above 2 and below the second")
    if shutil.which("valgrind") is None:
        p.error("valgrind is not installed (Debian: apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="durable-instructions-") as tmp:
        few, many = counted(short, Path(tmp)), counted(long, Path(tmp))
    per_step = (many - few) / (SESSIONS * (long - short))
    print(f"{per_step:,.0f} instructions per no-op step (user space; {SESSIONS} chains, "
          f"{CONCURRENCY} in flight; runs of {short} and {long} steps: {few:,} and "
          f"{many:,})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
