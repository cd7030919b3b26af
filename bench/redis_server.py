"""A private, throw-away redis-server (never the shared :6379), for benchmark runs and
for the tests (tests/helpers.py re-exports it: `bench` is an installed package)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port != 6379:
            return port


@dataclass
class PrivateRedis:
    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


def start_redis(extra: list[str] | None = None, workdir: Path | None = None,
                port: int | None = None) -> PrivateRedis:
    """A redis-server on a free port (or `port`: a restart of one killed), answering PING;
    RuntimeError if it cannot start."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed (apt-get install -y redis-server)")
    port = port or free_port()
    cmd = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
           "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"]
    # Its own directory always: nothing it might write (a replica's sync) lands in the repo.
    cmd += ["--dir", str(workdir or tempfile.mkdtemp(prefix="durable-redis-"))]
    process = subprocess.Popen(cmd + (extra or []), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    server = PrivateRedis(port, process)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as conn:
                conn.sendall(b"PING\r\n")
                if conn.recv(16).startswith(b"+PONG"):
                    return server
        except OSError:
            time.sleep(0.02)
    server.stop()
    raise RuntimeError(f"redis-server did not start on port {port}")
