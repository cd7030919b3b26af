"""One local server that speaks the streaming wire APIs of every provider, and can cut a
reply short: OpenAI's chat completions (SSE; llama.cpp serves the same path), Anthropic's
messages (SSE with named events), Gemini's streamGenerateContent (SSE), Ollama's
/api/chat (NDJSON) and Bedrock's converse-stream (AWS event stream, binary).

Each request is answered by the next entry of `plan` ("whole" once it is empty):
  whole   the reply REPLY, in pieces, then the protocol's stop event and usage
  cut     the first piece of REPLY, then the body simply ends, cleanly: no stop event
          (OpenAI: no finish_reason and no [DONE]; Anthropic: no message_stop; Gemini: no
          finishReason; Ollama: no `done` line; Bedrock: no messageStop)
  unstopped  all of REPLY, its blocks closed (Anthropic: its message_delta too), and
          then the body ends where the stop event should come
  silent  a 200 whose body ends before any event at all
  empty   an empty reply that does end with the stop event
  nodone  (OpenAI) all of a whole reply, its finish_reason and usage, but no `data: [DONE]`
  tool    (OpenAI only) a whole turn asking for the tool `bump` with n=1
Every request is recorded with its path.
"""

from __future__ import annotations

import binascii
import json
import struct
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from helpers import serve_http

REPLY_PIECES = ["the whole", " reply"]
REPLY = "".join(REPLY_PIECES)
PARTIAL = REPLY_PIECES[0]
PROMPT_TOKENS, COMPLETION_TOKENS = 11, 3


@dataclass
class WireFake:
    port: int = 0
    plan: list[str] = field(default_factory=list)
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Headers every answer carries (a provider's rate-limit headers, say).
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def next_mode(self, path: str, body: dict[str, Any]) -> str:
        with self.lock:
            self.requests.append((path, body))
            return self.plan.pop(0) if self.plan else "whole"


def _handler(state: WireFake) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # chunked streaming, like the real servers

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
            path = self.path.split("?", 1)[0]
            mode = state.next_mode(path, body)
            if path.endswith("/chat/completions"):
                self._send("text/event-stream", _text(_openai(mode, body)))
            elif path == "/v1/messages":
                self._send("text/event-stream", _text(_anthropic(mode, body)))
            elif path.startswith("/v1beta/models/") and path.endswith(":streamGenerateContent"):
                self._send("text/event-stream", _text(_gemini(mode)))
            elif path == "/api/chat":
                self._send("application/x-ndjson", _text(_ollama(mode, body)))
            elif path.startswith("/model/") and path.endswith("/converse-stream"):
                self._send("application/vnd.amazon.eventstream", _bedrock(mode))
            else:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

        def _send(self, content_type: str, chunks: Iterable[bytes]) -> None:
            """200 and `chunks` as an HTTP/1.1 chunked body that ends cleanly."""
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Transfer-Encoding", "chunked")
            for name, value in state.headers.items():
                self.send_header(name, value)
            self.end_headers()
            for data in chunks:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return Handler


def _text(parts: Iterable[str]) -> Iterator[bytes]:
    return (part.encode() for part in parts)


def _pieces(mode: str) -> list[str]:
    return {"whole": REPLY_PIECES, "unstopped": REPLY_PIECES, "nodone": REPLY_PIECES,
            "cut": [PARTIAL]}.get(mode, [])


def _closes(mode: str) -> bool:
    """Whether the reply's content blocks are closed (all but a cut)."""
    return mode != "cut"


def _stops(mode: str) -> bool:
    return mode in ("whole", "empty", "tool", "nodone")


# -- OpenAI (and llama.cpp) ---------------------------------------------------------------
def _openai(mode: str, body: dict[str, Any]) -> Iterator[str]:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
            "model": str(body.get("model", "m"))}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return f"data: {json.dumps({**base, 'choices': [choice]})}\n\n"

    if mode == "silent":
        return
    yield chunk({"role": "assistant", "content": ""})
    if mode == "tool":
        call = {"index": 0, "id": "call_1", "type": "function",
                "function": {"name": "bump", "arguments": json.dumps({"n": 1})}}
        yield chunk({"tool_calls": [call]})
    for piece in _pieces(mode):
        yield chunk({"content": piece})
    if not _stops(mode):
        return
    yield chunk({}, "tool_calls" if mode == "tool" else "stop")
    usage = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS,
             "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS}
    yield f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\n"
    if mode != "nodone":
        yield "data: [DONE]\n\n"


