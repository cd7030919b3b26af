"""Pydantic models at the HTTP edge: what requests carry and what responses promise
(they are also the OpenAPI schema at /docs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import Header, Path
from fastapi.routing import APIRoute
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from strands_durable.api.errors import ERROR_CODES
from strands_durable.errors import InvalidId
from strands_durable.models import (
    PRIORITY_DEFAULT,
    PRIORITY_MAX,
    PRIORITY_MIN,
    SessionStatus,
)
from strands_durable.sessions.checkpoints import Checkpoint
from strands_durable.sessions.status import SessionSummary
from strands_durable.spec.script import ScriptConfig
from strands_durable.store.keys import (
    MAX_NAME_CHARS,
    MAX_TOKEN_CHARS,
    check_name,
    check_session_id,
    check_token,
)
from strands_durable.webhooks import WebhookSubscription

# The largest checkpoint number taken (a session's commits are far fewer).
MAX_CHECKPOINT = 10**9


def _valid(check: Callable[[str], str]) -> AfterValidator:
    """The check of sessions/keys.py as a pydantic validator: a 422 naming the value."""

    def validate(value: str) -> str:
        try:
            return check(value)
        except InvalidId as exc:
            raise ValueError(str(exc)) from None
    return AfterValidator(validate)


# Ids in a path or body are checked here, before any route runs; the store refuses them
# too (sessions/keys.py), so no caller reaches a key name with an unchecked id.
SessionIdPath = Annotated[str, _valid(check_session_id), Path(
    description="A session id (a UUID, as `POST /v1/sessions` answers)",
    json_schema_extra={"format": "uuid"})]
ArtifactNamePath = Annotated[str, _valid(lambda v: check_name("artifact name", v)), Path(
    description="The artifact's path as `outputs.artifacts` names it",
    json_schema_extra={"maxLength": MAX_NAME_CHARS})]
StepKey = Annotated[str, _valid(lambda v: check_name("step key", v))]
IdempotencyKeyHeader = Annotated[str | None, _valid(
    lambda v: check_token("Idempotency-Key", v)), Header(
    alias="Idempotency-Key", min_length=1, max_length=MAX_TOKEN_CHARS,
    description="Same key, same request, same session: a repeated submit answers 200 with "
    "the first one; the key used with a different request is refused (409). 1 to 255 "
    "printable ASCII characters without spaces.")]

# A spec is YAML (or JSON) text, or the same document as a JSON object.
SpecBody = str | dict[str, Any]
SPEC_DOC = ("The workflow spec: strands-cli YAML (or JSON) text, or the same document as "
            "a JSON object. At most 256 KiB.")

EXAMPLE_SPEC = """version: 0
name: hello
runtime: {provider: scripted}
agents:
  a: {prompt: "You are helpful."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "Say hello to {{ who }}"}
inputs:
  values: {who: world}
