"""Webhooks across scheduler failover, short (bench/webhook_outage.py, --receiver-up
--kill-every-s): two real `durable scheduler` replicas, the oldest SIGKILLed on a clock
and a fresh one started, an `arq` worker, sessions submitted with `durable submit
--webhook`, and a receiver that verifies every signature with the `standardwebhooks`
reference and dedupes on webhook-id: every event processed exactly once, the outbox
empty of pending, in-flight and dead entries at the end."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.webhook_outage import Drill, run

pytestmark = pytest.mark.chaos


def test_leader_kills_lose_and_double_no_event(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code = run(Drill(outage_s=30, sessions=8, backoff_max_s=4, drain_timeout_s=120,
                     kill_every_s=4, replicas=2, down=False), tmp_path)
    table = capsys.readouterr().out
    assert code == 0, table
    assert "| all | 8 | 8 |" in table, table
    # At least one leader was killed ("10 leader kill(s)" holds "0 leader kill(s)" too).
    kills = re.search(r"\b(\d+) leader kill\(s\)", table)
    assert kills is not None and int(kills.group(1)) > 0, table
