"""End to end, the operator's commands: real `arq worker` processes, the `durable` CLI,
a private redis-server and (for a model that is not there yet) a fake Ollama."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import EXAMPLES, REPO, wait_for_sync
from helpers.fake_ollama import FakeOllama, fake_ollama
from helpers.fleet import Fleet, durable_bin

pytestmark = pytest.mark.e2e

NOPE = "00000000-0000-4000-8000-000000000000"  # well-formed, no such session

CHAIN = """
version: 0
name: drill
runtime:
  provider: scripted
  host: HOST
  failure_policy: {retries: 0}
agents:
  researcher: {prompt: "You research."}
  writer: {prompt: "You write.", provider: WRITER, model_id: llama3}
pattern:
  type: chain
  config:
    steps:
      - {agent: researcher, input: "facts about {{ topic }}"}
      - {agent: researcher, input: "more on {{ last_response }}"}
      - {agent: writer, input: "write up {{ topic }}: {{ steps[1].response }}"}
inputs:
  values: {topic: tides}
"""

HITL = """
version: 0
name: ask
runtime: {provider: scripted}
agents:
  a: {prompt: "You draft."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "draft it"}
      - {type: hitl, prompt: "Approve?"}
"""


def spec_file(tmp_path: Path, text: str, name: str = "spec.yaml", **subs: object) -> str:
    for key, value in {"HOST": "http://127.0.0.1:9", "WRITER": "scripted", **subs}.items():
        text = text.replace(key, str(value))
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.fixture
def ollama(allow_provider_host: Callable[[str, str], None]) -> Iterator[FakeOllama]:
    """The fake, listed in DURABLE_OLLAMA_HOSTS for the workers and CLIs started after it."""
    with fake_ollama() as server:
        allow_provider_host("ollama", server.url)
        yield server


def status(fleet: Fleet, sid: str) -> str:
    return str(fleet.cli_json("status", sid)["status"])


def refused(fleet: Fleet, code: int, *args: str) -> str:
    """Run a command that must fail with `code` and one clean error line; its stderr."""
    result = fleet.cli(*args, check=False)
    assert result.returncode == code, (args, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and result.stderr.startswith("error: "), args
    return " ".join(result.stderr.split())


def test_dead_letter_drill_requeue_after_the_fix(fleet_factory, tmp_path: Path) -> None:
    # A bad worker build crashes on every step it takes (DURABLE_CRASH_AT); the step is
    # re-claimed, delivered once too often and dead-lettered, failing the session.
    fleet: Fleet = fleet_factory(claim_idle_ms=800, max_deliveries=1, crash_at="after_gate:1")
    sid = fleet.cli("submit", spec_file(tmp_path, CHAIN)).stdout.strip()
    crashed = fleet.start_worker()
    assert crashed.wait(timeout=60) == 137
    second = fleet.start_worker()
    wait_for_sync(lambda: status(fleet, sid) == "failed", what="the dead letter")
    assert "delivered 2 times" in fleet.cli_json("status", sid)["error"]
    assert fleet.cli_json("queue")["total"]["dead_letters"] == 1

    dry = fleet.cli("requeue", "--dead", "--dry-run")
    assert f"would requeue {sid} step:0 (agent researcher, failed attempt 1, dead-lettered)" \
        in dry.stdout
    assert f"{sid} would be running" in dry.stdout
    assert status(fleet, sid) == "failed"
    assert fleet.cli_json("queue")["total"]["dead_letters"] == 1

    # The fix is deployed: the bad workers go, a fixed one starts; then requeue.
    fleet.kill(second)
    del fleet.env["DURABLE_CRASH_AT"]
    fixed = fleet.start_worker()
    done = fleet.cli("requeue", "--dead")
    assert f"requeued {sid} step:0" in done.stdout and f"{sid} is running" in done.stdout
    assert fleet.cli("wait", sid, "--timeout", "60").returncode == 0
    types = [e["type"] for e in fleet.cli_json("history", sid)]
    assert types.count("step_dead_lettered") == 1 and types.count("step_requeued") == 1
    assert types[-1] == "session_completed"
    queue = fleet.cli_json("queue")["total"]
    assert (queue["dead_letters"], queue["length"], queue["pending"]) == (0, 0, 0)
    assert fleet.cli("requeue", "--dead").stdout.strip() == "no dead-lettered entries"

    workers = {w["pid"]: w for w in fleet.cli_json("workers")}
    assert workers[fixed.pid]["alive"] and workers[fixed.pid]["pending"] == 0
    assert 1 <= workers[fixed.pid]["slots"] <= workers[fixed.pid]["concurrency"]
    table = fleet.cli("workers", "--alive").stdout
    assert str(fixed.pid) in table


def test_failed_step_requeued_once_the_model_is_pulled(fleet_factory, tmp_path: Path,
                                                       ollama: FakeOllama) -> None:
    fleet: Fleet = fleet_factory()
    fleet.start_worker()
    spec = spec_file(tmp_path, CHAIN, HOST=ollama.url, WRITER="ollama")
    sid = fleet.cli("submit", spec).stdout.strip()
    assert fleet.cli("wait", sid, "--timeout", "60", check=False).returncode == 1
    assert 'model "llama3" not found' in fleet.cli_json("status", sid)["error"]

    message = refused(fleet, 1, "requeue", sid, "--step", "step:9")
    assert f"session {sid}: step 'step:9' is not failed or dead-lettered (failed or " \
           f"dead-lettered steps: step:2)" in message
    refused(fleet, 1, "requeue", sid, "--dead")  # it failed, it was not dead-lettered
    assert f"session '{NOPE}' not found" in refused(fleet, 1, "requeue", NOPE)
    assert "session id 'nope' is not valid" in refused(fleet, 2, "requeue", "nope")
    refused(fleet, 2, "requeue", "--step", "step:2")
    assert f"would requeue {sid} step:2" in fleet.cli("requeue", sid, "--dry-run").stdout
    assert status(fleet, sid) == "failed"

    ollama.pull("llama3")
    report = json.loads(fleet.cli("requeue", sid, "--step", "step:2", "--json").stdout)
    assert [(r["step"], r["failed_attempt"]) for r in report["requeued"]] == [("step:2", 1)]
    watched = fleet.cli("watch", sid, "--timeout", "60", check=False)
    assert watched.returncode == 0, watched.stderr
    assert "completed" in watched.stdout and "step:2" in watched.stdout
    history = fleet.cli_json("status", sid)["pattern_state"]["step_history"]
    assert history[2]["response"].startswith("ollama: write up tides")
    assert "cannot requeue a session that is completed" in refused(fleet, 1, "requeue", sid)


def test_checkpoints_and_fork_from_one(fleet_factory) -> None:
    fleet: Fleet = fleet_factory()
    fleet.start_worker()
    sid = fleet.cli("submit", str(EXAMPLES / "chain-research.yaml"), "--var",
                    "topic=tidal power").stdout.strip()
    assert fleet.cli("wait", sid, "--timeout", "60").returncode == 0
    listed = fleet.cli_json("checkpoints", sid)
    assert [(c["n"], c["step"], c["status"], c["clean"]) for c in listed] == [
        (1, "step:0", "running", True), (2, "step:1", "running", True),
        (3, "step:2", "completed", True)]
    table = fleet.cli("checkpoints", sid).stdout
    assert "step:1" in table and "analyst" in table
    two = fleet.cli_json("checkpoints", sid, "2")
    original = fleet.cli_json("status", sid)
    assert two["pattern_state"] == {"current_step": 2, "step_history":
                                    original["pattern_state"]["step_history"][:2]}

    forked = fleet.cli("resume", sid, "--from-checkpoint", "2", "--var", "topic=volcanoes")
    new = forked.stdout.strip()
    assert len(new) == 36 and new != sid
    assert f"forked {sid} at checkpoint 2" in forked.stderr
    assert fleet.cli("wait", new, "--timeout", "60").returncode == 0
    doc = fleet.cli_json("status", new)
    assert doc["variables"]["topic"] == "volcanoes"
    history = doc["pattern_state"]["step_history"]
    assert history[:2] == original["pattern_state"]["step_history"][:2]
    assert fleet.cli_json("status", sid) == original  # the original, untouched

    assert "there is no checkpoint 9 (checkpoints 1..3)" in refused(
        fleet, 1, "checkpoints", sid, "9")
    assert "checkpoint 3 completed the session: nothing follows it" in refused(
        fleet, 1, "resume", sid, "--from-checkpoint", "3")
    assert f"session '{NOPE}' not found" in refused(fleet, 1, "checkpoints", NOPE)
    assert f"session '{NOPE}' not found" in refused(
        fleet, 1, "resume", NOPE, "--from-checkpoint", "1")
    refused(fleet, 2, "checkpoints", sid, "0")
    refused(fleet, 2, "resume", sid, "--from-checkpoint", "0")
    assert "not a whole number" in refused(
        fleet, 2, "resume", sid, "--from-checkpoint", "1", "--set", "budgets.max_tokens=x")
    assert "cannot be combined with --hitl-response" in refused(
        fleet, 2, "resume", sid, "--from-checkpoint", "1", "--hitl-response", "ok")
    assert len(fleet.cli_json("sessions", "list")) == 2  # no refused fork created one


def test_watch_exits_like_wait(fleet_factory, tmp_path: Path) -> None:
    fleet: Fleet = fleet_factory()
    fleet.start_worker()
    asking = fleet.cli("submit", spec_file(tmp_path, HITL)).stdout.strip()
    paused = fleet.cli("watch", asking, "--timeout", "60", check=False)
    assert paused.returncode == 3
    assert "waiting for human input at step:1" in " ".join(paused.stdout.split())
    fleet.breakpoints.set("drill", "step:0")  # the session stays running
    slow = fleet.cli("submit", spec_file(tmp_path, CHAIN, "slow.yaml")).stdout.strip()
    timed_out = fleet.cli("watch", slow, "--timeout", "1", check=False)
    assert timed_out.returncode == 124 and "timed out after 1.0s" in timed_out.stderr
    assert f"session '{NOPE}' not found" in refused(fleet, 1, "watch", NOPE)


def test_sessions_cleanup(fleet_factory, tmp_path: Path) -> None:
    fleet: Fleet = fleet_factory()
    fleet.start_worker()
    done = fleet.cli("submit", spec_file(tmp_path, CHAIN)).stdout.strip()
    assert fleet.cli("wait", done, "--timeout", "60").returncode == 0
    asking = fleet.cli("submit", spec_file(tmp_path, HITL, "ask.yaml")).stdout.strip()
    wait_for_sync(lambda: status(fleet, asking) == "paused", what="the HITL pause")

    dry = fleet.cli("sessions", "cleanup", "--max-age-days", "0", "--dry-run").stdout
    assert f"would delete {done}" in dry and asking not in dry
    assert status(fleet, done) == "completed"
    kept = fleet.cli_json("sessions", "cleanup", "--max-age-days", "0", "--keep-completed")
    assert kept["deleted"] == []
    gone = fleet.cli_json("sessions", "cleanup", "--max-age-days", "0")
    assert gone == {"dry_run": False, "deleted": [done], "would_delete": []}
    refused(fleet, 1, "status", done)
    assert status(fleet, asking) == "paused"
    assert "must be a number of days" in refused(fleet, 2, "sessions", "cleanup",
                                                 "--max-age-days", "-1")


def test_run_auto_resume(fleet_factory, tmp_path: Path, ollama: FakeOllama) -> None:
    fleet: Fleet = fleet_factory()  # no workers: `durable run` runs the steps itself
    spec = spec_file(tmp_path, CHAIN, HOST=ollama.url, WRITER="ollama")
    first = fleet.cli("run", spec, check=False)
    assert first.returncode == 1 and 'model "llama3" not found' in first.stderr
    (failed,) = fleet.cli_json("sessions", "list")

    ollama.pull("llama3")
    again = fleet.cli("run", spec, "--auto-resume")
    assert f"resuming session {failed['session_id']}" in again.stdout
    assert again.stdout.count("(committed before)") == 2  # step:0 and step:1 not re-run
    assert "completed in" in again.stdout and "ollama: write up tides" in again.stdout
    (only,) = fleet.cli_json("sessions", "list")
    assert (only["session_id"], only["status"]) == (failed["session_id"], "completed")
    fresh = fleet.cli("run", spec, "--auto-resume")  # nothing failed or paused now
    assert "no failed or paused session of this spec" in fresh.stderr
    assert len(fleet.cli_json("sessions", "list")) == 2

    # The embedded default store keeps nothing between runs: said, then a new session.
    env = {k: v for k, v in fleet.env.items() if k != "DURABLE_REDIS_URL"}
    embedded = subprocess.run([*durable_bin(), "run", spec_file(tmp_path, CHAIN, "s.yaml"),
                               "--auto-resume"], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=120)
    assert embedded.returncode == 0, embedded.stderr
    assert "the embedded store keeps nothing between runs" in embedded.stderr
    assert "set DURABLE_REDIS_URL to resume across runs" in embedded.stderr
    assert len(fleet.cli_json("sessions", "list")) == 2  # nothing reached the real Redis


def test_watch_rows_follow_the_events() -> None:
    """The view `durable watch` draws: committed steps in commit order, then the rest
    with their latest state."""
    from strands_durable.api.watch import step_rows
    from strands_durable.models import StepResult

    events = [("1-0", {"type": "step_scheduled", "step": "task:b", "attempt": "1"}),
              ("2-0", {"type": "step_scheduled", "step": "task:a", "attempt": "1"}),
              ("3-0", {"type": "step_started", "step": "task:b", "attempt": "1",
                       "worker": "w1"}),
              ("4-0", {"type": "step_failed", "step": "task:b", "attempt": "1",
                       "detail": "boom"}),
              ("5-0", {"type": "step_retried", "step": "task:b", "attempt": "2"}),
              ("6-0", {"type": "session_paused", "step": "", "attempt": "0"})]
    results = [StepResult(key="task:a", agent="x", response="r", input_tokens=2,
                          output_tokens=3, worker="w2", duration_ms=1500)]
    rows = step_rows(events, results)
    assert [(r.step, r.state, r.attempt, r.worker, r.tokens, r.detail) for r in rows] == [
        ("task:a", "done", 1, "w2", 5, ""), ("task:b", "retry scheduled", 2, "w1", None,
                                             "boom")]
