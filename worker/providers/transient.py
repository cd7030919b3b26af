"""Which provider errors are worth retrying in place (the caller owns the retry loop;
see worker/agent_call.py), and which are permanent, so that the step fails at once
instead of spending the durable retries on them: matched by HTTP status, AWS error code,
or class name, so the checks work whether or not a provider's SDK is installed. A reply
stream that ended before its stop event (`ProviderStreamCutShort`, worker/model_wrapper.py)
is transient too."""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from strands_durable.errors import ProviderError, ProviderStreamCutShort

__all__ = ["Throttle", "is_transient", "limit_rpm_of", "permanent_cause", "throttle_of"]

# HTTP statuses worth a retry: timeout, rate limit, server trouble (not 501/505,
# which will not change on a retry), Anthropic's 529 "overloaded".
_TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504, 529})

# Transient classes by (top-level package, class name): matched on the class and its
# bases by name so the check works whether or not the package is installed.
_HTTP_NAMES = frozenset({"TimeoutException", "NetworkError", "RemoteProtocolError"})
_SDK_NAMES = frozenset(
    {
        "APIConnectionError",  # includes APITimeoutError
        "RateLimitError",
        "InternalServerError",
        "ServiceUnavailableError",
        "RetryableError",
        "Timeout",
    }
)
_TRANSIENT_NAMES: dict[str, frozenset[str]] = {
    "strands": frozenset({"ModelThrottledException"}),
    "httpx": _HTTP_NAMES,
    "httpx2": _HTTP_NAMES,  # the httpx fork that recent openai/anthropic SDKs use
    "httpcore": _HTTP_NAMES,
    "openai": _SDK_NAMES,
    "anthropic": _SDK_NAMES,
    "litellm": _SDK_NAMES,
    # botocore's ConnectionError/HTTPClientError cover connect/read timeouts and
    # closed connections (they do not subclass the builtin ConnectionError).
    "botocore": frozenset({"ConnectionError", "HTTPClientError", "EndpointConnectionError"}),
    # google-genai's async transport when aiohttp is installed: a dropped connection or
    # a truncated stream (its timeouts are the builtin TimeoutError).
    "aiohttp": frozenset({"ClientConnectionError", "ClientPayloadError"}),
}
_TRANSIENT_AWS_CODES = frozenset(
    {
        "ThrottlingException",
        "TooManyRequestsException",
        "ServiceUnavailableException",
        "InternalServerException",
        "ModelNotReadyException",
    }
)
# Errors that look transient by their cause but are not: retrying changes nothing.
_NEVER_TRANSIENT_NAMES = frozenset({"ContextWindowOverflowException", "MaxTokensReachedException"})


# HTTP statuses that no retry changes, and what they mean for a model call.
_PERMANENT_STATUS = {
    400: "the request was rejected as invalid",
    401: "the credentials are missing or were rejected",
    403: "the credentials may not use this model",
    404: "the model (or endpoint) was not found",
    422: "the request was rejected as invalid",
}
# google.rpc.ErrorInfo reasons that say more than their status: Gemini answers a bad
# API key with 400 INVALID_ARGUMENT.
_PERMANENT_REASONS = {
    "API_KEY_INVALID": "the API key was rejected",
    "API_KEY_SERVICE_BLOCKED": "the API key may not use this API",
}
_PERMANENT_AWS_CODES = {
    "AccessDeniedException": "the credentials may not use this model",
    "UnrecognizedClientException": "the credentials were rejected",
    "InvalidSignatureException": "the credentials were rejected",
    "ExpiredTokenException": "the credentials have expired",
    "ValidationException": "the request was rejected as invalid",
    "ResourceNotFoundException": "the model was not found",
}
_PERMANENT_NAMES = {
    "NoCredentialsError": "no AWS credentials were found",
    "AuthenticationError": "the credentials are missing or were rejected",
    "PermissionDeniedError": "the credentials may not use this model",
}


def permanent_cause(exc: BaseException) -> str | None:
    """Why `exc` (or an exception it wraps) can never succeed on a retry, or None."""
    for error in _chain_all(exc):
        if isinstance(error, ProviderError):
            return "the provider is misconfigured"
        status = _status_code(error)
        if status in _PERMANENT_STATUS:
            why = _PERMANENT_REASONS.get(_google_reason(error) or "", _PERMANENT_STATUS[status])
            return f"permanent provider error, HTTP {status}: {why}"
        aws_code = _aws_error_code(error)
        if aws_code in _PERMANENT_AWS_CODES:
            return f"permanent provider error, {aws_code}: {_PERMANENT_AWS_CODES[aws_code]}"
        for klass in type(error).__mro__:
            if klass.__name__ in _PERMANENT_NAMES:
                return f"permanent provider error: {_PERMANENT_NAMES[klass.__name__]}"
    return None


