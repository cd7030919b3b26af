"""A private, throw-away redis-server (never the shared :6379), for benchmark runs and
for the tests (tests/helpers/ re-exports it: `bench` is an installed package)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# Ports are handed out below the kernel's ephemeral range (32768-60999 on Linux), so no
# outgoing connection's local port can take one between the check and the server's bind,
# and each pytest-xdist worker (PYTEST_XDIST_WORKER=gw<N>) has its own block of them, so
# two workers of one run never hand out the same port. A cluster node's bus port (port +
# 10000) falls in 20000-29999, also below the ephemeral range and above every block.
PORTS_FIRST = 10_000
PORTS_PER_WORKER = 400
WORKER_BLOCKS = 25  # 10000-19999
_handed_out: set[int] = set()


def _worker_block() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else None
    if index is None:  # one process (no xdist), or a benchmark: a block of its own by pid
        index = os.getpid()
    first = PORTS_FIRST + (index % WORKER_BLOCKS) * PORTS_PER_WORKER
    return range(first, first + PORTS_PER_WORKER)


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(bus: bool = False) -> int:
    """A port of this process's block that nothing listens on and that this process never
    handed out before (with `bus`, port + 10000 is free too: a cluster node's bus). Another
    suite on the same machine may still take it first: start_redis retries on another."""
    block = _worker_block()
    for _ in range(4 * len(block)):
        port = random.choice(block)
        if port in _handed_out or not _bindable(port) or (bus and not _bindable(port + 10000)):
            continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port left in {block.start}-{block.stop - 1}")


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
                port: int | None = None, launcher: Sequence[str] = ()) -> PrivateRedis:
    """A redis-server on a free port (or `port`: a restart of one killed), answering PING;
    RuntimeError if it cannot start. A free port that another process took before the
    server could bind it (a server that exits at once) is retried on another port.
    `launcher`: a command the server runs under (valgrind), given minutes to answer."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed (apt-get install -y redis-server)")
    for _ in range(1 if port else 5):
        server = _start(binary, port or free_port(), extra or [], workdir, launcher)
        if server is not None:
            return server
    raise RuntimeError(f"redis-server did not start (last port tried: {port})")


def _start(binary: str, port: int, extra: list[str], workdir: Path | None,
           launcher: Sequence[str] = ()) -> PrivateRedis | None:
    """The server on `port` once it answers as itself (its pid), or None if it exited."""
    cmd = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
           "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"]
    # Its own directory always: nothing it might write (a replica's sync) lands in the repo.
    cmd += ["--dir", str(workdir or tempfile.mkdtemp(prefix="durable-redis-"))]
    process = subprocess.Popen([*launcher, *cmd, *extra], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    server = PrivateRedis(port, process)
    deadline = time.monotonic() + (300 if launcher else 30)
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return None  # the port was taken: the caller tries another
        if _answers_as(port, process.pid):
            return server
        time.sleep(0.02)
    server.stop()
    raise RuntimeError(f"redis-server did not answer on port {port} within 30 s")


def _answers_as(port: int, pid: int) -> bool:
    """Whether the server on `port` answers INFO as process `pid` (not another one that
    holds the port)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
            conn.sendall(b"INFO server\r\n")
            reply = b""
            while b"\r\nprocess_id:" not in reply or not reply.endswith(b"\r\n"):
                chunk = conn.recv(4096)
                if not chunk or reply.startswith(b"-"):
                    break
                reply += chunk
    except OSError:
        return False
    return f"\r\nprocess_id:{pid}\r\n".encode() in reply
