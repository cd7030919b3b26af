"""One exception root with a subclass per failure; every message names its subject."""

from __future__ import annotations


class DurableError(Exception):
    """Root of every error strands-durable raises on purpose."""


# The kinds. Every error below is one of them, and the kind alone decides how an interface
# answers (HTTP 422/404/409/503, CLI exit 2 or 1): raise the most specific class, and never
# a bare DurableError. Messages name the subject, not a CLI flag or an HTTP field.

class InvalidInput(DurableError):
    """What the caller sent is wrong (a spec, an id, a value); retrying it cannot succeed."""


class NotFound(DurableError):
    """The thing named does not exist (or no longer does)."""


class Conflict(DurableError):
    """The request is well-formed but the current state refuses it (a session's status,
    a lock held elsewhere, a concurrent change); it may succeed later or elsewhere."""


class Unavailable(DurableError):
    """This process cannot serve the request: its configuration or a dependency is wrong."""


class ConfigError(Unavailable):
    """The process configuration (environment, CLI flags) is unusable."""


class RedisUrlError(ConfigError):
    """DURABLE_REDIS_URL is unusable; the message shows the URL with its password masked."""

    def __init__(self, redacted_url: str, problem: str) -> None:
        self.problem = problem
        super().__init__(f"DURABLE_REDIS_URL {redacted_url}: {problem}")


class SpecError(InvalidInput):
    """A workflow spec is invalid: names the file, the field path and the problem."""

    def __init__(self, source: str, path: str, problem: str) -> None:
        self.source = source
        self.path = path
        self.problem = problem
        where = f"{source}: {path}" if path else source
        super().__init__(f"{where}: {problem}")


class TemplateError(InvalidInput):
    """A template failed to render at run time (undefined name, bad index...)."""

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}")


class InvalidId(InvalidInput):
    """An id from outside (a session id, a step key, an idempotency key...) is not of
    its documented form; nothing was read or written with it."""

    def __init__(self, kind: str, value: object, expected: str) -> None:
        self.kind = kind
        self.value = value
        self.expected = expected
        shown = value if not isinstance(value, str) or len(value) <= 80 else value[:80] + "..."
        super().__init__(f"{kind} {shown!r} is not valid: expected {expected}")


class IdempotencyConflict(Conflict):
    """An idempotency key already used with a different request (spec or variables)."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(
            f"idempotency key {key!r} was already used with a different request (another "
            f"spec or other variables); a key stands for one request: use a new key for a "
            f"new request")


class SessionNotFound(NotFound):
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"session {session_id!r} not found")


class InvalidTransition(Conflict):
    """An action the session's current status forbids (e.g. resume a completed session)."""

    def __init__(self, session_id: str, status: str, action: str) -> None:
        self.session_id = session_id
        self.status = status
        self.action = action
        super().__init__(f"session {session_id}: cannot {action} a session that is {status}")


class LockNotAcquired(Conflict):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"lock {name!r} is held by someone else")


class LockLost(Conflict):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"lock {name!r} was lost (expired or taken over)")


class ProviderError(Unavailable):
    """A model provider is misconfigured or its package is missing."""


class StepFailed(DurableError):
    """A step's execution failed; `retryable` says if the durable retry policy applies."""

    def __init__(self, session_id: str, step: str, problem: str, *, retryable: bool = True) -> None:
        self.session_id = session_id
        self.step = step
        self.problem = problem
        self.retryable = retryable
        super().__init__(f"session {session_id}, step {step}: {problem}")
