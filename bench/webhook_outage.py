"""The webhook outage drill (issue 30): a real `durable scheduler` and `arq` worker, a
receiver (bench/webhook_receiver.py) that verifies every signature with the
`standardwebhooks` reference and dedupes on webhook-id; sessions submitted with
`durable submit --webhook` while the receiver is down for --outage-s, then it comes
back. At the end: per event, the sessions' events, the entries the outbox recorded,
the ids the receiver processed (once each), the repeats it dropped, the signatures it
refused, and how long the backlog took to drain after the receiver came back.

    python -m bench.webhook_outage                    # receiver down 5 minutes
    python -m bench.webhook_outage --outage-s 20 --sessions 10
    python -m bench.webhook_outage --receiver-up --replicas 2 --kill-every-s 5 --outage-s 40

Exit 0 when every event was processed exactly once and none was refused, 1 otherwise.
tests/e2e/test_webhooks_e2e.py runs a short version of it.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from standardwebhooks.webhooks import Webhook

from bench.procs import REPO, arq_bin, clean_env
from bench.redis_server import free_port, start_redis
from bench.webhook_receiver import WebhookReceiver
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC = """version: 0
name: outage-{n}
runtime:
  provider: scripted
{failing}agents:
  a: {{prompt: "You are a."}}
pattern:
  type: chain
  config:
    steps:
      - {{agent: a, input: "one"}}
      - {{agent: a, input: "two"}}
"""
FAILING = "  failure_policy: {retries: 0}\n  script:\n    rules:\n      - {error: boom}\n"


@dataclass
class Drill:
    outage_s: float  # the receiver is down this long while sessions are submitted
    sessions: int
    backoff_max_s: float
    drain_timeout_s: float
    kill_every_s: float = 0.0  # > 0: SIGKILL the oldest scheduler this often, start another
    replicas: int = 1  # scheduler processes
    down: bool = True  # False: the receiver stays up (a failover drill alone)


def env_for(redis_url: str, prefix: str, backoff_max_s: float) -> dict[str, str]:
    return clean_env(DURABLE_REDIS_URL=redis_url, DURABLE_KEY_PREFIX=prefix,
                     DURABLE_METRICS_PORT="0", DURABLE_WEBHOOK_ALLOW="127.0.0.1",
                     DURABLE_WEBHOOK_SECRET=SECRET, DURABLE_WEBHOOK_BACKOFF_BASE_S="1",
                     DURABLE_WEBHOOK_BACKOFF_MAX_S=str(backoff_max_s),
                     DURABLE_WEBHOOK_SCAN_MS="200", DURABLE_TIMER_POLL_MS="100",
                     DURABLE_CLAIM_IDLE_MS="2000", DURABLE_SCHEDULER_LOCK_TTL_MS="1500",
                     DURABLE_WEBHOOK_TIMEOUT_S="2", DURABLE_WEBHOOK_LEASE_S="4")


def submit(env: dict[str, str], spec: Path, url: str) -> str:
    done = subprocess.run([sys.executable, "-m", "strands_durable.api.cli", "submit",
                           str(spec), "--webhook", url], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"durable submit exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout.strip()


async def outbox_counts(settings: DurableSettings) -> tuple[dict[str, int], dict[str, int]]:
    """The outbox's depth by state, and the most attempts a delivered entry took, by event."""
    store = open_store(settings)
    try:
        most: dict[str, int] = {}
        for entry, _state in await store.list_webhooks("delivered", 500):
            key = f"session.{entry.event}"
            most[key] = max(most.get(key, 0), entry.attempts)
        return await store.webhook_depth(), most
    finally:
        await store.close()


