"""Real processes for end-to-end tests: `arq worker` workers and the `durable` CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers import REPO, StepBreakpoints

# The interpreter running the tests runs the code under test: never a `durable` or `arq`
# found on PATH (another virtualenv's, or the system's).


def durable_bin() -> list[str]:
    return [sys.executable, "-m", "strands_durable.api.cli"]


def arq_bin() -> list[str]:
    return [sys.executable, "-m", "arq"]


@dataclass
class Fleet:
    env: dict[str, str]
    logdir: Path
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    started: int = 0

    @classmethod
    def create(cls, redis_url: str, prefix: str, logdir: Path, **settings: Any) -> Fleet:
        env = {**os.environ, "DURABLE_REDIS_URL": redis_url, "DURABLE_KEY_PREFIX": prefix,
               "PYTHONUNBUFFERED": "1", "DURABLE_LOG_LEVEL": "INFO",
               # Many workers on one host: no /metrics unless a test asks for a port.
               "DURABLE_METRICS_PORT": "0",
               "DURABLE_BREAKPOINT_DIR": str(logdir / "breakpoints")}
        env.update({f"DURABLE_{k.upper()}": str(v) for k, v in settings.items()})
        return cls(env=env, logdir=logdir)

    @property
    def breakpoints(self) -> StepBreakpoints:
        return StepBreakpoints(Path(self.env["DURABLE_BREAKPOINT_DIR"]))

    def start_worker(self) -> subprocess.Popen[bytes]:
        self.started += 1
        log = (self.logdir / f"worker-{self.started}.log").open("wb")
        proc = subprocess.Popen([*arq_bin(), "strands_durable.worker.WorkerSettings"], cwd=REPO,
                                env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.workers.append(proc)
        return proc

    def kill(self, proc: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
        if proc.poll() is None:
            os.kill(proc.pid, sig)
        proc.wait(timeout=60)

    def stop_all(self) -> None:
        for proc in self.workers:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)

    def cli(self, *args: str, check: bool = True, timeout: float = 120,
            ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([*durable_bin(), *args], cwd=REPO, env=self.env,
                                capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"durable {' '.join(args)} exited {result.returncode}:\n"
                                 f"{result.stdout}\n{result.stderr}")
        return result

    def cli_json(self, *args: str) -> Any:
        return json.loads(self.cli(*args, "--json").stdout)

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.logdir.glob("*.log")))
