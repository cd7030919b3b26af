"""`durable schedules ...` as a user runs it, against a real redis-server: the spec kept
as submitted (an edit of the file changes nothing until `update`), hostile options
refused with exit 2 naming the option, and a real `durable scheduler` with a real worker
running a scheduled session to its end."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import REPO, wait_for_sync
from helpers.fleet import Fleet, durable_bin

pytestmark = pytest.mark.integration

SPEC = """
version: 0
name: {name}
runtime: {{provider: scripted}}
inputs:
  required: {{topic: string}}
agents:
  a: {{prompt: "You are a."}}
pattern:
  type: chain
  config:
    steps:
      - {{agent: a, input: "about {{{{ topic }}}}"}}
"""


@pytest.fixture
def fleet(fleet_factory: Callable[..., Fleet]) -> Fleet:
    return fleet_factory()


def spec_file(tmp_path: Path, name: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.format(name=name))
    return path


def test_the_spec_is_kept_as_submitted_until_update(fleet: Fleet, tmp_path: Path) -> None:
    spec = spec_file(tmp_path, "first")
    made = fleet.cli_json("schedules", "create", "hourly", str(spec), "--cron", "0 * * * *",
                          "--var", "topic=tides", "--timezone", "Europe/Paris",
                          "--overlap", "buffer_one", "--jitter", "30")
    assert made["workflow_name"] == "first" and made["overlap"] == "buffer_one"
    assert made["timezone"] == "Europe/Paris" and len(made["next_fire_ms"]) == 5
    assert "spec_json" not in made
    spec.write_text(SPEC.format(name="edited"))
    sid = fleet.cli("schedules", "trigger", "hourly").stdout.strip()
    assert fleet.cli_json("status", sid)["workflow_name"] == "first"
    fleet.cli("schedules", "update", "hourly", str(spec), "--var", "topic=moons")
    run = fleet.cli_json("schedules", "trigger", "hourly")
    status = fleet.cli_json("status", run["session_id"])
    assert status["workflow_name"] == "edited" and status["variables"]["topic"] == "moons"
    fleet.cli("schedules", "update", "hourly", "--var", "topic=stars", "--cron", "@daily",
              "--webhook", "https://hooks.example.com/x")
    shown = fleet.cli_json("schedules", "show", "hourly")
    assert shown["variables"]["topic"] == "stars" and shown["cron"] == "@daily"
    assert shown["webhook_url"] == "https://hooks.example.com/x"
    assert "webhook https://hooks.example.com/x" in fleet.cli("schedules", "show",
                                                               "hourly").stdout
    fleet.cli("schedules", "update", "hourly", "--webhook", "")
    assert fleet.cli_json("schedules", "show", "hourly")["webhook_url"] is None
    assert [r["trigger"] for r in shown["recent_runs"]] == ["manual", "manual"]
    assert fleet.cli_json("schedules", "pause", "hourly")["paused"] is True
    listed = fleet.cli_json("schedules", "list")
    assert [(s["name"], s["paused"]) for s in listed] == [("hourly", True)]
    assert "hourly" in fleet.cli("schedules", "list").stdout
    assert fleet.cli_json("schedules", "resume", "hourly")["paused"] is False
    assert fleet.cli_json("schedules", "delete", "hourly") == {"name": "hourly",
                                                               "deleted": True}
    gone = fleet.cli("schedules", "show", "hourly", check=False)
    assert gone.returncode == 1 and "no schedule named 'hourly'" in gone.stderr


@pytest.mark.parametrize(("args", "named"), [
    (["create", "x", "SPEC", "--cron", "99 * * * *"], "--cron"),
    (["create", "x", "SPEC", "--cron", "0 0 30 2 *"], "never matches"),
    (["create", "x", "SPEC"], "--cron is required"),
    (["create", "x", "SPEC", "--cron", "@daily", "--timezone", "Mars/Base"], "--timezone"),
    (["create", "x", "SPEC", "--cron", "@daily", "--overlap", "often"], "--overlap"),
    (["create", "x", "SPEC", "--cron", "@daily", "--jitter", "-5"], "--jitter"),
    (["create", "x", "SPEC", "--cron", "@daily", "--catchup-window", "0"],
     "--catchup-window"),
    (["create", "bad name", "SPEC", "--cron", "@daily"], "schedule name"),
    (["create", "x" * 65, "SPEC", "--cron", "@daily"], "schedule name"),
    (["create", "x", "SPEC", "--cron", "@daily", "--var", "nope"], "KEY=VALUE"),
    (["show", "a:b"], "schedule name"),
    (["create", "x", "SPEC", "--cron", "@daily", "--webhook", "http://127.0.0.1:9/x"],
     "webhook"),
    (["create", "x", "SPEC", "--cron", "@daily", "--webhook", "ftp://example.com/x"],
     "webhook"),
])
def test_hostile_options_exit_2_naming_what_is_wrong(fleet: Fleet, tmp_path: Path,
                                                      args: list[str], named: str) -> None:
    spec = str(spec_file(tmp_path, "x"))
    argv = [spec if a == "SPEC" else a for a in ["schedules", *args]]
    plain = fleet.cli(*argv, check=False)
    assert plain.returncode == 2, plain
    assert named in plain.stderr and "Traceback" not in plain.stderr + plain.stdout
    as_json = fleet.cli(*argv, "--json", check=False)
    assert as_json.returncode == 2
    assert json.loads(as_json.stdout)["error"]["code"] in (
        "invalid_input", "invalid_schedule", "invalid_id", "invalid_spec", "invalid_webhook")


def test_a_scheduler_and_a_worker_run_a_scheduled_session_to_its_end(
        fleet: Fleet, tmp_path: Path) -> None:
    fleet.start_worker()
    log = (tmp_path / "scheduler.log").open("wb")
    scheduler = subprocess.Popen([*durable_bin(), "scheduler", "--metrics-port", "0"],
                                 cwd=REPO, env=fleet.env, stdout=log,
                                 stderr=subprocess.STDOUT)
    fleet.workers.append(scheduler)  # killed with the fleet
    fleet.cli("schedules", "create", "often", str(spec_file(tmp_path, "often")),
              "--cron", "* * * * * */2", "--var", "topic=tides")

    def completed() -> str | None:
        runs = fleet.cli_json("schedules", "show", "often")["recent_runs"]
        for run in runs:
            if run["outcome"] == "started":
                status = fleet.cli_json("status", run["session_id"])["status"]
                if status == "completed":
                    return str(run["session_id"])
        return None

    wait_for_sync(completed, timeout_s=90, interval_s=0.5, what="a scheduled session done")
    fleet.cli("schedules", "pause", "often")
