"""Shared test helpers: a private redis-server, free ports, waiting for conditions."""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

# One private redis-server implementation for tests and benchmarks.
from bench.redis_server import PrivateRedis as RedisServer  # noqa: F401
from bench.redis_server import free_port, start_redis  # noqa: F401
from strands_durable.models import StepJob
from strands_durable.sessions.status import session_status
from strands_durable.settings import DurableSettings
from strands_durable.store.keys import CONSUMER_GROUP
from strands_durable.store.store import Store
from strands_durable.worker.faults import HITS_SUFFIX, breakpoint_name

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
T = TypeVar("T")


def random_prefix() -> str:
    return f"t{secrets.token_hex(4)}"


def quick_settings(redis_url: str, prefix: str, tmp_path: Path, **updates: Any
                   ) -> DurableSettings:
    """The suite's settings: quick claims, reads, timers and heartbeats, breakpoints under
    `tmp_path` (what the `settings` fixture hands out, on any Redis)."""
    fields: dict[str, Any] = {
        "redis_url": redis_url, "key_prefix": prefix, "claim_idle_ms": 1000,
        "read_block_ms": 100, "timer_poll_ms": 50, "heartbeat_s": 0.5,
        "breakpoint_dir": str(tmp_path / "breakpoints")}
    return DurableSettings(**{**fields, **updates})


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


@dataclass(frozen=True)
class Hit:
    """A step that stopped at a breakpoint: where, and which worker process holds it."""

    session: str
    step: str
    entry: str
    worker: str
    pid: int
    reclaimed: bool


class StepBreakpoints:
    """The breakpoints of workers whose DURABLE_BREAKPOINT_DIR is `directory`
    (worker/faults.py): set one on a step, wait until the step reaches it (a condition,
    where a scripted delay would only hope the step is still running), act, clear it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def set(self, workflow: str, step: str) -> None:
        (self.directory / breakpoint_name(workflow, step)).touch()

    def clear(self, workflow: str, step: str) -> None:
        (self.directory / breakpoint_name(workflow, step)).unlink(missing_ok=True)

    def hits(self, workflow: str, step: str) -> list[Hit]:
        path = self.directory / (breakpoint_name(workflow, step) + HITS_SUFFIX)
        lines = path.read_text().splitlines() if path.exists() else []
        return [Hit(**json.loads(line)) for line in lines]

    def _reached(self, workflow: str, step: str, n: int) -> list[Hit]:
        hits = self.hits(workflow, step)
        return hits if len(hits) >= n else []

    def wait_sync(self, workflow: str, step: str, n: int = 1,
                  timeout_s: float = 60.0) -> list[Hit]:
        """Wait until `step` has reached its breakpoint `n` times; its hits."""
        return wait_for_sync(lambda: self._reached(workflow, step, n), timeout_s=timeout_s,
                             what=f"{workflow} {step} to reach its breakpoint {n} time(s)")

    async def wait(self, workflow: str, step: str, n: int = 1,
                   timeout_s: float = 60.0) -> list[Hit]:
        async def reached() -> list[Hit]:
            return self._reached(workflow, step, n)

        return await wait_for(reached, timeout_s=timeout_s,
                              what=f"{workflow} {step} to reach its breakpoint {n} time(s)")


async def claimed_job(store: Store, sid: str, consumer: str) -> tuple[StepJob, str]:
    """The session's first step, delivered to `consumer` (its lease): what a worker holds
    while it runs the step, for tests of the fenced writes."""
    stream = store.keys.stream(store.keys.shard(sid))
    entries = await store.redis.xreadgroup(CONSUMER_GROUP, consumer, {stream: ">"}, count=1)
    entry_id, fields = entries[0][1][0]
    return StepJob.from_json(fields["job"]), entry_id


async def status_doc(store: Store, session_id: str) -> dict[str, Any]:
    """A session's status document as the API and `durable status --json` send it."""
    return (await session_status(store, session_id)).model_dump(mode="json")


def send_chunked(handler: BaseHTTPRequestHandler, content_type: str,
                 chunks: Iterable[str]) -> None:
    """Answer 200 with `chunks` as an HTTP/1.1 chunked stream, each sent as it comes (the
    fake LLM servers stream the way real ones do: SSE, NDJSON)."""
    handler.send_response(200)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    for chunk in chunks:
        data = chunk.encode()
        handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        handler.wfile.flush()
    handler.wfile.write(b"0\r\n\r\n")
    handler.wfile.flush()


def send_json(handler: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
    """Answer `status` with `payload` as a JSON body of a known length."""
    data = json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


@contextmanager
def serve_http(handler: type[BaseHTTPRequestHandler],
               release: threading.Event | None = None) -> Iterator[int]:
    """A threading HTTP server for `handler` on a free loopback port (its port is
    yielded), shut down afterwards; `release` is set first, so a handler held on it
    (a hanging fake) lets go before the shutdown waits for it."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        if release is not None:
            release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
