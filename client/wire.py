"""The HTTP client's pure half: requests built as `Call`s, answers decoded into the
API's own models (api/schemas.py) or into client errors, and server-sent events parsed
line by line. No I/O here: tests/unit/test_client_decode.py checks it from tables."""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from pydantic import BaseModel, ValidationError

from strands_durable.api.schemas import ErrorResponse
from strands_durable.client.errors import ClientError, ServerError, class_for
from strands_durable.errors import InvalidInput
from strands_durable.spec.dump import spec_data
from strands_durable.spec.model import Spec
from strands_durable.webhooks import WebhookSubscription

M = TypeVar("M", bound=BaseModel)
SpecInput = Path | str | Mapping[str, Any] | Spec
# Retry-After beyond this is not waited for: the error is raised instead.
MAX_RETRY_AFTER_S = 60.0


class InvalidSpecInput(InvalidInput):
    """A spec argument the client cannot send (an unreadable file, a wrong type)."""

    code = "invalid_spec"


@dataclass(frozen=True)
class Call:
    """One HTTP request: `idempotent` calls may be retried on 503 and lost connections."""

    method: str
    path: str
    params: dict[str, str] = field(default_factory=dict)
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    idempotent: bool = True


def session_path(session_id: str, *rest: str) -> str:
    """/v1/sessions/{id}/...; every part quoted, so no id reaches another route."""
    parts = [quote(str(session_id), safe=""), *(quote(p, safe="/") for p in rest)]
    return "/v1/sessions/" + "/".join(parts)


def spec_body(spec: SpecInput) -> str | dict[str, Any]:
    """What `spec` travels as: YAML text, or the document as a JSON object."""
    if isinstance(spec, Path):
        try:
            return spec.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidSpecInput(f"spec file {spec}: cannot read it ({exc})") from None
    if isinstance(spec, str):
        return spec
    if isinstance(spec, Spec):
        return spec_data(spec)  # as `dump_spec` writes it: what was set, by its names
    if isinstance(spec, Mapping):
        return dict(spec)
    raise InvalidSpecInput(f"spec: expected a path, YAML text, a dict or a Spec, not "
                           f"{type(spec).__name__}")


def submit_call(spec: SpecInput, *, variables: Mapping[str, Any] | None = None,
                idempotency_key: str | None = None, priority: int | None = None,
                provider: str | None = None, webhook: WebhookSubscription | None = None
                ) -> Call:
    body: dict[str, Any] = {"spec": spec_body(spec), "variables": dict(variables or {})}
    if webhook is not None:
        body["webhook"] = webhook.model_dump(exclude_none=True)
    if priority is not None:
        body["priority"] = priority
    if provider is not None:
        body["provider"] = provider
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key is not None else {}
    # Without a key a repeated submit would start a second session: never retried.
    return Call("POST", "/v1/sessions", body=body, headers=headers,
                idempotent=idempotency_key is not None)


def list_call(*, status: str | None = None, workflow: str | None = None,
              updated_after: datetime | None = None, updated_before: datetime | None = None,
              limit: int = 50, cursor: str | None = None) -> Call:
    params = {"limit": str(limit)}
    for name, value in (("status", status), ("workflow", workflow), ("cursor", cursor)):
        if value is not None:
            params[name] = str(value)
    for name, moment in (("updated_after", updated_after), ("updated_before", updated_before)):
        if moment is not None:
            params[name] = moment.isoformat()
    return Call("GET", "/v1/sessions", params=params)


def resume_body(*, variables: Mapping[str, Any] | None = None,
                budgets: Mapping[str, int] | None = None, spec: SpecInput | None = None,
                from_checkpoint: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if variables:
        body["variables"] = dict(variables)
    if budgets:
        body["budgets"] = dict(budgets)
    if spec is not None:
        body["spec"] = spec_body(spec)
    if from_checkpoint is not None:
        body["from_checkpoint"] = from_checkpoint
    return body


def requeue_body(*, step: str | None = None, dead: bool = False,
                 dry_run: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"dead": dead, "dry_run": dry_run}
    if step is not None:
        body["step"] = step
    return body


# -- answers ---------------------------------------------------------------------------
def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """Retry-After as seconds (a number or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def error_of(status: int, body: bytes, headers: Mapping[str, str], what: str) -> ClientError:
    """The client error of a non-2xx answer to `what` ("GET /v1/sessions/x"): the API's
    envelope when there is one, else the status and a short look at the body."""
    kind = class_for(status)
    wait = retry_after_s(headers.get("retry-after") or headers.get("Retry-After"))
    try:
        info = ErrorResponse.model_validate_json(body).error
    except ValidationError:
        snippet = body[:200].decode("utf-8", "replace").strip()
        code = {401: "unauthorized", 404: "not_found", 413: "payload_too_large",
                429: "too_many_requests", 503: "unavailable"}.get(status, "http_error")
        return kind(code, f"{what}: HTTP {status}" + (f": {snippet}" if snippet else ""),
                    status, {}, wait)
    return kind(info.code, info.message, status, info.details, wait)


def decode(model: type[M], status: int, body: bytes, what: str) -> M:
    """A 2xx answer as `model`; an answer that does not fit it is a ServerError."""
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise ServerError("invalid_response", f"{what}: HTTP {status} answer is not a "
                          f"{model.__name__} ({exc.error_count()} problems)", status) from None


# -- server-sent events ----------------------------------------------------------------
@dataclass
class SseFrame:
    event: str = "message"
    id: str | None = None
    data: str | None = None


class SseParser:
    """text/event-stream, one line at a time: `feed` answers a frame when a blank line
    ends one (comments and `retry:` are skipped)."""

    def __init__(self) -> None:
        self._frame = SseFrame()

    def feed(self, line: str) -> SseFrame | None:
        if line == "":
            frame, self._frame = self._frame, SseFrame()
            return frame if frame.data is not None else None
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._frame.event = value
        elif name == "id":
            self._frame.id = value
        elif name == "data":
            self._frame.data = value if self._frame.data is None else \
                self._frame.data + "\n" + value
        return None


def frame_json(frame: SseFrame) -> Any:
    try:
        return json.loads(frame.data or "null")
    except ValueError:
        raise ServerError("invalid_response", f"an event-stream frame ({frame.event}) is "
                          "not JSON") from None


def stream_error(frame: SseFrame) -> ClientError:
    """An `error` frame (Redis lost mid-stream) as the error it carries."""
    doc = frame_json(frame)
    try:
        info = ErrorResponse.model_validate(doc).error
    except ValidationError:
        return ServerError("invalid_response", "the event stream ended with an error frame")
    return class_for(503)(info.code, info.message, 503, info.details)
