"""Worker processes: real `arq strands_durable.worker.WorkerSettings` (ours) and
`arq bench.arq_noop...`."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def arq_bin() -> list[str]:
    found = shutil.which("arq")
    return [found] if found else [sys.executable, "-m", "arq"]


def clean_env(**extra: str) -> dict[str, str]:
    """The caller's environment without DURABLE_*/BENCH_* (nothing leaks into a run)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DURABLE_", "BENCH_"))}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


@dataclass
class Procs:
    logdir: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def start(self, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        path = self.logdir / f"{name}-{len(self.procs) + 1}.log"
        self.logs.append(path)
        with path.open("wb") as log:
            proc = subprocess.Popen([*arq_bin(), *args], cwd=REPO, env=env, stdout=log,
                                    stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def dead(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.procs if p.poll() is not None]

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM (arq shuts the consumer down gracefully), then SIGKILL stragglers."""
        for proc in self.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)

    def tail(self, lines: int = 20) -> str:
        out = []
        for path in self.logs:
            text = path.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(out)
