"""Live streams (issue 27), two rows:

1. Worker CPU per step and commit latency with the live stream on vs off: an in-process
   worker runs one-step sessions whose `scripted` model writes a 100-word reply a word at
   a time (100 stream events a step); the same sessions, the same model. Each round runs
   each side twice, off-on-on-off or on-off-off-on, and the row is the median of the
   rounds' ratios: on this shared 2-core machine one run's CPU per step swings 25-50%
   from the next, so take many rounds (--rounds 11 --sessions 200); `--same-code` runs
   the stream off on both sides, to show what the method reads with nothing to find.
   What it depends on: the words per reply (deltas to look at), the flush window
   (DURABLE_LIVE_FLUSH_MS: round trips), the concurrency (how many sessions share one
   flush).

2. Fan-out: one `durable api` process, 20 running sessions on one worker process, 5 SSE
   clients on each session's GET /v1/sessions/{id}/stream (100 in all). Delta-to-client
   latency is from the moment a word was written by the model (the entry's `at_ms`, the
   first word gathered into it) to the moment a client read the entry: it includes the
   flush window, the XADD, the API's XREAD and the HTTP hop. API CPU and RSS printed.

    python -m bench.streaming [--sessions 200] [--rounds 11] [--same-code] [--clients 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from bench.latency import percentile, wait_done
from bench.procs import arq_bin, clean_env
from bench.redis_server import free_port, start_redis
from bench.throughput import BenchError, fresh_prefix
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.connect import open_store
from strands_durable.store.store import CommitOutcome, CommitRequest, Store
from strands_durable.worker.consumer import StepConsumer
from strands_durable.worker.heap import freeze_startup_heap

REPLY = " ".join(f"word{n}" for n in range(100))


def spec_text(word_delay_s: float, name: str = "stream-bench") -> str:
    return f"""
version: 0
name: {name}
runtime:
  provider: scripted
  script: {{word_delay_s: {word_delay_s}, rules: [{{reply: "{REPLY}"}}]}}
