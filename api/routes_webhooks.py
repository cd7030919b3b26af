"""The webhook outbox over HTTP: the entries by state, and an operator's retry of one
(the same reads and writes `durable webhooks list/retry` make, store/webhooks.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query, Request

from strands_durable.api.auth import namespace_of
from strands_durable.api.deps import SettingsDep, StoreDep
from strands_durable.api.schemas import error_responses
from strands_durable.api.schemas_webhooks import (
    WebhookList,
    WebhookOut,
    WebhookRetried,
    WebhookStateName,
)
from strands_durable.api.wiring import api_router
from strands_durable.models import now_ms
from strands_durable.settings import DurableSettings
from strands_durable.store.store import Store
from strands_durable.store.webhooks import WebhookNotFound, check_webhook_id

router = api_router("/v1/webhooks", tags=["webhooks"])
MAX_LIST = 500


async def list_outbox(store: Store, settings: DurableSettings, state: WebhookStateName,
                      limit: int, namespace: str | None) -> WebhookList:
    """Shared with the client's Redis backend (namespace None: every one)."""
    rows = await store.list_webhooks(state, limit)
    return WebhookList(items=[WebhookOut.of(e, s, settings.webhook_secret) for e, s in rows
                              if namespace is None or e.namespace == namespace])


async def retry_outbox(store: Store, settings: DurableSettings, webhook_id: str,
                       namespace: str | None) -> WebhookRetried:
    check_webhook_id(webhook_id)
    entry, _state = await store.webhook_entry(webhook_id)
    if namespace is not None and entry.namespace != namespace:
        raise WebhookNotFound(f"no webhook {webhook_id}")  # another tenant's is not shown
    entry, was = await store.retry_webhook(webhook_id, now_ms())
    return WebhookRetried(id=webhook_id, was="dead" if was == "dead" else "pending",
                          webhook=WebhookOut.of(entry, "pending", settings.webhook_secret))


@router.get("", response_model=WebhookList)
async def list_webhooks(
    request: Request, store: StoreDep, settings: SettingsDep,
    status: Annotated[WebhookStateName, Query(description="Entries in this state")] = "pending",
    limit: Annotated[int, Query(ge=1, le=MAX_LIST)] = 50,
) -> WebhookList:
    """The webhook outbox's newest entries in one state (pending ones include their next
    attempt's time, dead ones their last error); never a secret."""
    return await list_outbox(store, settings, status, limit, namespace_of(request))


@router.post("/{webhook_id}/retry", response_model=WebhookRetried,
             responses=error_responses(404, 409, e409="The entry is being delivered, or "
                                                      "was delivered"))
async def retry_webhook(
    request: Request, store: StoreDep, settings: SettingsDep,
    webhook_id: Annotated[str, Path(max_length=120, description="The entry's webhook-id")],
) -> WebhookRetried:
    """Deliver a dead (or pending) entry now, with a fresh DURABLE_WEBHOOK_MAX_AGE_S of
    retries; the same webhook-id, so a receiver that has it dedupes."""
    return await retry_outbox(store, settings, webhook_id, namespace_of(request))
