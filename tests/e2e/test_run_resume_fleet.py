"""`durable run` with DURABLE_REDIS_URL (a fleet's Redis): a killed run's session is
`running` with no runner; `--auto-resume` continues that one instead of starting a
second session of the same spec, and a session submitted to the fleet is never taken
from it. Real redis-server, real `durable` processes, real `arq worker`s."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from helpers import EXAMPLES, wait_for_sync
from helpers.fleet import Fleet

from strands_durable.worker.faults import CRASH_EXIT_CODE

CHAIN = str(EXAMPLES / "chain-research.yaml")


def test_auto_resume_continues_a_killed_runs_session(
        fleet_factory: Callable[..., Fleet]) -> None:
    fleet = fleet_factory()  # no workers: nobody else would finish it
    fleet.env["DURABLE_CRASH_AT"] = "after_commit:1"
    crashed = fleet.cli("run", CHAIN, check=False)
    del fleet.env["DURABLE_CRASH_AT"]
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    (orphan,) = fleet.cli_json("sessions", "list")
    assert orphan["status"] == "running"

    again = fleet.cli("run", CHAIN, "--auto-resume")
    assert f"resuming session {orphan['session_id']}" in again.stdout
    assert again.stdout.count("(committed before)") == 1
    (only,) = fleet.cli_json("sessions", "list")
    assert (only["session_id"], only["status"]) == (orphan["session_id"], "completed")
    history = fleet.cli_json("history", orphan["session_id"])
    assert Counter(e["step"] for e in history if e["type"] == "step_completed") == {
        "step:0": 1, "step:1": 1, "step:2": 1}


def test_a_submitted_running_session_is_the_fleets(
        fleet_factory: Callable[..., Fleet]) -> None:
    """A session of the same spec submitted to the fleet, running (its steps queued, no
    worker yet), is not resumable: --auto-resume starts its own."""
    fleet = fleet_factory()
    submitted = fleet.cli("submit", CHAIN).stdout.strip()
    run = fleet.cli("run", CHAIN, "--auto-resume")
    assert "no failed or paused session of this spec" in run.stderr
    assert f"resuming session {submitted}" not in run.stdout
    statuses = {s["session_id"]: s["status"] for s in fleet.cli_json("sessions", "list")}
    assert len(statuses) == 2 and statuses[submitted] == "running"
    fleet.start_worker()
    wait_for_sync(lambda: fleet.cli_json("status", submitted)["status"] == "completed",
                  timeout_s=60, what="the fleet to finish its session")
