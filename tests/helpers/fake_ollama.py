"""A tiny Ollama server on 127.0.0.1 for operator drills: it answers `/api/chat` the way
Ollama does (chunked NDJSON, token counts in the last line) for the models it has
"pulled", and for any other model the 404 real Ollama gives. Pulling a model later
is the realistic "cause fixed" of a step that failed for good."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from helpers import send_chunked, send_json, serve_http


@dataclass
class FakeOllama:
    port: int = 0
    pulled: set[str] = field(default_factory=set)
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def pull(self, model: str) -> None:
        with self.lock:
            self.pulled.add(model)


def reply_for(prompt: str) -> str:
    return "ollama: " + " ".join(prompt.split()[:8])


def _handler(state: FakeOllama) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            model = str(body.get("model"))
            with state.lock:
                state.requests.append(body)
                pulled = model in state.pulled
            if self.path != "/api/chat":
                return self._json(404, {"error": "not found"})
            if not pulled:
                return self._json(404, {"error": f'model "{model}" not found, try pulling '
                                                 f"it first"})
            users = [m for m in body.get("messages", []) if m.get("role") == "user"]
            prompt = str(users[-1].get("content", "")) if users else ""
            text = reply_for(prompt)
            base = {"model": model, "created_at": "2024-01-01T00:00:00Z"}
            lines = [{**base, "message": {"role": "assistant", "content": text}, "done": False},
                     {**base, "message": {"role": "assistant", "content": ""}, "done": True,
                      "done_reason": "stop", "total_duration": 12_000_000,
                      "prompt_eval_count": len(prompt.split()),
                      "eval_count": len(text.split())}]
            send_chunked(self, "application/x-ndjson",
                         (json.dumps(line) + "\n" for line in lines))

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            send_json(self, status, payload)

    return Handler


@contextmanager
def fake_ollama() -> Iterator[FakeOllama]:
    state = FakeOllama()
    with serve_http(_handler(state)) as port:
        state.port = port
        yield state
