"""A keyspace set up with one DURABLE_SHARDS refuses every role started with another:
the worker, the scheduler, the API and the CLI each exit 2 with one line naming
DURABLE_SHARDS and the count to set back (no traceback, no session stranded)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from helpers import REPO, free_port
from helpers.fleet import arq_bin, durable_bin
from redis_cluster import LocalCluster

from strands_durable.store.keys import Keys

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("role", ["worker", "scheduler", "api", "submit"])
def test_every_role_refuses_another_shard_count(cluster: LocalCluster, prefix: str,
                                                tmp_path: Path, role: str) -> None:
    with cluster.client() as rc:
        rc.hset(Keys(prefix).config(), "shards", "6")
    env = {**os.environ, "DURABLE_REDIS_URL": cluster.url, "DURABLE_KEY_PREFIX": prefix,
           "DURABLE_SHARDS": "12", "DURABLE_METRICS_PORT": "0"}
    spec = tmp_path / "s.yaml"
    spec.write_text("version: 0\nname: s\nruntime: {provider: scripted}\n"
                    "agents: {a: {prompt: p}}\npattern: {type: chain, config: {steps: "
                    "[{agent: a, input: x}]}}\n")
    command = {
        "worker": [*arq_bin(), "strands_durable.worker.WorkerSettings"],
        "scheduler": [*durable_bin(), "scheduler"],
        "api": [*durable_bin(), "api", "--port", str(free_port())],
        "submit": [*durable_bin(), "submit", str(spec)],
    }[role]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "DURABLE_SHARDS=12" in output and "DURABLE_SHARDS=6" in output, output
    assert "Traceback" not in output, output
    with cluster.client() as rc:
        assert rc.hget(Keys(prefix).config(), "shards") == "6"  # nothing rewritten
