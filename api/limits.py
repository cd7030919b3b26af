"""Request size limits: a spec is at most 256 KiB, and no request body may be larger
than twice that (JSON escaping of YAML text, plus variables). Both the declared
Content-Length and the bytes actually received are checked, so a chunked body or a
missing header cannot get past."""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from strands_durable.api.errors import error_body

MAX_SPEC_BYTES = 256 * 1024
MAX_BODY_BYTES = 2 * MAX_SPEC_BYTES


def too_large(what: str, size: int | None, limit: int) -> dict[str, Any]:
    shown = f"is {size} bytes" if size is not None else f"is over {limit} bytes"
    return error_body("payload_too_large", f"{what} {shown}; the limit is {limit} bytes",
                      {"limit_bytes": limit, **({"size_bytes": size} if size else {})})


class BodyLimit:
    """Pure ASGI middleware: buffer the body up to `limit` bytes, answer 413 past it."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES,
                 larger: dict[str, int] | None = None) -> None:
        self.app = app
        self.limit = limit
        self.larger = larger or {}  # path -> its own limit (a session import's)

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
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # later reads wait for the disconnect, as usual

        await self.app(scope, replay, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _reply(send: Send, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(payload)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": payload})
