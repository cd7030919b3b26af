"""Every role on a 3+3 Redis Cluster with DURABLE_SHARDS=12: real `arq worker`
processes, `durable scheduler`, `durable api` (real HTTP) and the CLI. Sessions
submitted through the CLI and over HTTP all complete, each step committed once, their
keys on the primary of their shard's slot, and the API lists them all."""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers import REPO, wait_for_sync
from helpers.api import api_process
from helpers.fleet import Fleet, durable_bin
from redis_cluster import LocalCluster

from strands_durable.store.keys import Keys

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

SHARDS = 12
STEPS = 3
CLI_SESSIONS = 4
HTTP_SESSIONS = 12
SPEC = """
version: 0
name: cluster-chain
runtime:
  provider: scripted
agents:
  a: {prompt: "You are step agent a."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "step 0 on {{ topic }}"}
      - {agent: a, input: "step 1 after {{ last_response | truncate(40) }}"}
      - {agent: a, input: "step 2 after {{ last_response | truncate(40) }}"}
"""


@pytest.fixture
def roles(cluster: LocalCluster, prefix: str, tmp_path: Path
          ) -> Iterator[tuple[Fleet, str, subprocess.Popen[bytes]]]:
    """Two workers, a scheduler and the API, all on the cluster; killed afterwards."""
    fleet = Fleet.create(cluster.url, prefix, tmp_path, shards=SHARDS)
    scheduler = None
    try:
        fleet.start_worker()
        fleet.start_worker()
        with (tmp_path / "scheduler.log").open("wb") as log:
            scheduler = subprocess.Popen([*durable_bin(), "scheduler"], cwd=REPO,
                                         env=fleet.env, stdout=log, stderr=subprocess.STDOUT)
        with api_process(fleet.env, tmp_path / "api.log") as url:
            yield fleet, url, scheduler
    finally:
        if scheduler is not None and scheduler.poll() is None:
            scheduler.kill()
            scheduler.wait(timeout=30)
        fleet.stop_all()


def completed_steps(http: httpx.Client, sid: str) -> list[str]:
    events = http.get(f"/v1/sessions/{sid}/events", params={"limit": 1000}).json()["items"]
    return [e["step"] for e in events if e["type"] == "step_completed"]


def all_completed(http: httpx.Client, sids: list[str]) -> bool:
    page = http.get("/v1/sessions", params={"limit": 100}).json()["items"]
    done = {item["session_id"] for item in page if item["status"] == "completed"}
    return set(sids) <= done


def test_every_role_runs_sessions_across_the_primaries(
        cluster: LocalCluster, roles: tuple[Fleet, str, subprocess.Popen[bytes]],
        tmp_path: Path, prefix: str) -> None:
    fleet, url, scheduler = roles
    spec = tmp_path / "chain.yaml"
    spec.write_text(SPEC)
    sids = [fleet.cli("submit", str(spec), "--var", f"topic=t{i}").stdout.strip()
            for i in range(CLI_SESSIONS)]
    with httpx.Client(base_url=url, timeout=120) as http:
        assert http.get("/healthz").status_code == 200
        for i in range(HTTP_SESSIONS):
            r = http.post("/v1/sessions", json={"spec": SPEC, "variables": {"topic": f"h{i}"}})
            assert r.status_code == 201, r.text
            sids.append(r.json()["session_id"])
        # The CLI's wait, status and history on one of each; the API lists them all.
        for sid in (sids[0], sids[-1]):
            assert fleet.cli("wait", sid, "--timeout", "120").returncode == 0, fleet.logs()
            assert fleet.cli_json("status", sid)["status"] == "completed"
            assert [e["type"] for e in fleet.cli_json("history", sid)].count(
                "step_completed") == STEPS
        wait_for_sync(lambda: all_completed(http, sids), timeout_s=120,
                      what="every session to complete")
        for sid in sids:
            detail = http.get(f"/v1/sessions/{sid}").json()
            assert [h["index"] for h in detail["pattern_state"]["step_history"]] == [0, 1, 2]
            counts = Counter(completed_steps(http, sid))
            assert len(counts) == STEPS and set(counts.values()) == {1}, counts  # once each

    keys = Keys(prefix=prefix, shards=SHARDS)
    primaries = {p.port for p in cluster.primaries()}
    assert {cluster.primary_port_of_key(keys.stream(k)) for k in range(SHARDS)} == primaries
    homes = set()
    for sid in sids:
        home = cluster.primary_port_of_key(keys.stream(keys.shard(sid)))
        with cluster.node(home).client() as direct:  # the session lives on that node
            assert direct.exists(keys.meta(sid)) == 1
        homes.add(home)
    assert len(homes) >= 2  # 16 sessions over 12 shards: one primary alone is ~1e-6

    # Every process is still up, and none met a raw cluster error.
    assert all(p.poll() is None for p in [*fleet.workers, scheduler])
    logs = fleet.logs()
    assert "MOVED" not in logs and "CROSSSLOT" not in logs and "Traceback" not in logs, logs
    assert len(fleet.cli_json("workers")) >= 2
