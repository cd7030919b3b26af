"""The errors a client raises: one class per HTTP answer kind, each a subclass of the
matching `DurableError` kind (core/errors.py), so `except NotFound` catches a 404 from
the API and a `SessionNotFound` from the store alike.

| status | class | kind |
|---|---|---|
| 401 | `Unauthorized` | `InvalidInput` (the same request cannot succeed) |
| 404 | `ApiNotFound` | `NotFound` |
| 409 | `ApiConflict` | `Conflict` |
| 413 | `PayloadTooLarge` | `InvalidInput` |
| 400, 405, 422, other 4xx | `ApiInvalidInput` | `InvalidInput` |
| 429 | `RateLimited` | `Unavailable` (may succeed later; `retry_after_s`) |
| 503 | `ApiUnavailable` | `Unavailable` (`retry_after_s` when the server said) |
| 500 and other 5xx, a reply that is not the envelope | `ServerError` | `Unavailable` |
| no answer (connection refused, reset, timed out) | `ConnectionFailed` | `Unavailable` |

`wait()` running out of time raises `WaitTimeout` (a `Conflict`: the session is still
running; it is also a `TimeoutError`).

Messages never carry the bearer token: they are built from the server's envelope and
the request's method and path only.
"""

from __future__ import annotations

from typing import Any

from strands_durable.errors import Conflict, DurableError, InvalidInput, NotFound, Unavailable


class ClientError(DurableError):
    """What every client error carries: `code` (the API's `error.code`), `status` (the
    HTTP status; 0 when no answer came), `message`, and `details()` (the envelope's
    `details`). Each class lists its kind first, so the class's `code` is its kind's."""

    code = "http_error"

    def __init__(self, code: str, message: str, status: int = 0, details: Any = None,
                 retry_after_s: float | None = None) -> None:
        super().__init__(message)
        # An instance's code beats the class's: the server's code is the precise one.
        vars(self)["code"] = code
        self.status = status
        self.message = message
        self.detail_value: Any = {} if details is None else details
        self.retry_after_s = retry_after_s

    def details(self) -> dict[str, object]:
        value = self.detail_value
        return dict(value) if isinstance(value, dict) else {"details": value}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, status={self.status}, " \
               f"message={self.message!r})"


class ApiInvalidInput(InvalidInput, ClientError):
    """422 (and other 4xx without a class of their own): the request or spec is invalid."""


class Unauthorized(InvalidInput, ClientError):
    """401: the bearer token is missing or wrong."""


class Forbidden(InvalidInput, ClientError):
    """403: the token's role or namespaces do not allow this (`details.needs` names the
    role it would take)."""


class PayloadTooLarge(InvalidInput, ClientError):
    """413: the request body or the spec is over the server's limit."""


class ApiNotFound(NotFound, ClientError):
    """404: no such session, checkpoint or artifact (`code` says which)."""


class ApiConflict(Conflict, ClientError):
    """409: the session's state refuses the action (or an Idempotency-Key was reused)."""


class ApiUnavailable(Unavailable, ClientError):
    """503: Redis unreachable or the API overloaded; `retry_after_s` when it said."""


class RateLimited(Unavailable, ClientError):
    """429: too many requests (a proxy in front of the API); `retry_after_s` when said."""


class ServerError(Unavailable, ClientError):
    """500 and other 5xx, or an answer that is not the API's envelope."""


class ConnectionFailed(Unavailable, ClientError):
    """No answer: the connection was refused, reset or timed out."""


class WaitTimeout(Conflict, ClientError, TimeoutError):
    """`wait()` ran out of time while the session was still running."""


class InvalidClientSetting(InvalidInput):
    """A client's own argument is unusable (a CA bundle that cannot be read)."""


STATUS_CLASSES: dict[int, type[ClientError]] = {
    401: Unauthorized, 403: Forbidden, 404: ApiNotFound, 409: ApiConflict, 413: PayloadTooLarge,
    422: ApiInvalidInput, 429: RateLimited, 503: ApiUnavailable,
}


def class_for(status: int) -> type[ClientError]:
    """The error class of an HTTP status (pure)."""
    if status in STATUS_CLASSES:
        return STATUS_CLASSES[status]
    return ApiInvalidInput if 400 <= status < 500 else ServerError
