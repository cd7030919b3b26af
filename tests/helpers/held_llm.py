"""A local OpenAI-compatible server that streams part of its reply and holds the rest
until the test says `go` (a condition a test waits on, never a delay): for following a
step's output while it is written, and for killing a worker mid-reply."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from helpers import send_chunked, serve_http

FIRST, REST = ["Hello ", "wor"], ["ld", "!"]


@dataclass
class HeldLLM:
    """Streams FIRST, waits for `go`, streams REST and the stop (OpenAI's wire)."""

    go: threading.Event = field(default_factory=threading.Event)
    asked: threading.Event = field(default_factory=threading.Event)  # a request came
    requests: int = 0
    port: int = 0

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> str:
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n"


def ending(model: str) -> list[str]:
    """A stream's last events on OpenAI's wire: the stop, the usage, [DONE]."""
    usage = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
    return [chunk(model, {}, "stop"),
            f"data: {json.dumps({'id': 'c1', 'choices': [], 'usage': usage})}\n\n",
            "data: [DONE]\n\n"]


class _OpenAIHandler(BaseHTTPRequestHandler):
    """A chat completions endpoint's request: the model it names, nothing logged."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def requested_model(self) -> str:
        model: str = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["model"]
        return model


@contextmanager
def _served(handler: type[BaseHTTPRequestHandler], release: threading.Event,
            allow_provider_host: Callable[[str, str], None]) -> Iterator[int]:
    """The server's port, its URL allowed as an OpenAI host; `release` set when it stops."""
    with serve_http(handler, release=release) as port:
        allow_provider_host("openai", f"http://127.0.0.1:{port}/v1")
        yield port


@contextmanager
def held_llm(allow_provider_host: Callable[[str, str], None]) -> Iterator[HeldLLM]:
    """The server, its URL allowed as an OpenAI host; `go` is set when it stops."""
    state = HeldLLM()

    class Handler(_OpenAIHandler):
        def do_POST(self) -> None:
            model = self.requested_model()
            state.requests += 1
            state.asked.set()

            def body() -> Iterator[str]:
                yield chunk(model, {"role": "assistant", "content": ""})
                for part in FIRST:
                    yield chunk(model, {"content": part})
                state.go.wait(timeout=120)
                for part in REST:
                    yield chunk(model, {"content": part})
                yield from ending(model)

            # A killed worker's request finds nobody to answer.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                send_chunked(self, "text/event-stream", body())

    with _served(Handler, state.go, allow_provider_host) as port:
        state.port = port
        yield state


@dataclass
class GatedLLM:
    """Counts each request in and holds it, before any answer, until the test lets it go
    (`release(n)`: the next n held go on); then streams a whole reply. `in_progress` is
    the requests come and not yet answered, `peak` the most of them at once: a limit on
    requests at once is met, or broken, while the test holds them."""

    cond: threading.Condition = field(default_factory=threading.Condition, repr=False)
    closing: threading.Event = field(default_factory=threading.Event, repr=False)  # all go
    accepted: int = 0
    in_progress: int = 0
    peak: int = 0
    port: int = 0
    _permits: int = 0

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def release(self, n: int = 1) -> None:
        with self.cond:
            self._permits += n
            self.cond.notify_all()

    def arrive(self) -> None:
        with self.cond:
            self.accepted += 1
            self.in_progress += 1
            self.peak = max(self.peak, self.in_progress)
            while not self._permits and not self.closing.is_set():
                self.cond.wait(timeout=0.05)
            self._permits -= bool(self._permits)

    def leave(self) -> None:
        with self.cond:
            self.in_progress -= 1


@contextmanager
def gated_llm(allow_provider_host: Callable[[str, str], None]) -> Iterator[GatedLLM]:
    """The server, its URL allowed as an OpenAI host; every request let go when it stops."""
    state = GatedLLM()

    class Handler(_OpenAIHandler):
        def do_POST(self) -> None:
            model = self.requested_model()
            state.arrive()
            try:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    send_chunked(self, "text/event-stream", [
                        chunk(model, {"role": "assistant", "content": ""}),
                        chunk(model, {"content": "".join(FIRST + REST)}),
                        *ending(model)])
            finally:
                state.leave()

    with _served(Handler, state.closing, allow_provider_host) as port:
        state.port = port
        yield state
