"""Webhooks with real processes: the outage drill, short (bench/webhook_outage.py runs
the 5-minute one): a `durable scheduler` and an `arq` worker, sessions submitted with
`durable submit --webhook` while the receiver (verifying every signature with the
`standardwebhooks` reference, deduping on webhook-id) is down, then back: every event
processed exactly once. And `durable webhooks list/retry` and `submit --webhook` refusing
what they must (exit 2 naming the problem, exit 1 for an unknown entry), no secret out."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers import RedisServer
from helpers.fleet import Fleet, durable_bin

from bench.webhook_outage import SECRET, Drill, run
from strands_durable.models import now_ms
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.webhooks import WebhookEntry, webhook_id

pytestmark = pytest.mark.e2e

SID = "3b241101-e2bb-4255-8caf-4136c566a962"


def test_an_outage_is_ridden_out_each_event_processed_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(Drill(outage_s=12, sessions=6, backoff_max_s=3, drain_timeout_s=120), tmp_path)
    table = capsys.readouterr().out
    assert code == 0, table
    assert "| all | 6 | 6 |" in table and "every event processed exactly once" in table


async def test_the_cli_lists_and_retries_and_refuses_hostile_input(
        redis_server: RedisServer, prefix: str, tmp_path: Path) -> None:
    fleet = Fleet.create(redis_server.url, prefix, tmp_path, webhook_secret=SECRET)
    spec = tmp_path / "spec.yaml"
    spec.write_text("version: 0\nname: w\nruntime: {provider: scripted}\n"
                    "agents: {a: {prompt: p}}\npattern: {type: chain, config: {steps: "
                    "[{agent: a, input: x}]}}\n")
    refused = fleet.cli("submit", str(spec), "--webhook", "http://10.0.0.7/h", check=False)
    assert refused.returncode == 2 and "DURABLE_WEBHOOK_ALLOW" in refused.stderr
    assert "Traceback" not in refused.stderr
    bad = fleet.cli("submit", str(spec), "--webhook", "ftp://x", "--json", check=False)
    assert bad.returncode == 2 and json.loads(bad.stdout)["error"]["code"] == "invalid_webhook"

    store = open_store(DurableSettings(redis_url=redis_server.url, key_prefix=prefix))
    try:
        await store.prepare()
        entry = WebhookEntry(id=webhook_id(SID, "5-0"), session_id=SID, event="failed",
                             url="https://hooks.example.com/x?token=t", body="{}", event_ms=5,
                             recorded_ms=5, secret=SECRET)
        await store.redis.hset(store.keys.meta(SID), "status", "failed")
        await store.record_webhooks(SID, expected_cursor="", new_cursor="5-0",
                                    seen_member=f"failed:{SID}", seen_score=5.0,
                                    now_ms=now_ms(), entries=[entry])
    finally:
        await store.close()

    listed = fleet.cli("webhooks", "list", "--json")
    assert SECRET not in listed.stdout and "token=t" not in listed.stdout
    [item] = json.loads(listed.stdout)["items"]
    assert item["id"] == entry.id and item["signing"] == "session"
    table = fleet.cli("webhooks", "list")
    assert entry.id[:20] in table.stdout.replace("\n", "") and SECRET not in table.stdout
    assert json.loads(fleet.cli("webhooks", "list", "--status", "dead", "--json").stdout) \
        == {"items": []}
    retried = fleet.cli("webhooks", "retry", entry.id, "--json")
    assert json.loads(retried.stdout)["was"] == "pending" and SECRET not in retried.stdout

    for args, code in [(("webhooks", "retry", "msg_nope"), 2),
                       (("webhooks", "retry", "x" * 5000), 2),
                       (("webhooks", "retry", webhook_id(SID, "9-9")), 1),
                       (("webhooks", "list", "--status", "exploded"), 2),
                       (("webhooks", "list", "--limit", "0"), 2)]:
        done = fleet.cli(*args, check=False)
        assert done.returncode == code, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr and len(done.stderr) < 2000

    bad_secret = "whsec_bm90IGVub3VnaA=="
    for env, named in [({"DURABLE_WEBHOOK_URL": "https://example.com/h",
                         "DURABLE_WEBHOOK_SECRET": bad_secret}, "DURABLE_WEBHOOK_URL"),
                       ({"DURABLE_WEBHOOK_URL": "http://169.254.169.254/"}, "ALLOW"),
                       ({"DURABLE_WEBHOOK_LEASE_S": "5"}, "DURABLE_WEBHOOK_LEASE_S")]:
        refused = subprocess.run([*durable_bin(), "scheduler"], env={**fleet.env, **env},
                                 capture_output=True, text=True, timeout=120)
        assert refused.returncode == 2 and named in refused.stderr, refused.stderr
        assert bad_secret not in refused.stderr + refused.stdout
