"""Every operation of the API's OpenAPI document has a method on both clients: a new
route without one fails here (add it to the clients and to CLIENT_METHODS)."""

from __future__ import annotations

from helpers.api import make_app

from strands_durable.client import AsyncClient, Client
from strands_durable.settings import DurableSettings

# operationId -> the clients' method (both have the same names); resumeSession with
# from_checkpoint is also `fork`.
CLIENT_METHODS = {
    "submitSession": "submit", "listSessions": "list", "getSession": "get",
    "listSessionEvents": "events", "streamSessionOutput": "stream",
    "listArtifacts": "artifacts", "getArtifact": "artifact", "deleteSession": "delete",
    "pauseSession": "pause", "cancelSession": "cancel", "resumeSession": "resume",
    "signalSession": "signal", "listCheckpoints": "checkpoints",
    "getCheckpoint": "checkpoint", "requeueSession": "requeue", "getHealth": "health",
    "getMetrics": "metrics", "listWorkers": "workers", "getQueue": "queue",
    "listTokens": "tokens", "createToken": "create_token", "revokeToken": "revoke_token",
    "listAudit": "audit",
    "listSchedules": "schedules", "getSchedule": "schedule",
    "createSchedule": "create_schedule", "updateSchedule": "update_schedule",
    "deleteSchedule": "delete_schedule", "pauseSchedule": "pause_schedule",
    "resumeSchedule": "resume_schedule", "triggerSchedule": "trigger_schedule",
    "listWebhooks": "webhooks", "retryWebhook": "retry_webhook",
    "exportSession": "export_session", "importSession": "import_session",
    "listQuotas": "quotas", "getQuota": "quota", "setQuota": "set_quota",
    "deleteQuota": "delete_quota",
}
# Routes for people, not programs: the console and its documentation pages.
NOT_FOR_CLIENTS = ("/ui", "/docs", "/redoc", "/openapi.json")


def operation_ids() -> set[str]:
    schema = make_app(DurableSettings()).openapi()
    return {op["operationId"] for path, ops in schema["paths"].items()
            if not path.startswith(NOT_FOR_CLIENTS) for op in ops.values()}


def test_every_operation_has_a_client_method() -> None:
    ids = operation_ids()
    assert ids - set(CLIENT_METHODS) == set(), "operations without a client method"
    assert set(CLIENT_METHODS) - ids == set(), "client methods of operations that are gone"
    for op, name in CLIENT_METHODS.items():
        for cls in (AsyncClient, Client):
            method = getattr(cls, name, None)
            assert callable(method), f"{cls.__name__}.{name} (for {op}) is missing"
            assert method.__doc__ and "`" in method.__doc__, f"{cls.__name__}.{name}: no example"