# -- Anthropic ----------------------------------------------------------------------------
def _anthropic(mode: str, body: dict[str, Any]) -> Iterator[str]:
    def event(name: str, data: dict[str, Any]) -> str:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"

    if mode == "silent":
        return
    yield event("message_start", {"message": {
        "id": "msg_1", "type": "message", "role": "assistant",
        "model": str(body.get("model", "m")), "content": [], "stop_reason": None,
        "stop_sequence": None, "usage": {"input_tokens": PROMPT_TOKENS, "output_tokens": 1}}})
    pieces = _pieces(mode)
    if pieces:
        yield event("content_block_start", {"index": 0,
                                            "content_block": {"type": "text", "text": ""}})
    for piece in pieces:
        yield event("content_block_delta", {"index": 0,
                                            "delta": {"type": "text_delta", "text": piece}})
    if not _closes(mode):
        return
    if pieces:
        yield event("content_block_stop", {"index": 0})
    yield event("message_delta", {"delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                  "usage": {"output_tokens": COMPLETION_TOKENS}})
    if _stops(mode):
        yield event("message_stop", {})


# -- Gemini -------------------------------------------------------------------------------
def _gemini(mode: str) -> Iterator[str]:
    def chunk(parts: list[dict[str, Any]], finish: str | None = None) -> str:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        usage: dict[str, int] = {"promptTokenCount": PROMPT_TOKENS}
        if finish:
            candidate["finishReason"] = finish
            usage |= {"candidatesTokenCount": COMPLETION_TOKENS,
                      "totalTokenCount": PROMPT_TOKENS + COMPLETION_TOKENS}
        data = {"candidates": [candidate], "usageMetadata": usage, "modelVersion": "fake"}
        return f"data: {json.dumps(data)}\r\n\r\n"

    if mode == "silent":
        return
    pieces = _pieces(mode)
    for index, piece in enumerate(pieces):
        last = index == len(pieces) - 1
        yield chunk([{"text": piece}], "STOP" if last and _stops(mode) else None)
    if not pieces and _stops(mode):
        yield chunk([], "STOP")


# -- Ollama -------------------------------------------------------------------------------
def _ollama(mode: str, body: dict[str, Any]) -> Iterator[str]:
    base = {"model": str(body.get("model", "m")), "created_at": "2024-01-01T00:00:00Z"}
    if mode == "silent":
        return
    for piece in _pieces(mode):
        yield json.dumps({**base, "message": {"role": "assistant", "content": piece},
                          "done": False}) + "\n"
    if _stops(mode):
        yield json.dumps({**base, "message": {"role": "assistant", "content": ""},
                          "done": True, "done_reason": "stop", "total_duration": 1_000_000,
                          "prompt_eval_count": PROMPT_TOKENS,
                          "eval_count": COMPLETION_TOKENS}) + "\n"


# -- Bedrock ------------------------------------------------------------------------------
def _bedrock(mode: str) -> Iterator[bytes]:
    if mode == "silent":
        return
    yield aws_event("messageStart", {"role": "assistant"})
    pieces = _pieces(mode)
    for piece in pieces:
        yield aws_event("contentBlockDelta", {"contentBlockIndex": 0,
                                              "delta": {"text": piece}})
    if pieces and _closes(mode):
        yield aws_event("contentBlockStop", {"contentBlockIndex": 0})
    if not _stops(mode):
        return
    yield aws_event("messageStop", {"stopReason": "end_turn"})
    yield aws_event("metadata", {
        "usage": {"inputTokens": PROMPT_TOKENS, "outputTokens": COMPLETION_TOKENS,
                  "totalTokens": PROMPT_TOKENS + COMPLETION_TOKENS},
        "metrics": {"latencyMs": 1}})


def aws_event(event_type: str, payload: dict[str, Any]) -> bytes:
    """One message of the AWS event stream encoding (application/vnd.amazon.eventstream):
    prelude (total and headers length, CRC), string headers, JSON payload, message CRC."""
    headers = b""
    for name, value in ((":event-type", event_type), (":content-type", "application/json"),
                        (":message-type", "event")):
        key, text = name.encode(), value.encode()
        headers += bytes([len(key)]) + key + bytes([7]) + struct.pack(">H", len(text)) + text
    data = json.dumps(payload).encode()
    prelude = struct.pack(">II", 12 + len(headers) + len(data) + 4, len(headers))
    prelude += struct.pack(">I", binascii.crc32(prelude))
    message = prelude + headers + data
    return message + struct.pack(">I", binascii.crc32(message))


@contextmanager
def wire_fake() -> Iterator[WireFake]:
    state = WireFake()
    with serve_http(_handler(state)) as port:
        state.port = port
        yield state
