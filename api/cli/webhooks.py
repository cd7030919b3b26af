"""`durable webhooks list|retry`: the webhook outbox the scheduler's leader delivers
from (scheduler/webhook_delivery.py), in the fleet's Redis. Never a secret: an entry
shows how it is signed and a fingerprint of the secret at most."""

from __future__ import annotations

from typing import Annotated

import typer
from pydantic import ValidationError
from rich.markup import escape

from strands_durable.api.cli.common import (
    JsonOpt,
    app,
    checked,
    env_settings,
    print_json,
    run_async,
    with_store,
)
from strands_durable.api.cli.output import new_table, print_table
from strands_durable.api.schemas_webhooks import WebhookList, WebhookRetried, WebhookStateName
from strands_durable.spec.loader import LoadedSpec
from strands_durable.store.records import NewSession
from strands_durable.store.store import Store
from strands_durable.store.webhooks import check_webhook_id
from strands_durable.webhooks import InvalidWebhook, WebhookSubscription

webhooks_app = typer.Typer(help="The webhook outbox: list entries, retry a dead one.",
                           no_args_is_help=True)
app.add_typer(webhooks_app, name="webhooks")


def planned_submit(loaded: LoadedSpec, idempotency_key: str | None, priority: int | None,
                   webhook_url: str | None) -> NewSession:
    """`durable submit`'s new session: planned, at its priority, with its webhook (the
    URL checked here, before Redis is touched: exit 2 naming the problem)."""
    from strands_durable.api.submission import with_webhook
    from strands_durable.sessions.start import new_session, with_priority

    planned = with_priority(new_session(loaded, idempotency_key), priority)
    if webhook_url is None:
        return planned
    try:
        hook = WebhookSubscription(url=webhook_url)
    except ValidationError as exc:
        raise InvalidWebhook(f"--webhook: {exc.errors()[0]['msg']}") from None
    return with_webhook(planned, hook, env_settings().webhook_allow_list)


def _checked_id(value: str) -> str:
    check_webhook_id(value)
    return value


@webhooks_app.command("list")
def webhooks_list(
    status: Annotated[WebhookStateName, typer.Option(
        "--status", help="Entries in this state: pending (with their next attempt), "
        "in_flight, delivered (the newest kept) or dead.")] = "pending",
    limit: Annotated[int, typer.Option(min=1, max=500, help="At most this many, "
                                       "newest first.")] = 50,
    as_json: JsonOpt = False,
) -> None:
    """The outbox's newest entries in one state."""
    settings = env_settings()

    from strands_durable.api.routes_webhooks import list_outbox

    async def body(store: Store) -> WebhookList:
        return await list_outbox(store, settings, status, limit, None)

    page = run_async(with_store(body, fleet=True))
    if as_json:
        print_json(page)
        return
    table = new_table("id", "event", "state", "url", "attempts", "last", "next / at")
    for w in page.items:
        last = escape(w.last_error or (str(w.last_status) if w.last_status else "-"))
        when = w.next_attempt_at or w.delivered_at or w.recorded_at or "-"
        table.add_row(w.id, w.event, w.state, escape(w.url), str(w.attempts), last, when)
    print_table(table)


@webhooks_app.command("retry")
def webhooks_retry(
    webhook_id: Annotated[str, typer.Argument(
        metavar="ID", help="The entry's webhook-id (msg_<session id>_<event id>).",
        callback=checked(_checked_id))],
    as_json: JsonOpt = False,
) -> None:
    """Deliver a dead (or pending) entry again now, with a fresh
    DURABLE_WEBHOOK_MAX_AGE_S of retries (the same webhook-id: receivers dedupe)."""
    settings = env_settings()

    from strands_durable.api.routes_webhooks import retry_outbox

    async def body(store: Store) -> WebhookRetried:
        return await retry_outbox(store, settings, webhook_id, None)

    retried = run_async(with_store(body, fleet=True))
    if as_json:
        print_json(retried)
        return
    print(f"{webhook_id}: due now (was {retried.was})")
