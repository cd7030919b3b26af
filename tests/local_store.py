"""A private local store for a test: its own DURABLE_HOME, real `durable` subprocesses
run against it (no DURABLE_REDIS_URL), and every process it started (the redis-server,
its reaper) killed by pid afterwards."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers import REPO, wait_for_sync

from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.local_server import (
    local_processes,
    local_url,
    pid_alive,
    socket_path,
)
from strands_durable.store.store import Store

DURABLE = [sys.executable, "-m", "strands_durable.api.cli"]
RUN_TIMEOUT_S = 120


@dataclass
class LocalHome:
    home: Path

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k not in ("DURABLE_REDIS_URL", "DURABLE_EPHEMERAL", "DURABLE_CRASH_AT",
                            "DURABLE_BREAKPOINT_DIR")}
        env.update(DURABLE_HOME=str(self.home), **extra)
        return env

    def durable(self, *args: str | Path, check_rc: int | None = None,
                **env: str) -> subprocess.CompletedProcess[str]:
        """`durable ARGS` run to its end against this home."""
        result = subprocess.run([*DURABLE, *map(str, args)], cwd=REPO, env=self.env(**env),
                                capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        if check_rc is not None:
            assert result.returncode == check_rc, (result.returncode, result.stdout,
                                                   result.stderr)
        return result

    def start(self, *args: str | Path, **env: str) -> subprocess.Popen[str]:
        return subprocess.Popen([*DURABLE, *map(str, args)], cwd=REPO, env=self.env(**env),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def sessions(self) -> list[dict[str, Any]]:
        listed = self.durable("sessions", "list", "--json", check_rc=0)
        return list(json.loads(listed.stdout))

    def settings(self) -> DurableSettings:
        return DurableSettings(redis_url=local_url(self.home), home=str(self.home))

    def store(self) -> Store:
        return open_store(self.settings())

    def server_pid(self) -> int:
        return int((self.home / "redis.pid").read_text())

    def stop(self) -> None:
        """Kill the server and its reaper (by pid) and wait until they are gone."""
        for pid in local_processes(self.home):
            os.kill(pid, signal.SIGKILL)
        for pid in local_processes(self.home):
            wait_for_sync(lambda: gone(pid), timeout_s=10,  # noqa: B023 - used at once
                          what=f"process {pid} to exit")
        socket_path(self.home).unlink(missing_ok=True)


def gone(pid: int) -> bool:
    return not pid_alive(pid) or zombie(pid)


def zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except (OSError, IndexError):
        return True


def private_home(tmp_path: Path) -> Iterator[LocalHome]:
    """The body of a test's `local_home` fixture: a home in `tmp_path`, stopped after."""
    home = LocalHome(tmp_path / "home")
    try:
        yield home
    finally:
        home.stop()