@dataclass
class Roles:
    """The drill's processes: scheduler replicas (the oldest killed on a clock) and a worker."""

    env: dict[str, str]
    workdir: Path
    kill_every_s: float
    schedulers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    others: list[subprocess.Popen[bytes]] = field(default_factory=list)
    kills: int = 0
    next_kill: float = 0.0

    def start_scheduler(self) -> None:
        log = (self.workdir / f"scheduler-{len(self.schedulers) + self.kills}.log").open("wb")
        self.schedulers.append(subprocess.Popen(
            [sys.executable, "-m", "strands_durable.api.cli", "scheduler"], cwd=REPO,
            env=self.env, stdout=log, stderr=subprocess.STDOUT))

    def start_worker(self) -> None:
        log = (self.workdir / "worker.log").open("wb")
        self.others.append(subprocess.Popen([*arq_bin(), "strands_durable.worker.WorkerSettings"],
                                            cwd=REPO, env=self.env, stdout=log,
                                            stderr=subprocess.STDOUT))

    def tick(self) -> None:
        """Kill the oldest scheduler (most likely the leader) when one is due."""
        if self.kill_every_s <= 0:
            return
        now = time.monotonic()
        if not self.next_kill:
            self.next_kill = now + self.kill_every_s
        elif now >= self.next_kill:
            oldest = self.schedulers.pop(0)
            oldest.send_signal(signal.SIGKILL)
            oldest.wait(timeout=30)
            self.kills += 1
            self.start_scheduler()
            self.next_kill = now + self.kill_every_s

    def stop(self) -> None:
        for p in [*self.schedulers, *self.others]:
            p.terminate()
        for p in [*self.schedulers, *self.others]:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def killer(roles: Roles, done: threading.Event) -> threading.Thread:
    """Kills on their own clock (a submit takes seconds of its own)."""

    def loop() -> None:
        while not done.wait(0.2):
            roles.tick()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def run(drill: Drill, workdir: Path) -> int:
    redis = start_redis()
    receiver = WebhookReceiver(free_port(), lambda b, h: Webhook(SECRET).verify(b, h))
    env = env_for(redis.url, "outage", drill.backoff_max_s)
    settings = DurableSettings(redis_url=redis.url, key_prefix="outage")
    roles = Roles(env, workdir, drill.kill_every_s)
    for _ in range(drill.replicas):
        roles.start_scheduler()
    roles.start_worker()
    if not drill.down:
        receiver.start()
    done = threading.Event()
    kills = killer(roles, done)
    try:
        expected = drive(drill, roles, receiver, workdir)
        came_back = time.monotonic()
        if drill.down:
            receiver.start()
        deadline = came_back + drill.drain_timeout_s
        while len(receiver.processed) < sum(expected.values()) and time.monotonic() < deadline:
            time.sleep(0.5)
        drained = time.monotonic() - came_back
        # An entry whose leader was killed after the receiver had it stays leased until
        # its lease lapses, then goes again (a repeat the receiver drops): wait that out.
        counts, most = asyncio.run(outbox_counts(settings))
        while counts["pending"] + counts["in_flight"] and time.monotonic() < deadline:
            time.sleep(0.5)
            counts, most = asyncio.run(outbox_counts(settings))
        return report(expected, receiver, counts, most, drained, drill, roles.kills)
    finally:
        done.set()
        kills.join(timeout=60)
        receiver.stop()
        roles.stop()
        redis.stop()


def drive(drill: Drill, roles: Roles, receiver: WebhookReceiver, workdir: Path
          ) -> dict[str, int]:
    """Submit the sessions through the outage (every third one fails); the events each
    should produce, by type."""
    expected = {"session.completed": 0, "session.failed": 0}
    started = time.monotonic()
    gap = drill.outage_s / max(drill.sessions, 1)
    for n in range(drill.sessions):
        failing = n % 3 == 2
        spec = workdir / f"spec-{n}.yaml"
        spec.write_text(SPEC.format(n=n, failing=FAILING if failing else ""))
        submit(roles.env, spec, receiver.url)
        expected["session.failed" if failing else "session.completed"] += 1
        time.sleep(max(0.0, started + (n + 1) * gap - time.monotonic()))
    time.sleep(max(0.0, started + drill.outage_s - time.monotonic()))
    return expected


def report(expected: dict[str, int], receiver: WebhookReceiver, counts: dict[str, int],
           most: dict[str, int], drained: float, drill: Drill, kills: int) -> int:
    got: dict[str, int] = {}
    for r in receiver.processed.values():
        got[r.event] = got.get(r.event, 0) + 1
    print(f"receiver {'down' if drill.down else 'up'} {drill.outage_s:g} s, "
          f"{drill.sessions} sessions, backoff 1 s doubling to {drill.backoff_max_s:g} s, "
          f"{drill.replicas} scheduler(s), {kills} leader kill(s)")
    print("| event | sessions | processed once | most attempts | repeats dropped | refused |")
    print("|---|---|---|---|---|---|")
    for event, n in expected.items():
        print(f"| {event} | {n} | {got.get(event, 0)} | {most.get(event, 0)} | - | - |")
    print(f"| all | {sum(expected.values())} | {len(receiver.processed)} | "
          f"{max(most.values(), default=0)} | {receiver.repeats} | {receiver.refused} |")
    print(f"requests received {receiver.requests}; backlog drained {drained:.1f} s after "
          f"the receiver came back; outbox now {counts}")
    ok = (got == {k: v for k, v in expected.items() if v} and receiver.refused == 0
          and counts["pending"] == counts["in_flight"] == counts["dead"] == 0)
    print("every event processed exactly once" if ok else "MISSING OR EXTRA EVENTS")
    return 0 if ok else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outage-s", type=float, default=300.0)
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--backoff-max-s", type=float, default=30.0)
    parser.add_argument("--drain-timeout-s", type=float, default=180.0)
    parser.add_argument("--kill-every-s", type=float, default=0.0,
                        help="SIGKILL the oldest scheduler this often (start another)")
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--receiver-up", action="store_true",
                        help="keep the receiver up (a failover drill alone)")
    a = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="webhook-outage-") as tmp:
        code = run(Drill(a.outage_s, a.sessions, a.backoff_max_s, a.drain_timeout_s,
                         a.kill_every_s, a.replicas, not a.receiver_up), Path(tmp))
    sys.exit(code)


if __name__ == "__main__":
    main()
