"""A local OpenAI-compatible server with an account limit, as real providers enforce one:
at most `per_second` requests in any one-second window and `at_once` in flight; beyond
either it answers 429 with `Retry-After` and OpenAI's `x-ratelimit-*` headers. Accepted
requests stream a reply (SSE, usage in the last chunk) after `delay_s`, with the
`x-ratelimit-*` headers too, as OpenAI sends them (`names_limit=False`: only on a 429,
as a server that keeps its limit to itself until it is met). It counts what
it answered, so a test or the bench can say how many requests were throttled.
"""

from __future__ import annotations

import collections
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class LimitedLLM:
    per_second: int = 10
    at_once: int = 6
    delay_s: float = 0.2
    retry_after_s: float = 1.0
    names_limit: bool = True  # x-ratelimit-* on every answer, not only on a 429
    port: int = 0
    accepted: int = 0
    throttled: int = 0
    throttled_at_once: int = 0  # of them, those over the requests-at-once limit
    peak_at_once: int = 0
    accepted_at: list[float] = field(default_factory=list)  # monotonic
    # Set: accepted requests are answered; clear: they are held open until it is set
    # (a drill that needs requests in flight at a moment of its choosing).
    answering: threading.Event = field(default_factory=lambda: _set(threading.Event()))
    lock: threading.Lock = field(default_factory=threading.Lock)
    _starts: collections.deque[float] = field(default_factory=collections.deque)
    _in_flight: int = 0

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def admit(self) -> bool:
        """Count the request in, or False (throttled) past either limit."""
        now = time.monotonic()
        with self.lock:
            while self._starts and now - self._starts[0] >= 1.0:
                self._starts.popleft()
            if len(self._starts) >= self.per_second or self._in_flight >= self.at_once:
                self.throttled += 1
                self.throttled_at_once += len(self._starts) < self.per_second
                return False
            self._starts.append(now)
            self._in_flight += 1
            self.accepted += 1
            self.accepted_at.append(now)
            self.peak_at_once = max(self.peak_at_once, self._in_flight)
            return True

    def done(self) -> None:
        with self.lock:
            self._in_flight -= 1

    @property
    def in_flight(self) -> int:
        """Requests accepted and not yet ended (answered, or their client gone)."""
        with self.lock:
            return self._in_flight


def _set(event: threading.Event) -> threading.Event:
    event.set()
    return event


def _events(model: str, text: str) -> Iterator[str]:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": model}
    for delta, finish in (({"role": "assistant", "content": text}, None), ({}, "stop")):
        chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        yield f"data: {json.dumps(chunk)}\n\n"
    usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    yield f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\n"
    yield "data: [DONE]\n\n"


def _send_chunked(handler: BaseHTTPRequestHandler, chunks: Iterator[str],
                  headers: dict[str, str] | None = None) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Transfer-Encoding", "chunked")
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    for chunk in chunks:
        data = chunk.encode()
        handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    handler.wfile.write(b"0\r\n\r\n")
    handler.wfile.flush()


@contextmanager
def limited_llm(**options: Any) -> Iterator[LimitedLLM]:
    state = LimitedLLM(**options)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if not state.admit():
                self.send_response(429)
                payload = json.dumps({"error": {"message": "Rate limit reached",
                                                "type": "requests"}}).encode()
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("Retry-After", f"{state.retry_after_s:g}")
                self.send_header("x-ratelimit-limit-requests", str(state.per_second * 60))
                self.send_header("x-ratelimit-remaining-requests", "0")
                self.end_headers()
                self.wfile.write(payload)
                return
            try:
                state.answering.wait()
                time.sleep(state.delay_s)  # the model's latency (a server thread)
                last = body["messages"][-1]["content"]
                text = last if isinstance(last, str) else "".join(
                    part.get("text", "") for part in last)
                named = {"x-ratelimit-limit-requests": str(state.per_second * 60)} \
                    if state.names_limit else {}
                _send_chunked(self, _events(body["model"], f"answer to {text[:40]}"), named)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the caller went away (a killed worker): nobody to answer
            finally:
                state.done()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    state.port = server.server_address[1]
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