"""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- requests -----------------------------------------------------------------------
class SubmitRequest(Strict):
    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "examples": [{"spec": EXAMPLE_SPEC, "variables": {"who": "Ada"}}]})

    spec: SpecBody = Field(description=SPEC_DOC)
    variables: dict[str, Any] = Field(
        default_factory=dict,
        description="Input variables; they beat `inputs.values` and defaults (like --var).")
    provider: str | None = Field(
        default=None, min_length=1, max_length=64,
        description="Override runtime.provider and every agent's provider.")
    script: ScriptConfig | None = Field(
        default=None, description="Rules for the `scripted` provider (replace runtime.script).")
    priority: int | None = Field(
        default=None, ge=PRIORITY_MIN, le=PRIORITY_MAX, strict=True,
        description=f"The session's share of a busy provider key ({PRIORITY_MIN}-"
        f"{PRIORITY_MAX}, default {PRIORITY_DEFAULT}): while sessions wait for a key's "
        "capacity, each has turns in proportion to its priority (--priority).")
    webhook: WebhookSubscription | None = Field(
        default=None, description="Where the session's events are POSTed (completed, "
        "failed, cancelled, paused, waiting_for_human), signed as Standard Webhooks says "
        "(--webhook); none: the fleet's DURABLE_WEBHOOK_URL, if set.")


class BudgetSets(Strict):
    """Raised limits (like `durable resume --set budgets.max_tokens=N`)."""

    max_tokens: int | None = Field(default=None, ge=1)
    max_steps: int | None = Field(default=None, ge=1)
    max_duration_s: int | None = Field(default=None, ge=1)


class ResumeRequest(Strict):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"budgets": {"max_tokens": 20000}},
        {"from_checkpoint": 1, "variables": {"topic": "kelp"}}]})

    variables: dict[str, Any] = Field(
        default_factory=dict, description="Variables to override from here on.")
    budgets: BudgetSets = Field(default_factory=BudgetSets)
    spec: SpecBody | None = Field(
        default=None, description="Continue with this spec (same pattern type); a changed "
        "hash is reported in `notes`.")
    from_checkpoint: int | None = Field(
        default=None, ge=1, le=MAX_CHECKPOINT,
        description="Fork a new session from checkpoint N of this one (the original is "
        "kept), with `variables` and `budgets` applied; answered 201 with the new "
        "session's Location. Not with `spec`.")

    @model_validator(mode="after")
    def _fork_takes_no_spec(self) -> ResumeRequest:
        if self.from_checkpoint is not None and self.spec is not None:
            raise ValueError("from_checkpoint forks the session with its own spec; it "
                             "cannot be combined with spec")
        return self


class SignalRequest(Strict):
    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "examples": [{"response": "approved"}]})

    response: str = Field(max_length=65_536,
                          description="The human's answer to the step the session waits for.")


class RequeueRequest(Strict):
    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "examples": [{"step": "step:2", "dry_run": True}, {"dead": True}]})

    step: StepKey | None = Field(default=None, min_length=1, max_length=256,
                             description="Only this step (a failed or dead-lettered one).")
    dead: bool = Field(default=False, description="Only dead-lettered steps.")
    dry_run: bool = Field(default=False, description="Report what would move; move nothing.")


# -- responses -----------------------------------------------------------------------
SESSION_EXAMPLE = "0b159fac-0487-470b-baf4-40d28dd52a70"


class ErrorInfo(BaseModel):
    code: str = Field(description="What went wrong, for programs (the message says it for "
                      "people).", json_schema_extra={"enum": list(ERROR_CODES)})
    message: str
    details: Any = None


ERROR_EXAMPLE: dict[str, Any] = {"error": {"code": "session_not_found",
                           "message": f"no session {SESSION_EXAMPLE}",
                           "details": {"session_id": SESSION_EXAMPLE}}}


class ErrorResponse(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [ERROR_EXAMPLE]})

    error: ErrorInfo


class SessionPage(BaseModel):
    items: list[SessionSummary]
    next_cursor: str | None = Field(
        description="Pass as ?cursor= for the next page; null when there is no more.")


class SubmitResponse(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"session_id": SESSION_EXAMPLE, "status": "running", "created": True}]})

    session_id: str
    status: SessionStatus
    created: bool = Field(description="False when the Idempotency-Key named an earlier "
                          "session (answered 200, not 201).")


class EventOut(BaseModel):
    id: str = Field(description="The event's stream id (SSE id when following).")
    type: str
    step: str = ""
    attempt: int = 0
    worker: str = ""
    at: str = ""
    detail: str | None = None
    tool: str | None = Field(default=None, description="Tool call events: the tool's name.")
    call: int | None = Field(default=None, description="Tool call events: the call's "
                             "ordinal within the step (1-based).")
    outcome: str | None = Field(default=None, description="tool_call_completed: ok, error "
                                "or timeout.")
    duration_ms: float | None = None


class EventPage(BaseModel):
    items: list[EventOut]
    last_id: str | None = Field(description="Pass as ?after= to read only newer events.")


class ArtifactInfo(BaseModel):
    name: str
    size_bytes: int


class ArtifactList(BaseModel):
    items: list[ArtifactInfo]


class ActionResponse(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"session_id": SESSION_EXAMPLE, "status": "paused", "notes": []}]})

    session_id: str
    status: str
    notes: list[str] = Field(default_factory=list)


class ForkResponse(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"session_id": "5d0c1f7e-2b8e-4c8a-9f0e-1a2b3c4d5e6f", "forked_from": SESSION_EXAMPLE,
         "checkpoint": 1, "status": "running"}]})

    session_id: str = Field(description="The new session.")
    forked_from: str
    checkpoint: int
    status: str


class CheckpointList(BaseModel):
    items: list[Checkpoint]


class RequeuedStep(BaseModel):
    session_id: str
    step: str
    agent: str
    failed_attempt: int = Field(description="It runs again as attempt 1.")
    dead_letters: list[str] = Field(description="Its dead-letter entries, dropped.")
    error: str


class SkippedEntry(BaseModel):
    session_id: str
    step: str
    entry: str
    reason: str
    dropped: bool


class RequeueResponse(BaseModel):
    dry_run: bool
    requeued: list[RequeuedStep]
    skipped: list[SkippedEntry]
    statuses: dict[str, str] = Field(description="Session id -> its status after (in a "
                                     "dry run: what it would be).")


class RedisHealth(BaseModel):
    ok: bool
    error: str | None = None


class WorkerHealth(BaseModel):
    recent: int = Field(description="Workers whose heartbeat is within window_s.")
    known: int = Field(description="Workers in the heartbeat hash, however old.")
    window_s: float
    names: list[str]


class VersionHealth(BaseModel):
    release: str = Field(description="This API process's strands-durable version.")
    data_format: int = Field(description="The data format this release reads and writes.")
    recorded_format: int | None = Field(
        default=None, description="The data format recorded in Redis (null: none yet, or "
        "Redis unreachable).")


class Health(BaseModel):
    status: Literal["ok", "degraded", "unavailable"] = Field(
        description="ok: Redis reachable and a worker seen recently; degraded: no recent "
        "worker; unavailable: Redis unreachable (503).")
    redis: RedisHealth | None = Field(
        default=None, description="Only with the bearer token (or when the server sets "
        "none): Redis's state and error.")
    workers: WorkerHealth | None = Field(
        default=None, description="Only with the bearer token (or when the server sets "
        "none): the workers seen, by consumer name.")
    version: VersionHealth | None = Field(
        default=None, description="Only with the bearer token (or when the server sets "
        "none): this release and the data formats.")


ERROR_DESCRIPTIONS = {
    401: "Missing, wrong, expired or revoked bearer token",
    403: "The token's role or namespaces do not allow this",
    429: "Too many failed sign-ins from this address (Retry-After)",
    404: "No such session",
    409: "The session's status forbids this action",
    413: "The request body (512 KiB) or the spec (DURABLE_MAX_SPEC_BYTES) is over its limit",
    415: "A request body that is not sent as JSON (Content-Type: application/json)",
    422: "Invalid request or spec (details name the field)",
    503: "Redis unreachable",
}


# Example answers of each error status (what /docs shows under it, one per code).
_SID = SESSION_EXAMPLE
ERROR_EXAMPLES: dict[int, list[tuple[str, str, dict[str, Any]]]] = {
    401: [("unauthorized", "missing, wrong, expired or revoked bearer token "
           "(Authorization: Bearer <token>)", {})],
    403: [("forbidden", "this token's role (read) may not do this: it needs operate",
           {"needs": "operate", "token": "3f9a0c7e1b2d"})],
    415: [("unsupported_media_type", "the request body must be JSON: send Content-Type: "
           "application/json (this one was 'text/plain')", {"content_type": "text/plain"})],
    429: [("too_many_failures", "too many failed sign-ins from this address; retry in 41s", {})],
    404: [("session_not_found", f"no session {_SID}", {"session_id": _SID}),
          ("checkpoint_not_found", f"session {_SID}: there is no checkpoint 9 (checkpoints "
           "1..3)", {"session_id": _SID, "n": 9, "count": 3}),
          ("artifact_not_found", f"session {_SID} has no artifact 'x.md'",
           {"session_id": _SID, "name": "x.md"})],
    409: [("invalid_transition", f"session {_SID} is completed; cannot pause it",
           {"session_id": _SID, "status": "completed", "action": "pause"}),
          ("idempotency_key_reused", "Idempotency-Key 'launch-1' was used with a different "
           "request", {"idempotency_key": "launch-1"}),
          ("nothing_to_requeue", f"session {_SID} has no failed or dead-lettered step",
           {"session_id": _SID, "step": None})],
    413: [("payload_too_large", "the request body is over 524288 bytes; the limit is "
           "524288 bytes", {"limit_bytes": 524288})],
    422: [("invalid_request", "body.spec: Field required",
           {"errors": [{"loc": ["body", "spec"], "msg": "Field required", "type": "missing"}]}),
          ("invalid_spec", "spec: pattern.type: 'chian' is not one of chain, workflow...", {})],
    503: [("redis_unavailable", "cannot reach Redis (Connection refused)", {}),
          ("overloaded", "the API is loading as many specs as it may (2 at once, "
           "DURABLE_API_RENDER_WORKERS; 8 waiting, DURABLE_API_RENDER_QUEUE); nothing was "
           "stored: try again in 2 s", {"retry_after_s": 2})],
}


def error_responses(*codes: int, **described: str) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for these error statuses (`e404="..."` rewords one)."""
    return {code: {"model": ErrorResponse,
                   "description": described.get(f"e{code}", ERROR_DESCRIPTIONS[code]),
                   "content": {"application/json": {"examples": _error_examples(code)}}}
            for code in codes}