agents: {{a: {{prompt: "You write."}}}}
pattern: {{type: chain, config: {{steps: [{{agent: a, input: "go {{{{ n }}}}"}}]}}}}
"""


# -- row 1: CPU with the live stream on vs off ---------------------------------------
WORD_DELAY_S = 0.0001  # between the words of a reply: steps overlap as they stream


async def one_run(redis_url: str, live: bool, sessions: int, concurrency: int,
                  word_delay_s: float = WORD_DELAY_S) -> tuple[float, float]:
    """(worker CPU ms per step, commit p50 ms) of one run."""
    settings = DurableSettings(redis_url=redis_url, key_prefix=fresh_prefix("stream"),
                               live_stream=live, worker_concurrency=concurrency,
                               worker_adaptive_concurrency=False)
    store = open_store(settings)
    await store.prepare()
    commits: list[float] = []
    commit = store.commit

    async def timed(req: CommitRequest, take_next: int = 0) -> CommitOutcome:
        started = time.perf_counter()
        try:
            return await commit(req, take_next)
        finally:
            commits.append((time.perf_counter() - started) * 1000)

    store.commit = timed  # type: ignore[method-assign]
    text = spec_text(word_delay_s)
    for n in range(sessions):
        await start_session(store, load_spec_text(text, "bench.yaml", {"n": str(n)}))
    consumer = StepConsumer(settings, store)
    # As a worker process does once started (worker/heap.py): without it, every full
    # collection walks the whole bench process's heap, ~13% of a step's CPU here, and
    # a worker never pays that.
    freeze_startup_heap()
    cpu0 = time.process_time()
    await consumer.start()
    try:
        await wait_done(store, sessions, 600, "streaming sessions")
        cpu = time.process_time() - cpu0
    finally:
        await consumer.stop(grace_s=5)
        await store.close()
    return cpu * 1000 / sessions, percentile(commits, 50)


def round_order(n: int) -> tuple[bool, ...]:
    """Which side runs when in round `n`: off, on, on, off, then on, off, off, on. Each
    side's mean over a round cancels a machine that speeds up or slows down steadily
    through it, and each side holds as many even as odd places in the sequence of runs:
    with the two sides simply alternating (off, on, then on, off), the same code on both
    sides read 0.947x and 0.95x here (15 and 14 rounds), 0.987x in these rounds."""
    return (False, True, True, False) if n % 2 == 0 else (True, False, False, True)


async def cpu_row(sessions: int, rounds: int, concurrency: int, same_code: bool = False
                  ) -> dict[str, Any]:
    """Each round runs each side twice (round_order); the round's ratio is the mean of
    its two "on" runs over the mean of its two "off" runs, and the row's ratio is the
    median of the rounds' ratios (the ratios of the medians and of the fastest runs
    printed beside it). `same_code`: the "on" side runs with the stream off too, an A/A
    run that shows what the method reads when there is nothing to find."""
    redis = start_redis()
    try:
        runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        ratios = []
        for n in range(rounds):
            cpu: dict[bool, list[float]] = {False: [], True: []}
            for live in round_order(n):
                run = await one_run(redis.url, live and not same_code, sessions, concurrency)
                runs[live].append(run)
                cpu[live].append(run[0])
            ratios.append(statistics.mean(cpu[True]) / statistics.mean(cpu[False]))
    finally:
        redis.stop()
    off = [c for c, _ in runs[False]]
    on = [c for c, _ in runs[True]]
    return {"sessions": sessions, "rounds": rounds, "concurrency": concurrency,
            "same_code": same_code,
            "cpu_ms_per_step_off": round(statistics.median(off), 3),
            "cpu_ms_per_step_on": round(statistics.median(on), 3),
            "cpu_ratio": round(statistics.median(ratios), 3),
            "cpu_ratio_quartiles": [round(q, 3) for q in statistics.quantiles(ratios, n=4)]
            if len(ratios) > 1 else [],
            "cpu_ratio_of_medians": round(statistics.median(on) / statistics.median(off), 3),
            "cpu_ratio_of_fastest": round(min(on) / min(off), 3),
            "commit_p50_ms_off": round(statistics.median(p for _, p in runs[False]), 3),
            "commit_p50_ms_on": round(statistics.median(p for _, p in runs[True]), 3),
            "runs": {"off": runs[False], "on": runs[True]}}


# -- row 2: 100 SSE clients on one API process ----------------------------------------
def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def until(check: Callable[[], Awaitable[bool]], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise BenchError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def follow(port: int, sid: str, latencies: list[float], written: list[float],
                 answered: Callable[[], None]) -> int:
    """Read the session's live stream to its end; the latency of each text entry (and
    the part of it before Redis had the entry: the id of a stream entry is its time).
    `answered` is called once the API has answered (its headers came).
    A raw HTTP/1.0 reader that parses no more than it must: 100 followers in one
    process on a busy 2-core machine, so that the figure is the server's, not a slow
    client's backlog."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET /v1/sessions/{sid}/stream HTTP/1.0\r\nHost: bench\r\n\r\n".encode())
    await writer.drain()
    entries, buffer = 0, b""
    try:
        while chunk := await reader.read(65536):
            now_ms = time.time() * 1000
            if not buffer and not entries:
                answered()
            buffer += chunk
            *frames, buffer = buffer.split(b"\n\n")
            for frame in frames:
                if b"event: text\n" not in frame:
                    continue
                at = frame.index(b'"at_ms":') + 8
                at_ms = int(frame[at:frame.index(b"}", at)])
                entry_ms = int(frame[4:frame.index(b"-")])  # "id: <ms>-<seq>" leads
                latencies.append(now_ms - at_ms)
                written.append(entry_ms - at_ms)
                entries += 1
    finally:
        writer.close()
    return entries


