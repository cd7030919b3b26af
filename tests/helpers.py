"""Shared test helpers: a private redis-server, free ports, waiting for conditions."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RedisServer:
    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


def start_redis(extra: list[str] | None = None, workdir: Path | None = None) -> RedisServer:
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed (apt-get install -y redis-server)")
    port = free_port()
    cmd = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
           "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"]
    # Its own directory always: nothing it might write (a replica's sync) lands in the repo.
    cmd += ["--dir", str(workdir or tempfile.mkdtemp(prefix="durable-redis-"))]
    process = subprocess.Popen(cmd + (extra or []), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    server = RedisServer(port, process)
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


def random_prefix() -> str:
    return f"t{secrets.token_hex(4)}"


async def poll_until(check: Callable[[], Awaitable[T]], timeout_s: float,
                     interval_s: float = 0.02) -> T | None:
    """Poll `check` until it returns something truthy; None once `timeout_s` passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() >= deadline:
            return None
        await asyncio.sleep(interval_s)


async def wait_for(check: Callable[[], Awaitable[T]], timeout_s: float = 30.0,
                   interval_s: float = 0.02, what: str = "condition") -> T:
    """Poll `check` until it returns something truthy, or fail naming `what`."""
    value = await poll_until(check, timeout_s, interval_s)
    if not value:
        raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
    return value


def wait_for_sync(check: Callable[[], T], timeout_s: float = 30.0, interval_s: float = 0.05,
                  what: str = "condition") -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(interval_s)
