"""Submit-time rendering against the API's event loop (issue 33): /healthz latency of a
real `durable api` process while clients submit CPU-heavy templates in a loop.

    python -m bench.submit_render                   # 8 clients, 20 s, about 30 s in all
    python -m bench.submit_render --seconds 5 --clients 4 --render-workers 1 --json out.json

A private redis-server on a free port (never :6379) and `durable api --port <free>` are
started and stopped here. The clients run in a process of their own (so their work
does not slow the probe) and submit, back to back, specs whose first step's input is a
~350-byte template that passes the static checks and burns CPU until the render limit
stops it (a nested loop over 999,999 characters, and a sort of a million-item list).
They do not wait for Retry-After: a hostile client would not. The probe GETs /healthz
every 10 ms, first with no load (3 s), then under it, and reports p50/p99/max and the
submit answers by status (one light submit first, so the API's render processes are
up before the idle probe). Exit 0 unless the run itself failed (the API died)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from bench.procs import REPO, clean_env
from bench.redis_server import free_port, start_redis

# Each template is one step's `input`; the spec is about 350 bytes of YAML.
TEMPLATES = (
    "{% for a in 'a'*999999 %}{% for b in 'a'*999999 %}{% endfor %}{% endfor %}x",
    "{{ list('a'*999999)|sort|join|length }}",
)
SPEC = """version: 0
name: heavy-{n}
runtime: {{provider: scripted}}
agents:
  a: {{prompt: "You are a."}}
pattern:
  type: chain
  config:
    steps:
      - agent: a
        input: "{template}"
"""
LIGHT = SPEC.format(n="light", template="hello")
PROBE_INTERVAL_S = 0.01
IDLE_S = 3.0


def spec(n: int) -> str:
    return SPEC.format(n=n, template=TEMPLATES[n % len(TEMPLATES)])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.submit_render", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, default=8, help="concurrent submitters (8)")
    p.add_argument("--seconds", type=float, default=20.0, help="probe time under load (20)")
    p.add_argument("--render-workers", type=int, default=None,
                   help="DURABLE_API_RENDER_WORKERS of the API (its default if unset)")
    p.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    # Internal: the clients' own process.
    p.add_argument("--submitters", metavar="URL", help=argparse.SUPPRESS)
    return p.parse_args(argv)


# -- the clients (their own process) ----------------------------------------------------
async def submitters(url: str, clients: int, seconds: float) -> dict[str, int]:
    answers: Counter[str] = Counter()
    deadline = time.monotonic() + seconds

    async def one(n: int) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            while time.monotonic() < deadline:
                try:
                    r = await client.post("/v1/sessions", json={"spec": spec(n)})
                    answers[str(r.status_code)] += 1
                except httpx.HTTPError as exc:
                    answers[type(exc).__name__] += 1
                if sum(answers.values()) == 1:
                    print("started", flush=True)  # the probe waits for this line

    await asyncio.gather(*(one(n) for n in range(clients)))
    return dict(answers)


# -- the probe ----------------------------------------------------------------------------
def probe(url: str, seconds: float) -> list[float]:
    """/healthz latencies (ms), one request at a time, for `seconds`."""
    samples: list[float] = []
    with httpx.Client(base_url=url, timeout=30) as client:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            start = time.perf_counter()
            r = client.get("/healthz")
            samples.append((time.perf_counter() - start) * 1000)
            if r.status_code not in (200, 503):
                raise RuntimeError(f"/healthz answered {r.status_code}: {r.text[:200]}")
            time.sleep(PROBE_INTERVAL_S)
    return samples


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"n": len(ordered), "p50_ms": statistics.median(ordered),
            "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
            "max_ms": ordered[-1]}


def wait_answering(url: str, api: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if api.poll() is not None:
            raise RuntimeError(f"durable api exited {api.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code in (200, 503):
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise RuntimeError("durable api did not answer within 30 s")


def run(args: argparse.Namespace) -> dict[str, Any]:
    load = [os.getloadavg()[0]]  # a shared machine is noisy: say how busy it was
    redis = start_redis()
    logdir = Path(tempfile.mkdtemp(prefix="durable-bench-submit-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    extra = {"DURABLE_REDIS_URL": redis.url, "DURABLE_KEY_PREFIX": f"b{secrets.token_hex(4)}"}
    if args.render_workers is not None:
        extra["DURABLE_API_RENDER_WORKERS"] = str(args.render_workers)
    env = clean_env(**extra)
    log = logdir / "api.log"
    with log.open("wb") as out:
        api = subprocess.Popen([sys.executable, "-m", "strands_durable.api.cli", "api",
                                "--port", str(port)], cwd=REPO, env=env, stdout=out,
                               stderr=subprocess.STDOUT)
    clients: subprocess.Popen[str] | None = None
    try:
        wait_answering(url, api, log)
        light = httpx.post(f"{url}/v1/sessions", timeout=60, json={"spec": LIGHT})
        if light.status_code != 201:  # the render processes are up once it is planned
            raise RuntimeError(f"a light submit answered {light.status_code}: {light.text}")
        idle = probe(url, IDLE_S)
        clients = subprocess.Popen(
            [sys.executable, "-m", "bench.submit_render", "--submitters", url,
             "--clients", str(args.clients), "--seconds", str(args.seconds + 2)],
            cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
        assert clients.stdout is not None
        if clients.stdout.readline().strip() != "started":
            raise RuntimeError("the clients stopped before their first answer")
        loaded = probe(url, args.seconds)
        answers = json.loads(clients.stdout.read() or "{}")
        clients.wait(timeout=120)
        if api.poll() is not None:
            raise RuntimeError(f"durable api exited {api.returncode}")
    finally:
        if clients is not None and clients.poll() is None:
            clients.kill()
            clients.wait(timeout=10)
        if api.poll() is None:
            api.terminate()
            try:
                api.wait(timeout=15)
            except subprocess.TimeoutExpired:
                api.kill()
                api.wait(timeout=10)
        redis.stop()
    load.append(os.getloadavg()[0])
    return {"cpus": os.cpu_count(), "load_1min": load, "clients": args.clients,
            "render_workers": args.render_workers, "idle": summary(idle),
            "loaded": summary(loaded), "submit_answers": answers, "api_log": str(log)}


def report(data: dict[str, Any]) -> str:
    def row(name: str, s: dict[str, float]) -> str:
        return (f"{name:<28} {s['n']:>6} {s['p50_ms']:>9.1f} {s['p99_ms']:>9.1f} "
                f"{s['max_ms']:>9.1f}")

    workers = data["render_workers"] if data["render_workers"] is not None else "default"
    lines = [f"/healthz while {data['clients']} clients submit CPU-heavy templates "
             f"({data['cpus']} CPUs, load {data['load_1min'][0]:.1f} at the start and "
             f"{data['load_1min'][1]:.1f} at the end; render workers: {workers})",
             f"{'':<28} {'n':>6} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9}",
             row("idle", data["idle"]), row("under submit load", data["loaded"]),
             "submit answers: " + ", ".join(f"{k}: {v}" for k, v in
                                            sorted(data["submit_answers"].items()))]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.submitters:
        answers = asyncio.run(submitters(args.submitters, args.clients, args.seconds))
        print(json.dumps(answers), flush=True)
        return 0
    try:
        data = run(args)
    except RuntimeError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    print(report(data))
    if args.json:
        args.json.write_text(json.dumps(data, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
