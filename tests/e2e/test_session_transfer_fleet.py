"""Sessions that move between real deployments with the real CLI: `durable export` from
one fleet of `arq worker` processes in the middle of a step, `durable import` into
another whose workers finish it (the same results as an uninterrupted run there), and a
session moved from `durable run`'s local store to a fleet and back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import EXAMPLES, RedisServer, random_prefix
from helpers.fleet import Fleet
from local_store import LocalHome, private_home

CHAIN = str(EXAMPLES / "chain-research.yaml")
TOPIC = "topic=tidal power"


@pytest.fixture
def two_fleets(redis_server: RedisServer, tmp_path: Path) -> Iterator[tuple[Fleet, Fleet]]:
    fleets = [Fleet.create(redis_server.url, random_prefix(), tmp_path / name)
              for name in ("source", "target")]
    for fleet in fleets:
        fleet.logdir.mkdir(parents=True, exist_ok=True)
    try:
        yield fleets[0], fleets[1]
    finally:
        for fleet in fleets:
            for bp in fleet.breakpoints.directory.glob("*"):
                bp.unlink()
            fleet.stop_all()


@pytest.fixture
def local_home(tmp_path: Path) -> Iterator[LocalHome]:
    yield from private_home(tmp_path)


def finished(fleet: Fleet, sid: str) -> dict[str, Any]:
    assert fleet.cli("wait", sid, "--timeout", "120").returncode == 0, fleet.logs()
    doc: dict[str, Any] = fleet.cli_json("status", sid)
    return doc


def test_a_session_exported_mid_step_finishes_on_the_other_fleet(
        two_fleets: tuple[Fleet, Fleet], tmp_path: Path) -> None:
    source, target = two_fleets
    source.start_worker()
    target.start_worker()
    source.breakpoints.set("chain-research", "step:1")
    sid = source.cli("submit", CHAIN, "--var", TOPIC).stdout.strip()
    source.breakpoints.wait_sync("chain-research", "step:1", timeout_s=120)

    document = tmp_path / "session.json"
    document.write_text(source.cli("export", sid).stdout)
    exported = json.loads(document.read_text())
    assert exported["meta"]["status"] == "running" and list(exported["results"]) == ["step:0"]
    imported = target.cli("import", str(document))
    assert imported.stdout.strip() == f"imported session {sid} (running, 1 step(s) queued again)"

    reference = target.cli("submit", CHAIN, "--var", TOPIC).stdout.strip()
    moved, uninterrupted = finished(target, sid), finished(target, reference)
    assert moved["status"] == uninterrupted["status"] == "completed"
    assert moved["pattern_state"] == uninterrupted["pattern_state"]
    assert moved["steps_committed"] == 3
    events = target.cli_json("history", sid)
    assert [e["step"] for e in events if e["type"] == "step_completed"] == \
        ["step:0", "step:1", "step:2"]  # step:0 committed once, on the source


def test_a_session_moves_from_the_local_store_to_a_fleet_and_back(
        two_fleets: tuple[Fleet, Fleet], local_home: LocalHome, tmp_path: Path) -> None:
    _, fleet = two_fleets
    local_home.durable("run", CHAIN, "--var", TOPIC, check_rc=0)
    [session] = local_home.sessions()
    sid = session["session_id"]
    local = tmp_path / "local.json"
    local.write_text(local_home.durable("export", sid, check_rc=0).stdout)

    assert fleet.cli("import", str(local)).returncode == 0
    there = fleet.cli_json("status", sid)
    assert there["status"] == "completed"
    back = tmp_path / "back.json"
    back.write_text(fleet.cli("export", sid).stdout)
    refused = local_home.durable("import", back, check_rc=2)
    assert "exists already" in refused.stderr
    copy = local_home.durable("import", back, "--new-id", "--json", check_rc=0)
    new = json.loads(copy.stdout)["session_id"]
    mine = json.loads(local_home.durable("status", new, "--json", check_rc=0).stdout)
    original = json.loads(local_home.durable("status", sid, "--json", check_rc=0).stdout)
    assert mine["pattern_state"] == there["pattern_state"] == original["pattern_state"]


def test_a_running_session_imported_into_the_local_store_runs_there(
        two_fleets: tuple[Fleet, Fleet], local_home: LocalHome, tmp_path: Path) -> None:
    source, _ = two_fleets  # no worker: the session waits at its first step
    sid = source.cli("submit", CHAIN, "--var", TOPIC).stdout.strip()
    document = tmp_path / "running.json"
    document.write_text(source.cli("export", sid).stdout)
    imported = local_home.durable("import", document, check_rc=0)
    assert imported.stderr.strip() == f"run it here: durable run --resume {sid}"
    local_home.durable("run", "--resume", sid, check_rc=0)
    done = json.loads(local_home.durable("status", sid, "--json", check_rc=0).stdout)
    assert done["status"] == "completed" and done["steps_committed"] == 3
