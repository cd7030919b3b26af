"""One exception root with a subclass per failure; every message names its subject."""

from __future__ import annotations

from typing import ClassVar


class DurableError(Exception):
    """Root of every error strands-durable raises on purpose.

    `code` is the machine name an interface shows (`{"error": {"code": ...}}`), and
    `details()` the fields it adds; the kind below (not the class) decides the answer."""

    code: ClassVar[str] = "error"

    def details(self) -> dict[str, object]:
        return {}

    def public_message(self) -> str:
        """The message for a caller who did not cause the internals it would name."""
        return str(self)


# The kinds. Every error below is one of them, and the kind alone decides how an interface
# answers (HTTP 422/404/409/503, CLI exit 2 or 1): raise the most specific class, and never
# a bare DurableError. Messages name the subject, not a CLI flag or an HTTP field.

class InvalidInput(DurableError):
    """What the caller sent is wrong (a spec, an id, a value); retrying it cannot succeed."""

    code = "invalid_input"


class NotFound(DurableError):
    """The thing named does not exist (or no longer does)."""

    code = "not_found"


class Conflict(DurableError):
    """The request is well-formed but the current state refuses it (a session's status,
    a lock held elsewhere, a concurrent change); it may succeed later or elsewhere."""

    code = "conflict"


class Unavailable(DurableError):
    """This process cannot serve the request: its configuration or a dependency is wrong."""

    code = "unavailable"


KINDS: tuple[type[DurableError], ...] = (InvalidInput, NotFound, Conflict, Unavailable)


def kind_of(exc: DurableError) -> type[DurableError] | None:
    """The kind `exc` is (its nearest kind class), or None for a bare DurableError."""
    return next((kind for kind in type(exc).__mro__ if kind in KINDS), None)


class ConfigError(Unavailable):
    """The process configuration (environment, CLI flags) is unusable."""

    code = "misconfigured"


class RedisUrlError(ConfigError):
    """DURABLE_REDIS_URL is unusable; the message shows the URL with its password masked."""

    def __init__(self, redacted_url: str, problem: str) -> None:
        self.problem = problem
        super().__init__(f"DURABLE_REDIS_URL {redacted_url}: {problem}")


class SpecError(InvalidInput):
    """A workflow spec is invalid: names the file, the field path and the problem."""

    code = "invalid_spec"

    def __init__(self, source: str, path: str, problem: str) -> None:
        self.source = source
        self.path = path
        self.problem = problem
        where = f"{source}: {path}" if path else source
        super().__init__(f"{where}: {problem}")

    def details(self) -> dict[str, object]:
        return {"source": self.source, "path": self.path, "problem": self.problem}


class TemplateError(InvalidInput):
    """A template failed to render at run time (undefined name, bad index...)."""

    code = "template_error"

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}")

    def details(self) -> dict[str, object]:
        return {"where": self.where, "problem": self.problem}


class InvalidId(InvalidInput):
    """An id from outside (a session id, a step key, an idempotency key...) is not of
    its documented form; nothing was read or written with it."""

    code = "invalid_id"

    def __init__(self, kind: str, value: object, expected: str) -> None:
        self.kind = kind
        self.value = value
        self.expected = expected
        shown = value if not isinstance(value, str) or len(value) <= 80 else value[:80] + "..."
        super().__init__(f"{kind} {shown!r} is not valid: expected {expected}")

    def details(self) -> dict[str, object]:
        return {"kind": self.kind, "expected": self.expected}


class IdempotencyConflict(Conflict):
    """An idempotency key already used with a different request (spec or variables)."""

    code = "idempotency_key_reused"

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(
            f"idempotency key {key!r} was already used with a different request (another "
            f"spec, other variables or another priority); a key stands for one request: "
            f"use a new key for a new request")

    def details(self) -> dict[str, object]:
        return {"key": self.key}


class SessionNotFound(NotFound):
    code = "session_not_found"

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"session {session_id!r} not found")

    def details(self) -> dict[str, object]:
        return {"session_id": self.session_id}


class InvalidTransition(Conflict):
    """An action the session's current status forbids (e.g. resume a completed session)."""

    code = "invalid_transition"

    def __init__(self, session_id: str, status: str, action: str) -> None:
        self.session_id = session_id
        self.status = status
        self.action = action
        super().__init__(f"session {session_id}: cannot {action} a session that is {status}")

    def details(self) -> dict[str, object]:
        return {"session_id": self.session_id, "status": self.status,
                "action": self.action}


class LockNotAcquired(Conflict):
    code = "session_busy"

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"lock {name!r} is held by someone else")

    def details(self) -> dict[str, object]:
        return {"lock": self.name}

    def public_message(self) -> str:
        return "another operator action holds this session; try again"


class LockLost(Conflict):
    code = "lock_lost"

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"lock {name!r} was lost (expired or taken over)")


class Overloaded(Unavailable):
    """This process has no room for the request now (a bounded stage is full); the same
    request may succeed a little later: `retry_after_s` says when to try again."""

    code = "overloaded"

    def __init__(self, message: str, retry_after_s: int) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(message)

    def details(self) -> dict[str, object]:
        return {"retry_after_s": self.retry_after_s}


class ProviderError(Unavailable):
    """A model provider is misconfigured or its package is missing."""

    code = "provider_error"


class ProviderStreamCutShort(Unavailable):
    """A model's reply stream ended cleanly (no error, no broken connection) before the
    provider's stop event: what came may be a part of the reply, so it is no reply. A
    transient error (worker/providers/transient.py): the turn is asked again, and the
    step fails naming this cause when the retries run out."""

    code = "provider_error"  # a provider's fault, as ProviderError's (not a new kind of answer)

    def __init__(self, provider: str, model_id: str | None = None) -> None:
        self.provider = provider
        self.model_id = model_id
        which = f"{provider}, model {model_id}" if model_id else provider
        super().__init__(f"the model's reply stream ended before its stop event ({which})")

    def details(self) -> dict[str, object]:
        return {"provider": self.provider, "model_id": self.model_id}


class StepFailed(Unavailable):
    """A step's execution failed; `retryable` says if the durable retry policy applies."""

    code = "step_failed"

    def __init__(self, session_id: str, step: str, problem: str, *, retryable: bool = True) -> None:
        self.session_id = session_id
        self.step = step
        self.problem = problem
        self.retryable = retryable
        super().__init__(f"session {session_id}, step {step}: {problem}")
