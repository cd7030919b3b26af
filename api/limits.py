"""Request size limits: a spec is at most 256 KiB, and no request body may be larger
than twice that (JSON escaping of YAML text, plus variables). Both the declared
Content-Length and the bytes actually received are checked, so a chunked body or a
missing header cannot get past. A body must also arrive whole within BODY_TIMEOUT_S (a
client that declares 100 bytes and sends 2 held its connection for good: 408), and a
body sent to /v1 must say it is JSON (415 naming the type sent, not a 422 about a
dictionary)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from strands_durable.api.errors import error_body

MAX_SPEC_BYTES = 256 * 1024
MAX_BODY_BYTES = 2 * MAX_SPEC_BYTES
BODY_TIMEOUT_S = 30.0


def too_large(what: str, size: int | None, limit: int) -> dict[str, Any]:
    shown = f"is {size} bytes" if size is not None else f"is over {limit} bytes"
    return error_body("payload_too_large", f"{what} {shown}; the limit is {limit} bytes",
                      {"limit_bytes": limit, **({"size_bytes": size} if size else {})})


class BodyLimit:
    """Pure ASGI middleware: buffer the body up to `limit` bytes, answer 413 past it."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES,
                 larger: dict[str, int] | None = None, timeout_s: float = BODY_TIMEOUT_S
                 ) -> None:
        self.app = app
        self.limit = limit
        # path -> its own limit (a session import's, whose route reads the bytes itself)
        self.larger = larger or {}
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        limit = self.larger.get(scope.get("path", ""), self.limit)
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await _reply(send, 413, too_large("the request body", declared, limit))
            return
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.timeout_s):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        await _reply(send, 413, too_large("the request body", None, limit))
                        return
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            await _reply(send, 408, error_body(
                "request_timeout", f"the request body did not arrive within "
                f"{self.timeout_s:g} s ({size} bytes came)", {"received_bytes": size}))
            return
        body = b"".join(chunks)
        path = scope.get("path", "")
        if body and path.startswith("/v1/") and path not in self.larger:
            sent = _content_type(scope)
            if not _is_json(sent):
                await _reply(send, 415, error_body(
                    "unsupported_media_type", f"the request body must be JSON: send "
                    f"Content-Type: application/json (this one was {sent[:60]!r})",
                    {"content_type": sent[:200]}))
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # later reads wait for the disconnect, as usual

        await self.app(scope, replay, send)


def _header(scope: Scope, wanted: bytes) -> bytes | None:
    for name, value in scope.get("headers", ()):
        if name == wanted:
            return bytes(value)
    return None


def _content_type(scope: Scope) -> str:
    return (_header(scope, b"content-type") or b"").decode("latin-1")


def _is_json(content_type: str) -> bool:
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (media.startswith("application/")
                                            and media.endswith("+json"))


def _content_length(scope: Scope) -> int | None:
    value = _header(scope, b"content-length")
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


async def _reply(send: Send, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(payload)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": payload})
