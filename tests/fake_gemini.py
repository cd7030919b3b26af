"""A tiny Gemini API server on 127.0.0.1: `models/{model}:streamGenerateContent?alt=sse`
(SSE, as google-genai streams) and `:generateContent` (one JSON body), with the
`usageMetadata` and `functionCall` parts the real API sends, and its error bodies
(`{"error": {"code", "message", "status"}}`). The real SDK, Strands' GeminiModel and
everything above them run against it.

Each answer comes from the conversation the request carries: while a tool is declared
and the request holds fewer than `tool_calls` functionResponse parts, the model calls
`tool` with `tool_args` (one call per turn); then it replies "gemini: <the words of the
last user text>". Every request is recorded.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from helpers import send_chunked, send_json, serve_http

PROMPT_TOKENS, CANDIDATE_TOKENS = 17, 6
# Google's status names for the HTTP codes the fake can answer with.
STATUS_NAMES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
                503: "UNAVAILABLE"}


@dataclass
class FakeGemini:
    port: int = 0
    failures: list[int] = field(default_factory=list)  # statuses to answer first, in order
    hangs: int = 0  # requests (first ones) answered only when the test ends: a hung server
    released: threading.Event = field(default_factory=threading.Event)
    tool: str = "calculator"
    tool_args: dict[str, Any] = field(default_factory=lambda: {"expression": "6 * 7"})
    tool_calls: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def parts(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The model's parts for this request: a functionCall, or the text reply."""
        turns = body.get("contents", [])
        results = sum(1 for turn in turns for part in turn.get("parts", [])
                      if "functionResponse" in part)
        declared = [fn["name"] for tool in body.get("tools", [])
                    for fn in tool.get("functionDeclarations", [])]
        if self.tool in declared and results < self.tool_calls:
            return [{"functionCall": {"id": f"call-{results + 1}", "name": self.tool,
                                      "args": self.tool_args}}]
        return [{"text": reply_for(last_user_text(turns))}]


def last_user_text(turns: list[dict[str, Any]]) -> str:
    for turn in reversed(turns):
        texts = [p["text"] for p in turn.get("parts", []) if "text" in p]
        if turn.get("role") == "user" and texts:
            return " ".join(texts)
    return ""


def reply_for(prompt: str) -> str:
    return "gemini: " + " ".join(prompt.split()[:8])


def _chunks(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The stream: text split in two chunks (a call in one), the last with the finish
    reason and the full counts; earlier chunks carry the prompt count alone, as Gemini's."""
    if "text" in parts[0]:
        head, _, tail = parts[0]["text"].partition(" ")
        pieces = [[{"text": head}], [{"text": " " + tail}]] if tail else [parts]
    else:
        pieces = [parts]
    chunks: list[dict[str, Any]] = [
        {"candidates": [{"content": {"role": "model", "parts": piece}, "index": 0}],
         "usageMetadata": {"promptTokenCount": PROMPT_TOKENS},
         "modelVersion": "fake"} for piece in pieces]
    chunks[-1]["candidates"][0]["finishReason"] = "STOP"
    chunks[-1]["usageMetadata"] = {"promptTokenCount": PROMPT_TOKENS,
                                   "candidatesTokenCount": CANDIDATE_TOKENS,
                                   "totalTokenCount": PROMPT_TOKENS + CANDIDATE_TOKENS}
    return chunks


def _handler(state: FakeGemini) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # chunked streaming, like the real server

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with state.lock:
                state.requests.append(body)
                state.paths.append(self.path)
                state.headers.append({k.lower(): v for k, v in self.headers.items()})
                failure = state.failures.pop(0) if state.failures else None
                hang = state.hangs > 0
                state.hangs -= hang
            if hang:
                state.released.wait(timeout=30)
                return self._error(503)
            path = self.path.split("?", 1)[0]
            if failure is not None:
                return self._error(failure)
            if not path.startswith("/v1beta/models/"):
                return self._error(404)
            chunks = _chunks(state.parts(body))
            if path.endswith(":streamGenerateContent"):
                send_chunked(self, "text/event-stream",
                             (f"data: {json.dumps(chunk)}\r\n\r\n" for chunk in chunks))
            elif path.endswith(":generateContent"):
                merged = {**chunks[-1], "candidates": [{
                    **chunks[-1]["candidates"][0],
                    "content": {"role": "model", "parts": state.parts(body)}}]}
                self._json(200, merged)
            else:
                self._error(404)

        def _error(self, code: int) -> None:
            status = STATUS_NAMES.get(code, "UNKNOWN")
            self._json(code, {"error": {"code": code, "message": f"fake {code} {status}",
                                        "status": status}})

        def _json(self, code: int, payload: dict[str, Any]) -> None:
            send_json(self, code, payload)

    return Handler


@contextmanager
def fake_gemini() -> Iterator[FakeGemini]:
    state = FakeGemini()
    with serve_http(_handler(state), release=state.released) as port:
        state.port = port
        yield state
