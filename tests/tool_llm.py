"""A fake LLM server that asks for tools, on the wire APIs of OpenAI (/v1/chat/completions,
SSE) and Ollama (/api/chat, NDJSON): the real provider classes drive it.

Each request is answered from the conversation it carries: while it holds fewer than
`calls` tool results, the model asks for `bump` with n = results + 1 (one call per
turn); then it replies "bumped <calls> times". Every request is recorded, so a test
counts the provider calls a step made, across worker processes.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from helpers import send_chunked

PROMPT_TOKENS, COMPLETION_TOKENS = 13, 5


@dataclass
class ToolLLM:
    calls: int = 3
    port: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Hold the answer to request number `hold` (1-based) until `release` is set; `held`
    # is set once that request is waiting (a worker is then inside that model call).
    hold: int = 0
    held: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def answer(self, body: dict[str, Any]) -> tuple[int, str]:
        """(n of the next bump, 0 for the final reply) for this request."""
        results = sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
        return (results + 1, "") if results < self.calls else (0, f"bumped {results} times")


def _handler(state: ToolLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with state.lock:
                state.requests.append(body)
                hold = len(state.requests) == state.hold
            if hold:
                state.held.set()
                state.release.wait(timeout=120)
            n, reply = state.answer(body)
            if self.path == "/v1/chat/completions":
                send_chunked(self, "text/event-stream", _openai(body["model"], n, reply))
            elif self.path == "/api/chat":
                send_chunked(self, "application/x-ndjson", _ollama(body["model"], n, reply))
            else:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

    return Handler


def _openai(model: str, n: int, reply: str) -> Iterator[str]:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": model}

    def choice(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    if n:
        call = {"index": 0, "id": f"call_{n}", "type": "function",
                "function": {"name": "bump", "arguments": ""}}
        chunks = [choice({"role": "assistant", "content": None, "tool_calls": [call]}, None),
                  choice({"tool_calls": [{"index": 0, "function": {
                      "arguments": json.dumps({"n": n})}}]}, None),
                  choice({}, "tool_calls")]
    else:
        chunks = [choice({"role": "assistant", "content": reply}, None), choice({}, "stop")]
    usage = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS,
             "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS}
    chunks.append({**base, "choices": [], "usage": usage})
    for chunk in chunks:
        yield f"data: {json.dumps(chunk)}\n\n"
    yield "data: [DONE]\n\n"


def _ollama(model: str, n: int, reply: str) -> Iterator[str]:
    base = {"model": model, "created_at": "2024-01-01T00:00:00Z"}
    message: dict[str, Any] = {"role": "assistant", "content": reply}
    if n:
        message["tool_calls"] = [{"function": {"name": "bump", "arguments": {"n": n}}}]
    yield json.dumps({**base, "message": message, "done": False}) + "\n"
    yield json.dumps({**base, "message": {"role": "assistant", "content": ""}, "done": True,
                      "done_reason": "stop", "total_duration": 12_000_000,
                      "prompt_eval_count": PROMPT_TOKENS,
                      "eval_count": COMPLETION_TOKENS}) + "\n"


def serve(state: ToolLLM) -> tuple[ThreadingHTTPServer, threading.Thread]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    return server, thread


def stop(server: ThreadingHTTPServer, thread: threading.Thread, state: ToolLLM | None = None
         ) -> None:
    if state is not None:
        state.release.set()
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)
