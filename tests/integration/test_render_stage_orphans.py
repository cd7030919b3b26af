"""The render stage's processes end with the API's process (api/render_stage.py).

Killed -9 (or by the OOM killer), an API used to leave its render processes waiting on
their call queue for ever, and the resource tracker waiting on them: the suite found
~54 of them, 55 MB each, after one run. A real process owns a real stage here and is
killed -9; every process it started must end by itself.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

OWNER = """
import sys, time
from strands_durable.api.render_stage import RenderStage
stage = RenderStage(2, 0)
stage.start()
while len(stage.pids()) < 2:
    time.sleep(0.05)
print(" ".join(map(str, stage.pids())), flush=True)
sys.stdin.read()
"""


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


def running(pid: int) -> bool:
    """Alive and not a zombie waiting for whoever adopted it to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_until_ended(pids: list[int], within_s: float) -> list[int]:
    deadline = time.monotonic() + within_s
    alive = [p for p in pids if running(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if running(p)]
    return alive


def test_render_processes_and_their_tracker_end_when_the_api_is_killed() -> None:
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        stage_pids = [int(p) for p in owner.stdout.readline().split()]
        assert len(stage_pids) == 2, "the stage's processes did not start"
        started = children_of(owner.pid)
        assert set(stage_pids) <= set(started)
        assert all(running(p) for p in started)
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(timeout=30)
        # Condition, not time: a healthy child ends at once (a pidfd is told); the bound
        # only keeps a broken one from hanging the suite.
        left = wait_until_ended(started, within_s=60)
        assert left == [], f"still running after the API was killed: {left}"
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
