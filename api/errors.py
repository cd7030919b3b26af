"""Every error the HTTP API answers is `{"error": {"code", "message", "details"}}` with
the status that says what went wrong: the domain errors, FastAPI's own validation and
routing errors, and an unreachable Redis are all mapped here."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from strands_durable.errors import (
    Conflict,
    DurableError,
    InvalidInput,
    NotFound,
    Overloaded,
    Unavailable,
    kind_of,
)
from strands_durable.store.outage import REDIS_DOWN, NoReplicasError

log = logging.getLogger("durable.api")

# Every `error.code` the API may answer (the OpenAPI schema's enum): the domain errors'
# codes (core/errors.py and their subclasses; tests/api/test_openapi_polish.py checks
# that none is missing) and those of the HTTP edge itself.
ERROR_CODES: tuple[str, ...] = (
    # the HTTP edge
    "unauthorized", "forbidden", "too_many_failures", "invalid_request", "invalid_cursor",
    "method_not_allowed", "http_error", "payload_too_large", "unsupported_media_type",
    "request_timeout", "artifact_not_found",
    "redis_unavailable", "internal_error",
    # the domain errors, by kind: invalid input (422)
    "invalid_input", "invalid_id", "invalid_spec", "invalid_token_request", "template_error",
    "invalid_artifact_path", "invalid_schedule", "invalid_webhook", "invalid_export",
    # not found (404)
    "not_found", "session_not_found", "checkpoint_not_found", "token_not_found",
    "schedule_not_found", "webhook_not_found",
    # conflict (409)
    "conflict", "invalid_transition", "quota_exceeded", "idempotency_key_reused",
    "nothing_to_resume", "session_exists",
    "nothing_to_requeue", "fork_refused", "session_busy", "session_running", "lock_lost",
    "lease_lost", "schedule_exists",
    # unavailable (503)
    "unavailable", "misconfigured", "local_store_unavailable", "overloaded", "import_failed",
    # a step's own failures (recorded on the session; listed for completeness)
    "step_failed", "provider_error", "capacity_exhausted",
)


class ApiError(Exception):
    """An error with its HTTP status, raised by routes and dependencies."""

    def __init__(self, status: int, code: str, message: str, details: Any = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message,
                      "details": {} if details is None else details}}


def error_response(status: int, code: str, message: str, details: Any = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(code, message, details), status_code=status,
                        headers=headers)


# The HTTP status of each error kind (core/errors.py): the kind decides, never the class.
KIND_STATUS: dict[type[DurableError], int] = {
    InvalidInput: 422, NotFound: 404, Conflict: 409, Unavailable: 503,
}


def domain_error(exc: DurableError) -> ApiError:
    """The status and code of a domain error (pure: tested from a table). An error of no
    kind is a bug in the raiser, so it is a 500 like any other bug."""
    kind = kind_of(exc)
    if kind is None:
        log.error("an error of no kind reached the API: %r", exc)
        return ApiError(500, "internal_error", "internal error; see the server log")
    # Retry-After tells a client (and a proxy) when the same request may succeed.
    headers = {"Retry-After": str(exc.retry_after_s)} if isinstance(exc, Overloaded) else None
    return ApiError(KIND_STATUS[kind], exc.code, exc.public_message(), exc.details(), headers)


def validation_message(errors: list[dict[str, Any]]) -> str:
    parts = []
    for e in errors[:5]:
        loc = ".".join(str(p) for p in e.get("loc", ()))
        parts.append(f"{loc}: {e.get('msg', 'invalid')}" if loc else str(e.get("msg")))
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "; ".join(parts) + more


def install(app: FastAPI) -> None:
    """Register the handlers that put every error in the envelope."""

    async def on_api_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return error_response(exc.status, exc.code, exc.message, exc.details, exc.headers)

    async def on_domain_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, DurableError)
        api = domain_error(exc)
        return error_response(api.status, api.code, api.message, api.details, api.headers)

    async def on_validation(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""),
                   "type": e.get("type", "")} for e in exc.errors()]
        return error_response(422, "invalid_request", validation_message(errors),
                              {"errors": errors})

    async def on_http(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 400:
            # FastAPI's "error parsing the body" (bytes that are not UTF-8 JSON): the
            # same answer as malformed JSON, a 422 invalid_request.
            return error_response(422, "invalid_request", f"request body: {exc.detail}")
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return error_response(exc.status_code, code, str(exc.detail), None,
                              dict(exc.headers) if exc.headers else None)

    async def on_redis_down(_: Request, exc: Exception) -> JSONResponse:
        log.warning("Redis unreachable: %s", exc)
        # NOREPLICAS: Redis answers but holds writes until its replica is back.
        what = "Redis refuses writes" if isinstance(exc, NoReplicasError) else "cannot reach Redis"
        return error_response(503, "redis_unavailable", f"{what} ({exc})",
                              headers={"Retry-After": "1"})

    async def on_bug(_: Request, exc: Exception) -> JSONResponse:
        # Still the envelope; the traceback goes to the server's log, not the client.
        log.error("unhandled error: %r", exc)
        return error_response(500, "internal_error", "internal error; see the server log")

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(DurableError, on_domain_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    for kind in REDIS_DOWN:
        app.add_exception_handler(kind, on_redis_down)
    app.add_exception_handler(Exception, on_bug)
