"""End to end: real `arq worker` processes, sessions submitted through the CLI.

This module starts every `durable` and `arq` process as a new interpreter, never from
the suite's zygote (tests/helpers/zygote.py): the path an operator's container takes,
imports and all, stays covered end to end."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from helpers import EXAMPLES, wait_for_sync
from helpers.fleet import Fleet

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def new_interpreters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DURABLE_TEST_ZYGOTE", "0")

CHAIN = """
version: 0
name: chain
runtime:
  provider: scripted
agents:
  a: {{prompt: "You are step agent a."}}
pattern:
  type: chain
  config:
    steps:
{steps}
"""


def chain_file(tmp_path: Path, steps: int) -> Path:
    body = "\n".join(f"      - agent: a\n        input: \"step {i} after "
                     f"{{{{ last_response | truncate(40) }}}}\"" for i in range(steps))
    path = tmp_path / "chain.yaml"
    path.write_text(CHAIN.format(steps=body))
    return path


def events(fleet: Fleet, sid: str) -> list[dict[str, object]]:
    return fleet.cli_json("history", sid)


def test_submit_wait_status_history(fleet_factory) -> None:
    fleet: Fleet = fleet_factory()
    fleet.start_worker()
    fleet.start_worker()
    sid = fleet.cli("submit", str(EXAMPLES / "chain-research.yaml"), "--var",
                    "topic=edge computing").stdout.strip()
    assert len(sid) == 36
    assert fleet.cli("wait", sid, "--timeout", "60").returncode == 0
    status = fleet.cli_json("status", sid)
    assert status["status"] == "completed" and status["workflow_name"] == "chain-research"
    assert status["variables"]["topic"] == "edge computing"
    history = status["pattern_state"]["step_history"]
    assert [h["index"] for h in history] == [0, 1, 2]
    usage = status["token_usage"]
    assert usage["total_input_tokens"] > 0
    assert sum(usage["by_agent"].values()) == (usage["total_input_tokens"]
                                               + usage["total_output_tokens"])
    types = [e["type"] for e in events(fleet, sid)]
    assert types[0] == "session_started" and types[-1] == "session_completed"
    assert types.count("step_completed") == 3
    listed = fleet.cli_json("sessions", "list", "--status", "completed")
    assert [s["session_id"] for s in listed] == [sid]


def test_idempotent_submit(fleet_factory) -> None:
    fleet: Fleet = fleet_factory()
    spec = str(EXAMPLES / "chain-research.yaml")
    first = fleet.cli("submit", spec, "--idempotency-key", "order-42").stdout.strip()
    second = fleet.cli("submit", spec, "--idempotency-key", "order-42").stdout.strip()
    assert first == second


def test_unknown_session_is_a_clear_error(fleet_factory) -> None:
    fleet: Fleet = fleet_factory()
    # Well-formed and unknown (a malformed id is a usage error, exit 2).
    nope = "00000000-0000-4000-8000-000000000000"
    for args in (["status", nope], ["wait", nope], ["history", nope],
                 ["sessions", "show", nope], ["sessions", "delete", nope]):
        result = fleet.cli(*args, check=False)
        assert result.returncode == 1, args
        assert f"session '{nope}' not found" in result.stderr
        assert "Traceback" not in result.stderr


def test_killed_worker_mid_step_is_reclaimed(fleet_factory, tmp_path: Path) -> None:
    fleet: Fleet = fleet_factory(claim_idle_ms=1500)
    fleet.breakpoints.set("chain", "step:0")
    victim = fleet.start_worker()
    sid = fleet.cli("submit", str(chain_file(tmp_path, 3))).stdout.strip()
    (hit,) = fleet.breakpoints.wait_sync("chain", "step:0")
    assert (hit.session, hit.pid, hit.reclaimed) == (sid, victim.pid, False)
    fleet.kill(victim)  # mid-step: admitted, its agent call not made
    fleet.breakpoints.clear("chain", "step:0")
    fleet.start_worker()
    assert fleet.cli("wait", sid, "--timeout", "60").returncode == 0
    history = events(fleet, sid)
    completed = [e["step"] for e in history if e["type"] == "step_completed"]
    assert completed == ["step:0", "step:1", "step:2"]
    assert [e["step"] for e in history if e["type"] == "step_reclaimed"] == ["step:0"]


def test_sigterm_lets_the_running_step_commit(fleet_factory, tmp_path: Path) -> None:
    fleet: Fleet = fleet_factory(claim_idle_ms=60000)
    for step in ("step:0", "step:1"):
        fleet.breakpoints.set("chain", step)
    worker = fleet.start_worker()
    sid = fleet.cli("submit", str(chain_file(tmp_path, 2))).stdout.strip()
    fleet.breakpoints.wait_sync("chain", "step:0")
    t0 = time.monotonic()
    os.kill(worker.pid, signal.SIGTERM)
    # Once the worker drains (it reads nothing new), the running step may finish.
    wait_for_sync(lambda: "waiting up to" in fleet.logs(), what="the worker to drain")
    fleet.breakpoints.clear("chain", "step:0")
    assert worker.wait(timeout=60) == 0 and time.monotonic() - t0 < 15
    history = events(fleet, sid)
    # The step running at SIGTERM finished and committed before the worker exited, and
    # the next one waits on the stream for another worker.
    assert [e["step"] for e in history if e["type"] == "step_completed"] == ["step:0"]
    assert fleet.breakpoints.hits("chain", "step:1") == []
    fleet.breakpoints.clear("chain", "step:1")
    fleet.start_worker()
    assert fleet.cli("wait", sid, "--timeout", "60").returncode == 0


def test_dead_letter_after_too_many_deliveries(fleet_factory, tmp_path: Path) -> None:
    fleet: Fleet = fleet_factory(claim_idle_ms=800, max_deliveries=2)
    fleet.breakpoints.set("chain", "step:0")  # never cleared: every worker dies in it
    sid = fleet.cli("submit", str(chain_file(tmp_path, 1))).stdout.strip()
    for delivery in range(1, 3):
        worker = fleet.start_worker()
        fleet.breakpoints.wait_sync("chain", "step:0", n=delivery)
        fleet.kill(worker)
    fleet.start_worker()
    result = fleet.cli("wait", sid, "--timeout", "60", check=False)
    assert result.returncode == 1
    status = fleet.cli_json("status", sid)
    assert status["status"] == "failed"
    assert "step step:0" in status["error"] and "delivered 3 times" in status["error"]
    assert any(e["type"] == "step_dead_lettered" for e in events(fleet, sid))
