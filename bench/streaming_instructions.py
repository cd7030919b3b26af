"""`python -m bench.streaming_instructions`: the live stream's worker CPU counted in
instructions (valgrind's callgrind), for a machine too noisy for the CPU row's timings.

bench/streaming.py's CPU row compares the worker's CPU time per step with the live stream
on and off; on a shared 2-core machine one run's CPU per step swings 25-50% from the
next, more than the 5% the target allows. This runs the same workload (one in-process
worker, one-step sessions whose `scripted` model writes 100 words a step, concurrency 50)
under `valgrind --tool=callgrind`, with a short and a long run per side, and divides the
difference in instructions by the difference in steps: start-up and imports drop out.

Valgrind runs Python about 50x slower, and what the stream costs depends on time: how
many steps' words one flush carries (DURABLE_LIVE_FLUSH_MS) and how steps overlap (the
model's delay between words). Both are scaled by the same factor (`--slowdown`), so a
flush carries about as many steps' text as it does at full speed; without that, each
flush would carry a fiftieth of it and the count would overstate the flushes' share.
The two sides run at the same time, two valgrinds at once, so they see the same machine.
User-space instructions only: system calls (the socket writes) are not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.redis_server import start_redis
from bench.streaming import WORD_DELAY_S, one_run

COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")
CONCURRENCY = 50
FLUSH_MS = 50  # DURABLE_LIVE_FLUSH_MS's default


async def workload(live: bool, sessions: int, slowdown: float) -> None:
    server = start_redis()
    try:
        await one_run(server.url, live, sessions, CONCURRENCY, WORD_DELAY_S * slowdown)
    finally:
        server.stop()


def counted_pair(sessions: int, slowdown: float, workdir: Path) -> dict[bool, int]:
    """Instructions of a whole run of `sessions` steps, off and on, run side by side."""
    env = {**os.environ, "DURABLE_LIVE_FLUSH_MS": str(round(FLUSH_MS * slowdown))}
    procs = {live: subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={workdir}/{live}.{sessions}",
         sys.executable, "-m", "bench.streaming_instructions", "--child",
         "on" if live else "off", str(sessions), str(slowdown)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        for live in (False, True)}
    counts: dict[bool, int] = {}
    for live, proc in procs.items():
        _, err = proc.communicate()
        found = COLLECTED.search(err)
        if proc.returncode != 0 or found is None:
            raise SystemExit(f"bench.streaming_instructions: the {sessions}-session run "
                             f"(live {'on' if live else 'off'}) failed (exit "
                             f"{proc.returncode}):\n{err[-2000:]}")
        counts[live] = int(found.group(1))
    return counts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.streaming_instructions",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sessions", default="50,150",
                   help="sessions of the short and the long run (default 50,150)")
    p.add_argument("--slowdown", type=float, default=50.0,
                   help="valgrind's slowdown, by which the flush window and the words' "
                        "delay are scaled (default 50)")
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        side, sessions, slowdown = args.child
        asyncio.run(workload(side == "on", int(sessions), float(slowdown)))
        return 0
    short, long = sorted(int(x) for x in args.sessions.split(","))
    if not 0 < short < long:
        p.error("--sessions: two counts, the first above 0 and below the second")
    if shutil.which("valgrind") is None:
        p.error("valgrind is not installed (Debian: apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="durable-stream-instructions-") as tmp:
        few, many = counted_pair(short, args.slowdown, Path(tmp)), \
            counted_pair(long, args.slowdown, Path(tmp))
    per_step = {live: (many[live] - few[live]) / (long - short) for live in (False, True)}
    print(f"live stream, worker instructions per step: {per_step[True]:,.0f} on vs "
          f"{per_step[False]:,.0f} off = {per_step[True] / per_step[False]:.3f}x "
          f"(target <= 1.05x; user space, valgrind; runs of {short} and {long} one-step "
          f"sessions, 100 words a step, concurrency {CONCURRENCY}, flush window and word "
          f"delay x{args.slowdown:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