def _error_examples(status: int) -> dict[str, Any]:
    return {code: {"summary": code, "value": {"error": {"code": code, "message": message,
                                                        "details": details}}}
            for code, message, details in ERROR_EXAMPLES[status]}


# Stable operation ids (clients generated from the schema keep their method names when
# a route's path or function changes): one per route function, by its name.
OPERATION_IDS = {
    "submit": "submitSession", "list_sessions": "listSessions", "get_session": "getSession",
    "events": "listSessionEvents", "stream": "streamSessionOutput",
    "artifacts": "listArtifacts", "artifact": "getArtifact", "delete_quota": "deleteQuota",
    "delete": "deleteSession", "pause": "pauseSession", "cancel": "cancelSession",
    "resume": "resumeSession", "signal": "signalSession", "checkpoints": "listCheckpoints",
    "checkpoint": "getCheckpoint", "requeue": "requeueSession", "healthz": "getHealth",
    "metrics": "getMetrics", "workers": "listWorkers", "queue": "getQueue",
    "list_tokens": "listTokens", "create_token": "createToken", "revoke_token": "revokeToken",
    "audit": "listAudit", "export_session": "exportSession", "import_session": "importSession",
    "list_quotas": "listQuotas", "get_quota": "getQuota", "set_quota": "setQuota",
    "list_webhooks": "listWebhooks", "retry_webhook": "retryWebhook",
    "list_schedules": "listSchedules", "get_schedule": "getSchedule",
    "create_schedule": "createSchedule", "update_schedule": "updateSchedule",
    "delete_schedule": "deleteSchedule", "pause_schedule": "pauseSchedule",
    "resume_schedule": "resumeSchedule", "trigger_schedule": "triggerSchedule",
}


def operation_id(route: APIRoute) -> str:
    """The route's stable id; a route missing from the table keeps its function's name
    (tests/api/test_openapi_polish.py asks for every one to be listed)."""
    return OPERATION_IDS.get(route.name, route.name)