async def fanout_row(sessions: int, clients: int, words_s: float, logdir: Path
                     ) -> dict[str, Any]:
    redis = start_redis()
    prefix = fresh_prefix("fanout")
    env = clean_env(DURABLE_REDIS_URL=redis.url, DURABLE_KEY_PREFIX=prefix,
                    DURABLE_METRICS_PORT="0", DURABLE_WORKER_CONCURRENCY=str(sessions * 2))
    port = free_port()
    logdir.mkdir(parents=True, exist_ok=True)
    api = subprocess.Popen([sys.executable, "-m", "strands_durable.api.cli", "api",
                            "--host", "127.0.0.1", "--port", str(port)], env=env,
                           stdout=(logdir / "api.log").open("wb"), stderr=subprocess.STDOUT)
    worker: subprocess.Popen[bytes] | None = None
    store: Store | None = None
    try:
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base, timeout=120,
                                     limits=httpx.Limits(max_connections=clients + 10)) as http:
            async def answering() -> bool:
                try:
                    return (await http.get("/healthz")).status_code == 200
                except httpx.TransportError:
                    return False

            await until(answering, 60, "durable api")
            settings = DurableSettings(redis_url=redis.url, key_prefix=prefix)
            store = open_store(settings)
            await store.prepare()
            # Each session writes 100 words `words_s` apart: ~100 x words_s seconds of text.
            text = spec_text(words_s, "fanout")
            sids = [(await start_session(store, load_spec_text(text, "f.yaml",
                                                               {"n": str(n)})))[0]
                    for n in range(sessions)]
            latencies: list[float] = []
            written: list[float] = []
            # Every client is following before any text is written (the worker starts
            # once all have been answered): a client that came late would read a backlog,
            # whose age is not the stream's latency.
            followers: list[bool] = []
            reading = [asyncio.ensure_future(follow(
                port, sids[i % sessions], latencies, written, lambda: followers.append(True)))
                for i in range(clients)]

            async def all_followed() -> bool:
                return len(followers) == clients

            await until(all_followed, 60, f"{clients} clients to be answered")
            cpu0 = cpu_s(api.pid)
            started = time.monotonic()
            worker = subprocess.Popen([*arq_bin(), "strands_durable.worker.WorkerSettings"],
                                      env=env, stdout=(logdir / "worker.log").open("wb"),
                                      stderr=subprocess.STDOUT)
            counts = await asyncio.gather(*reading)
            seconds = time.monotonic() - started
            api_cpu = cpu_s(api.pid) - cpu0
            api_rss = rss_mb(api.pid)
    finally:
        for proc in (api, worker):
            if proc is not None:
                proc.kill()
                proc.wait(timeout=30)
        if store is not None:
            await store.close()
        redis.stop()
    if not latencies:
        raise BenchError("no text entry reached a client")
    return {"sessions": sessions, "clients": clients, "word_delay_s": words_s,
            "entries_read": sum(counts), "seconds": round(seconds, 2),
            "latency_p50_ms": round(percentile(latencies, 50), 1),
            "latency_p95_ms": round(percentile(latencies, 95), 1),
            "to_redis_p50_ms": round(percentile(written, 50), 1),
            "to_redis_p95_ms": round(percentile(written, 95), 1),
            "api_cpu_s": round(api_cpu, 2), "api_cpu_share": round(api_cpu / seconds, 3),
            "api_rss_mb": round(api_rss, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.streaming", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=11,
                        help="rounds of the CPU row, four runs each (default 11)")
    parser.add_argument("--same-code", action="store_true",
                        help="the CPU row with the stream off on both sides (A/A): what "
                             "the method reads when there is nothing to find")
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--fanout-sessions", type=int, default=20)
    parser.add_argument("--word-delay-s", type=float, default=0.05)
    parser.add_argument("--logdir", type=Path, default=Path("/tmp/bench-streaming"))
    parser.add_argument("--rows", default="cpu,fanout", help="which rows (comma-separated)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = set(args.rows.split(","))
    cpu = asyncio.run(cpu_row(args.sessions, args.rounds, args.concurrency, args.same_code)) \
        if "cpu" in rows else None
    fan = asyncio.run(fanout_row(args.fanout_sessions, args.clients, args.word_delay_s,
                                 args.logdir)) if "fanout" in rows else None
    if args.json:
        print(json.dumps({"cpu": cpu, "fanout": fan}, indent=2))
        return 0
    if cpu is not None:
        sides = "A/A, the stream off on both sides" if cpu["same_code"] else "on vs off"
        print(f"live stream, worker CPU: {cpu['cpu_ratio']}x {sides}, the median of "
              f"{cpu['rounds']} rounds' ratios, quartiles {cpu['cpu_ratio_quartiles']} "
              f"(target <= 1.05x; ratio of the medians "
              f"{cpu['cpu_ratio_of_medians']}x, {cpu['cpu_ms_per_step_on']} vs "
              f"{cpu['cpu_ms_per_step_off']} ms/step; of the fastest runs "
              f"{cpu['cpu_ratio_of_fastest']}x); commit p50 {cpu['commit_p50_ms_on']} ms on "
              f"vs {cpu['commit_p50_ms_off']} off ({cpu['sessions']} one-step sessions, 100 "
              f"words a step, concurrency {cpu['concurrency']})")
    if fan is not None:
        print(f"live stream, fan-out: {fan['clients']} SSE clients on {fan['sessions']} "
              f"running sessions, one API process: delta-to-client p50 "
              f"{fan['latency_p50_ms']} ms, p95 {fan['latency_p95_ms']} ms (target <= 100; "
              f"of which model to Redis p50 {fan['to_redis_p50_ms']} ms, p95 "
              f"{fan['to_redis_p95_ms']} ms); "
              f"{fan['entries_read']} entries read in {fan['seconds']} s; API CPU "
              f"{fan['api_cpu_s']} s ({fan['api_cpu_share']:.0%} of a core), RSS "
              f"{fan['api_rss_mb']} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