def _chain_all(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then what it explicitly wraps (`raise ... from`, Strands' EventLoopException)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        wrapped = getattr(current, "original_exception", None)
        current = wrapped if isinstance(wrapped, BaseException) else current.__cause__


def is_transient(exc: BaseException) -> bool:
    """True if `exc` (or an exception it wraps) is a provider error worth retrying."""
    return any(_is_transient_one(error) for error in _chain(exc))


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The chain up to the first error that is never transient, whatever it wraps."""
    for error in _chain_all(exc):
        if isinstance(error, ProviderError) or type(error).__name__ in _NEVER_TRANSIENT_NAMES:
            return
        yield error


def _is_transient_one(exc: BaseException) -> bool:
    if isinstance(exc, ProviderStreamCutShort):  # asked again, it may well come whole
        return True
    status = _status_code(exc)
    if status is not None:
        return status in _TRANSIENT_STATUS
    # An error event inside a 200 stream carries no status of its own: its type says.
    if _body_error_type(exc) in _TRANSIENT_TYPES:
        return True
    aws_code = _aws_error_code(exc)
    if aws_code is not None:
        return aws_code in _TRANSIENT_AWS_CODES
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    return any(
        klass.__name__ in _TRANSIENT_NAMES.get(klass.__module__.partition(".")[0], ())
        for klass in type(exc).__mro__
    )


def _status_code(exc: BaseException) -> int | None:
    """The HTTP status an SDK error carries (openai/anthropic/ollama/httpx/google-genai),
    if any. An error raised from inside a 200 stream has none: the 200 was the stream's,
    not the error's (Anthropic's `event: error` is an APIStatusError of status 200)."""
    status = None
    if type(exc).__module__.startswith("google.genai"):
        # google-genai's APIError: `code` is the HTTP status whichever transport it used
        # (an aiohttp response has no status_code), and an error chunk's own code (503)
        # where `.response` is the stream's 200.
        status = getattr(exc, "code", None)
    if status is None:
        status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    # ollama uses -1 for "no HTTP status" (an error inside a 200 stream).
    return status if isinstance(status, int) and status > 0 and status != 200 else None


# The error types an error body names that are worth a retry: Anthropic's, OpenAI's and
# google.rpc's names for overload and server trouble. A stream's error event carries no
# status of its own (see _status_code), only these.
_THROTTLE_TYPES = frozenset({"overloaded_error", "rate_limit_error", "RESOURCE_EXHAUSTED"})
_TRANSIENT_TYPES = _THROTTLE_TYPES | frozenset(
    {"api_error", "server_error", "UNAVAILABLE", "INTERNAL", "DEADLINE_EXCEEDED"})


def _body_error_type(exc: BaseException) -> str | None:
    """The error type an SDK error's body names: `type` (Anthropic, OpenAI) or `status`
    (google.rpc), of the body or of its `error` object, if any."""
    body = getattr(exc, "body", None)
    if body is None:
        body = getattr(exc, "details", None)  # google-genai's APIError
    if not isinstance(body, dict):
        return None
    inner = body.get("error")
    for part in (inner, body) if isinstance(inner, dict) else (body,):
        for name in ("type", "status"):
            value = part.get(name)
            if isinstance(value, str) and value != "error" and len(value) <= 100:
                return value
    return None


# At most this many google.rpc details are read of one error (a body is the server's).
_MAX_GOOGLE_DETAILS = 20


def _google_details(exc: BaseException) -> list[dict[str, Any]]:
    """The google.rpc details (ErrorInfo, RetryInfo, ...) of a google-genai APIError's
    body, `{"error": {"details": [...]}}` (or the error object itself, as a stream's
    error chunk may give it)."""
    body = getattr(exc, "details", None)
    error = body.get("error", body) if isinstance(body, dict) else None
    infos = error.get("details") if isinstance(error, dict) else None
    if not isinstance(infos, list):
        return []
    return [info for info in infos[:_MAX_GOOGLE_DETAILS] if isinstance(info, dict)]


def _google_reason(exc: BaseException) -> str | None:
    """The ErrorInfo reason of a google-genai APIError's body, if it names one."""
    for info in _google_details(exc):
        if isinstance(info.get("reason"), str):
            return str(info["reason"])
    return None


# google.protobuf.Duration in JSON: seconds, up to nine decimals, then "s" ("37s", "1.5s").
_PROTO_DURATION = re.compile(r"([0-9]{1,12})(?:\.([0-9]{1,9}))?s")


def _google_retry_delay(exc: BaseException) -> float | None:
    """The wait a google.rpc.RetryInfo in a google-genai APIError's body asks for: Gemini
    names its 429's wait there, not in a Retry-After header."""
    for info in _google_details(exc):
        delay = info.get("retryDelay")
        if not isinstance(delay, str) or len(delay) > 30:
            continue
        match = _PROTO_DURATION.fullmatch(delay.strip())
        if match is not None:
            return float(f"{match[1]}.{match[2] or 0}")
    return None


def _aws_error_code(exc: BaseException) -> str | None:
    """The error code of a botocore ClientError, if `exc` is one."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    code = response.get("Error", {}).get("Code")
    return code if isinstance(code, str) else None


# -- throttling: the provider says the account's limit is reached ----------------------

# 429 Too Many Requests; 529 is Anthropic's "overloaded" (their capacity, not the account's,
# but the same answer: fewer requests for a while).
_THROTTLE_STATUS = frozenset({429, 529})
_THROTTLE_AWS_CODES = frozenset({"ThrottlingException", "TooManyRequestsException"})
_THROTTLE_NAMES = frozenset({"ModelThrottledException", "RateLimitError"})
# The longest Retry-After believed: a bigger one is a bug or an attack, not a plan.
MAX_RETRY_AFTER_S = 600.0
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")


@dataclass(frozen=True)
class Throttle:
    """What a throttled response said: how long to wait (None: it did not say) and the
    account's requests-per-minute limit (None: it did not say)."""

    retry_after_s: float | None = None
    limit_rpm: int | None = None


def throttle_of(exc: BaseException) -> Throttle | None:
    """The throttle `exc` (or an error it wraps) reports, or None if it is no throttle."""
    found = False
    headers: dict[str, str] = {}
    delay: float | None = None  # a wait the error's body names (Gemini's RetryInfo)
    for error in _chain_all(exc):
        status = _status_code(error)
        if (status in _THROTTLE_STATUS
                or _aws_error_code(error) in _THROTTLE_AWS_CODES
                or any(k.__name__ in _THROTTLE_NAMES for k in type(error).__mro__)
                or (status is None and _body_error_type(error) in _THROTTLE_TYPES)):
            found = True
        headers = headers or _headers(error)
        delay = _google_retry_delay(error) if delay is None else delay
    if not found:
        return None
    retry_after = _retry_after(headers)
    if retry_after is None and delay is not None:
        retry_after = min(delay, MAX_RETRY_AFTER_S)
    return Throttle(retry_after_s=retry_after, limit_rpm=limit_rpm_of(headers))


def _headers(error: BaseException) -> dict[str, str]:
    response: Any = getattr(error, "response", None)
    raw: Any = getattr(response, "headers", None)
    if raw is None and isinstance(response, dict):  # botocore: ResponseMetadata.HTTPHeaders
        raw = response.get("ResponseMetadata", {}).get("HTTPHeaders")
    if not isinstance(raw, Mapping) and not hasattr(raw, "items"):
        return {}
    try:
        return {str(k).lower(): str(v)[:200] for k, v in list(raw.items())[:200]}
    except (TypeError, ValueError):
        return {}


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and 0 <= value < 1e12 else None


def _duration_s(text: str | None) -> float | None:
    """OpenAI's reset durations: `1s`, `6m0s`, `120ms`, `1h2m3.5s`."""
    if not text:
        return None
    parts = _DURATION_PART.findall(text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        return _number(text)
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


def _retry_after(headers: dict[str, str]) -> float | None:
    seconds = None
    if (ms := _number(headers.get("retry-after-ms"))) is not None:
        seconds = ms / 1000
    elif (value := headers.get("retry-after")) is not None:
        seconds = _number(value)
        if seconds is None:  # an HTTP date
            try:
                when = email.utils.parsedate_to_datetime(value)
                seconds = max(0.0, when.timestamp() - time.time())
            except (TypeError, ValueError, IndexError, OverflowError):
                seconds = None
    elif headers.get("x-ratelimit-remaining-requests") == "0":
        seconds = _duration_s(headers.get("x-ratelimit-reset-requests"))
    return None if seconds is None else min(seconds, MAX_RETRY_AFTER_S)


def limit_rpm_of(headers: dict[str, str]) -> int | None:
    """The requests-per-minute limit the provider names in `headers` (lower-cased)."""
    for name in ("x-ratelimit-limit-requests", "anthropic-ratelimit-requests-limit"):
        value = _number(headers.get(name))
        if value is not None and value >= 1:
            return int(value)
    return None
