"""Issue 31's upgrade drill: the previous release's fleet (2 workers, a scheduler, an API;
its own code, tests/helpers/previous_release.py) runs 40 sessions (human-input chains and
the chain, workflow, graph and parallel examples, scripted), and its processes are
replaced one by one by this release's while steps run; then the reverse window (this
release's scheduler and API beside the previous release's workers). Every session
completes, each step is committed once, and the results are those of a run on this
release alone."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from helpers import EXAMPLES, free_port, random_prefix, start_redis, wait_for_sync
from helpers.previous_release import (
    CURRENT,
    PREVIOUS_COMMIT,
    PREVIOUS_VERSION,
    Release,
    build_previous_release,
    end_group,
    has_commit,
)

from strands_durable.store.keys import Keys
from strands_durable.version import DATA_FORMAT, __version__

pytestmark = pytest.mark.timeout(600)

SLOW = {"delay_s: 0.05": "delay_s: 0.3"}  # each model call in flight a while
HITL = """
version: 0
name: approve
runtime: {provider: scripted, script: {delay_s: 0.3}}
agents:
  a: {prompt: "You draft."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "draft it"}
      - type: hitl
        prompt: "Approve the draft?"
      - {agent: a, input: "final after {{ hitl_response }}"}
      - {agent: a, input: "polish {{ last_response }}"}
      - {agent: a, input: "shorten {{ last_response }}"}
      - {agent: a, input: "sign {{ last_response }}"}
"""
ANSWER = "ship it"


def _example(name: str) -> str:
    text = (EXAMPLES / f"{name}.yaml").read_text()
    for old, new in SLOW.items():
        text = text.replace(old, new)
    return text


SPECS = {"hitl": HITL, "chain": _example("chain-research"),
         "workflow": _example("workflow-release-notes"),
         "graph": _example("graph-code-review-loop"),
         "parallel": _example("parallel-market-scan")}


@pytest.fixture(scope="session")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    """The previous release's code, ready to run beside this one (no venv of its own)."""
    if not has_commit(PREVIOUS_COMMIT):
        pytest.skip(f"the previous release's commit {PREVIOUS_COMMIT} is not in this "
                    "repository (a shallow clone): fetch it to run the upgrade drill")
    where = tmp_path_factory.mktemp("previous-release")
    try:
        yield build_previous_release(where)
    finally:
        shutil.rmtree(where, ignore_errors=True)


