"""Start the HTTP test server (`http_server.py`) on a port of 127.0.0.1, wait until it
accepts connections, and kill it by pid."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from bench.redis_server import free_port

HERE = Path(__file__).resolve().parent
STDIO_SERVER = HERE / "stdio_server.py"
HTTP_SERVER = HERE / "http_server.py"


def start_http_server(port: int | None = None, *, counter_file: Path | None = None,
                      log: Path | None = None, timeout_s: float = 30.0
                      ) -> tuple[str, subprocess.Popen[bytes]]:
    """The server's URL and process, once it accepts connections (fails if it exits
    or does not listen within `timeout_s`)."""
    port = port or free_port()
    argv = [sys.executable, str(HTTP_SERVER), "--port", str(port)]
    if counter_file is not None:
        argv += ["--counter-file", str(counter_file)]
    out = log.open("ab") if log is not None else subprocess.DEVNULL
    process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_listening(port, process, timeout_s)
    except BaseException:
        kill(process)
        raise
    return f"http://127.0.0.1:{port}/mcp", process


def _wait_listening(port: int, process: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the MCP HTTP server exited with {process.returncode} "
                               f"before listening on port {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.monotonic() >= deadline:
                raise AssertionError(f"the MCP HTTP server did not listen on port {port} "
                                     f"within {timeout_s}s") from None
        time.sleep(0.05)


def kill(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL by pid and reap (no-op once it exited)."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
