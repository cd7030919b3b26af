"""A webhook receiver for tests and drills: a threading HTTP server on a fixed loopback
port that checks each request's Standard Webhooks signature with a given verifier,
dedupes on `webhook-id` (a repeat is answered 200 and not processed again), and can go
down and come back on the same port (an outage)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Verifier = Callable[[bytes, Mapping[str, str]], Any]  # raises when the signature is wrong


@dataclass
class Received:
    webhook_id: str
    event: str
    session_id: str
    at: float  # monotonic time it was first processed
    attempts: int = 1  # requests that carried this id (repeats included)


@dataclass
class WebhookReceiver:
    port: int
    verify: Verifier
    processed: dict[str, Received] = field(default_factory=dict)
    refused: int = 0  # requests whose signature did not verify
    repeats: int = 0  # requests for an id already processed
    requests: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    def start(self) -> WebhookReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                status = receiver.handle(body, {k.lower(): v for k, v in self.headers.items()})
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            if self._thread is not None:
                self._thread.join(timeout=5)
        self._server = self._thread = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def handle(self, body: bytes, headers: Mapping[str, str]) -> int:
        with self._lock:
            self.requests += 1
        try:
            self.verify(body, headers)
        except Exception:
            with self._lock:
                self.refused += 1
            return 401
        wid = headers.get("webhook-id", "")
        doc = json.loads(body)
        with self._lock:
            seen = self.processed.get(wid)
            if seen is not None:
                seen.attempts += 1
                self.repeats += 1
                return 200
            self.processed[wid] = Received(wid, doc["type"], doc["data"]["session_id"],
                                           time.monotonic())
        return 200

    def events_of(self, session_id: str) -> list[str]:
        with self._lock:
            return sorted(r.event for r in self.processed.values()
                          if r.session_id == session_id)