class Drill:
    """One fleet on its own redis-server: processes by role, each of a release."""

    def __init__(self, tmp: Path) -> None:
        self.server = start_redis()
        self.prefix = random_prefix()
        self.logdir = tmp
        self.env = {**os.environ, "DURABLE_REDIS_URL": self.server.url,
                    "DURABLE_KEY_PREFIX": self.prefix, "DURABLE_METRICS_PORT": "0",
                    "PYTHONUNBUFFERED": "1", "DURABLE_HEARTBEAT_S": "0.5",
                    "DURABLE_CLAIM_IDLE_MS": "2000", "DURABLE_READ_BLOCK_MS": "100",
                    "DURABLE_TIMER_POLL_MS": "50"}
        self.env.pop("DURABLE_API_TOKEN", None)
        self.redis = redis.Redis.from_url(self.server.url, decode_responses=True)
        self.keys = Keys(self.prefix)
        self.procs: dict[str, tuple[subprocess.Popen[bytes], Release]] = {}
        self.api_url = ""
        self.t0 = time.monotonic()
        self.table: list[str] = []
        self.sids: dict[str, str] = {}  # session id -> spec name

    def note(self, what: str) -> None:
        statuses = Counter(self.status(sid) for sid in self.sids)
        self.table.append(f"| {time.monotonic() - self.t0:6.1f} s | {what} | "
                          f"{self.in_flight()} | {dict(sorted(statuses.items()))} |")

    # -- processes -----------------------------------------------------------------
    def start(self, role: str, release: Release) -> None:
        log = self.logdir / f"{role}.log"
        if role.startswith("worker"):
            proc = release.worker(self.env, log)
            self.procs[role] = (proc, release)
            wait_for_sync(lambda: self._beating(proc), timeout_s=120,
                          what=f"{role} of {release.name} to beat")
        elif role == "scheduler":
            lock = self.keys.lock("scheduler")
            before = self.redis.get(lock)  # a stopped scheduler lets its lock go
            proc = release.scheduler(self.env, log)
            self.procs[role] = (proc, release)
            wait_for_sync(lambda: self._alive(proc) and self.redis.get(lock) not in (
                None, before), timeout_s=120, what=f"the scheduler of {release.name} to lead")
        else:
            port = free_port()
            proc = release.api(self.env, port, log)
            self.procs[role] = (proc, release)
            self.api_url = f"http://127.0.0.1:{port}"
            wait_for_sync(lambda: self._alive(proc) and self._answers(), timeout_s=120,
                          what=f"the API of {release.name} to answer")
        self.note(f"{role}: {release.name} started")

    def stop(self, role: str) -> None:
        proc, release = self.procs.pop(role)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=90)
        end_group(proc)
        assert code in (0, -signal.SIGTERM), f"{role} exited {code}:\n{self.logs()}"
        self.note(f"{role}: {release.name} stopped (SIGTERM)")

    def _alive(self, proc: subprocess.Popen[bytes]) -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"a process exited {proc.returncode}:\n{self.logs()}")
        return True

    def _beating(self, proc: subprocess.Popen[bytes]) -> bool:
        self._alive(proc)
        return any(json.loads(beat).get("pid") == proc.pid
                   for beat in self.redis.hvals(self.keys.workers()))

    def _answers(self) -> bool:
        try:
            return httpx.get(f"{self.api_url}/healthz", timeout=2).status_code in (200, 503)
        except httpx.TransportError:
            return False

    def cli(self, release: Release, *args: str) -> Any:
        """`durable ARGS` of `release` on this fleet; its JSON answer."""
        done = release.run(["-m", "strands_durable.api.cli", *args], self.env)
        assert done.returncode == 0, (release.name, args, done.stdout, done.stderr)
        return json.loads(done.stdout)

    def heartbeats(self) -> dict[int, dict[str, Any]]:
        return {b["pid"]: b for b in map(json.loads, self.redis.hvals(self.keys.workers()))}

    def close(self) -> None:
        for proc, _ in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
            end_group(proc)
        self.redis.close()
        self.server.stop()

    def logs(self) -> str:
        return "\n".join(f"== {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                         for p in sorted(self.logdir.glob("*.log")))

    # -- sessions ------------------------------------------------------------------
    def submit_many(self, names: list[str]) -> list[str]:
        with ThreadPoolExecutor(8) as pool:
            return list(pool.map(self.submit, names))

    def submit(self, name: str) -> str:
        r = httpx.post(f"{self.api_url}/v1/sessions", json={"spec": SPECS[name]}, timeout=60)
        assert r.status_code == 201, r.text
        sid: str = r.json()["session_id"]
        self.sids[sid] = name
        return sid

    def status(self, sid: str) -> str:
        return self.redis.hget(self.keys.meta(sid), "status") or "?"

    def wait_status(self, sid: str, status: str) -> None:
        wait_for_sync(lambda: self.status(sid) == status, timeout_s=120,
                      what=f"{sid} to be {status}")

    def in_flight(self) -> int:
        return int(self.redis.xpending(self.keys.stream(0), "workers")["pending"]) \
            if self.redis.exists(self.keys.stream(0)) else 0

    def wait_in_flight(self) -> None:
        """Steps running now, so the next replacement happens under work. On a loaded
        machine a restart may outlast every running session: when none is running (all
        done, or waiting for a human), two more are submitted through the API."""
        def busy() -> bool:
            if self.in_flight() > 0:
                return True
            if not any(self.status(sid) == "running" for sid in self.sids):
                self.submit_many(["chain", "workflow"])
                self.note("2 sessions more, for steps in flight")
            return False

        wait_for_sync(busy, timeout_s=120, what="steps in flight")

    def answer(self, sids: list[str]) -> None:
        """Answer each human-input step through the API that is up now."""
        for sid in sids:
            self.wait_status(sid, "paused")
            r = httpx.post(f"{self.api_url}/v1/sessions/{sid}/signal",
                           json={"response": ANSWER}, timeout=30)
            assert r.status_code == 200, r.text
        self.note(f"{len(sids)} human answers through the API of "
                  f"{self.procs['api'][1].name}")

    def wait_completed(self) -> None:
        def done() -> bool:
            statuses = {sid: self.status(sid) for sid in self.sids}
            bad = {s: st for s, st in statuses.items() if st in ("failed", "cancelled")}
            assert not bad, f"sessions ended badly: {bad}\n{self.logs()}"
            return all(st == "completed" for st in statuses.values())

        wait_for_sync(done, timeout_s=240, what="every session to complete")
        self.note("every session completed")

    def outcome(self, sid: str) -> dict[str, str]:
        """The session's committed responses by step key, after checking each step was
        committed exactly once and nothing failed."""
        results = self.redis.hgetall(self.keys.results(sid))
        order = self.redis.lrange(self.keys.order(sid), 0, -1)
        assert sorted(order) == sorted(results), (sid, order, list(results))
        events = [fields for _, fields in self.redis.xrange(self.keys.events(sid))]
        completed = Counter(e.get("step") for e in events if e["type"] == "step_completed")
        assert completed == Counter(order), (sid, completed, order)
        failed = [e for e in events
                  if e["type"] in ("step_failed", "step_dead_lettered", "session_failed")]
        assert not failed, (sid, failed)
        return {key: json.loads(value)["response"] for key, value in results.items()}


@pytest.fixture
def drill(tmp_path: Path) -> Iterator[Drill]:
    d = Drill(tmp_path)
    try:
        yield d
    finally:
        d.close()
        print("\n| at | what | steps in flight | sessions |\n|---|---|---|---|")
        print("\n".join(d.table))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """Each spec's committed responses on this release alone (one worker, one API)."""
    d = Drill(tmp_path_factory.mktemp("reference"))
    try:
        d.start("api", CURRENT)
        d.start("worker-1", CURRENT)
        by_name = {name: d.submit(name) for name in SPECS}
        d.answer([by_name["hitl"]])
        d.wait_completed()
        return {name: d.outcome(sid) for name, sid in by_name.items()}
    finally:
        d.close()


def check_outcomes(drill: Drill, reference: dict[str, dict[str, str]]) -> None:
    for sid, name in drill.sids.items():
        assert drill.outcome(sid) == reference[name], f"{name} session {sid} differs"
    assert drill.redis.hget(drill.keys.config(), "format") == str(DATA_FORMAT)


def test_the_previous_release_runs_its_own_code(previous_release: Release) -> None:
    path, version = previous_release.imported_from()
    assert previous_release.site is not None
    assert Path(path).is_relative_to(previous_release.site) and version == PREVIOUS_VERSION
    old = previous_release.run(["-m", "strands_durable.api.cli", "--version"])
    assert old.stdout.strip() == f"durable (strands-durable) {PREVIOUS_VERSION}", old
    new = CURRENT.run(["-m", "strands_durable.api.cli", "--version"])
    assert new.stdout.strip() == (f"durable (strands-durable) {__version__}, "
                                  f"data format {DATA_FORMAT}"), new
    path, _ = CURRENT.imported_from()
    assert not Path(path).is_relative_to(previous_release.site)


def test_rolling_upgrade_from_the_previous_release(
        previous_release: Release, reference: dict[str, dict[str, str]],
        drill: Drill) -> None:
    old, new = previous_release, CURRENT
    for role in ("api", "worker-1", "worker-2", "scheduler"):
        drill.start(role, old)
    hitl = drill.submit_many(["hitl"] * 20)
    drill.submit_many(["chain", "workflow", "graph", "parallel"] * 5)
    drill.note("40 sessions submitted")
    assert drill.redis.hget(drill.keys.config(), "format") is None  # 0.1.0 records none

    drill.wait_in_flight()
    drill.stop("worker-1")
    drill.start("worker-1", new)
    # The first new process recorded the data format; the old ones go on beside it.
    assert drill.redis.hget(drill.keys.config(), "format") == str(DATA_FORMAT)
    versions = {b.get("version") for b in drill.heartbeats().values()}
    assert versions == {None, __version__}, versions
    # The old API reads the fleet with a new heartbeat in it.
    r = httpx.get(f"{drill.api_url}/v1/workers", timeout=30)
    assert r.status_code == 200, r.text
    assert {w["pid"] for w in r.json()["items"] if w["alive"]} == set(drill.heartbeats())
    shown = drill.cli(old, "workers", "--json")
    assert {w["pid"] for w in shown if w["alive"]} == set(drill.heartbeats())

    # Each next replacement while answered sessions' steps run.
    waves = [hitl[i:i + 4] for i in range(0, 12, 4)]
    for wave, role in zip(waves, ("worker-2", "scheduler", "api"), strict=True):
        drill.answer(wave)
        drill.wait_in_flight()
        drill.stop(role)
        drill.start(role, new)
    drill.answer(hitl[12:])
    drill.wait_completed()
    check_outcomes(drill, reference)
    assert {b.get("version") for b in drill.heartbeats().values()} == {__version__}


def test_new_scheduler_and_api_beside_previous_workers_and_back(
        previous_release: Release, reference: dict[str, dict[str, str]],
        drill: Drill) -> None:
    """The documented window the other way round: the new scheduler and API come first
    (they record the data format) while the previous release's workers run the steps;
    then the scheduler and API are rolled back to the previous release mid-run."""
    drill.start("scheduler", CURRENT)
    drill.start("api", CURRENT)
    assert drill.redis.hget(drill.keys.config(), "format") == str(DATA_FORMAT)
    drill.start("worker-1", previous_release)
    drill.start("worker-2", previous_release)
    hitl = drill.submit_many(["hitl"] * 4)
    drill.submit_many(["chain", "workflow", "graph", "parallel"] * 2)
    drill.note("12 sessions submitted")
    drill.answer(hitl[:2])
    # Rolling back: 0.1.0's scheduler and API start on the data 0.2.0 recorded.
    for role in ("scheduler", "api"):
        drill.wait_in_flight()
        drill.stop(role)
        drill.start(role, previous_release)
    drill.answer(hitl[2:])
    drill.wait_completed()
    # 0.1.0's CLI reads a session 0.2.0's API created, and 0.2.0's shows what ran it.
    sid = hitl[0]
    assert drill.cli(previous_release, "status", sid, "--json")["status"] == "completed"
    assert {w["pid"] for w in drill.cli(CURRENT, "workers", "--json") if w["alive"]} == set(
        drill.heartbeats())
    check_outcomes(drill, reference)
    # Every model step was run and committed by a previous-release worker (a human's
    # answer is committed by the API's operator).
    results = [json.loads(v) for sid in drill.sids
               for v in drill.redis.hvals(drill.keys.results(sid))]
    committed_by = {r["worker"] for r in results if r["agent"] != "hitl"}
    assert committed_by and committed_by <= set(drill.redis.hkeys(drill.keys.workers()))
    assert all("version" not in b for b in drill.heartbeats().values())
