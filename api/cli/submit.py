"""`durable submit`: a workflow to the fleet, in a namespace, within its quota."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from strands_durable.access import DEFAULT_NAMESPACE
from strands_durable.api.cli.common import (
    JsonOpt,
    NamespaceOpt,
    PriorityOpt,
    ProviderOpt,
    ScriptOpt,
    ScriptReplaceOpt,
    VarOpt,
    app,
    checked,
    load,
    print_json,
    run_async,
    with_store,
)
from strands_durable.sessions.access import local_actor, record_action
from strands_durable.sessions.quotas import create_within_quota
from strands_durable.sessions.start import in_namespace
from strands_durable.store.keys import check_token
from strands_durable.store.store import Store


@app.command()
def submit(
    spec: Annotated[Path, typer.Argument(help="Workflow spec (strands-cli YAML).")],
    var: VarOpt = None,
    provider: ProviderOpt = None,
    script: ScriptOpt = None,
    script_replace: ScriptReplaceOpt = False,
    idempotency_key: Annotated[str | None, typer.Option(
        help="Same key, same request, same session: a repeated submit prints the first "
        "one; the key with a different spec, variables or priority is refused (exit 2).",
        callback=checked(lambda v: check_token("idempotency key", v)))] = None,
    priority: PriorityOpt = None, webhook: Annotated[str | None, typer.Option(
        help="POST the session's events to this URL, signed (docs/webhooks.md).")] = None,
    namespace: NamespaceOpt = DEFAULT_NAMESPACE,
    as_json: JsonOpt = False,
) -> None:
    """Submit a workflow to the fleet; prints its id (--json: {"session_id", "created"})."""
    from strands_durable.api.cli.webhooks import planned_submit

    async def body(store: Store) -> tuple[str, bool]:
        # Loaded and planned before Redis is touched: a refused spec writes no key.
        planned = in_namespace(planned_submit(load(spec, var, provider, script,
                                                   script_replace),
                                              idempotency_key, priority, webhook), namespace)
        await store.prepare()
        sid, created = await create_within_quota(store, planned)
        if created:
            await record_action(store, "submit", sid, actor=local_actor("cli"), source="cli",
                                namespace=namespace, detail=planned.workflow_name)
        return sid, created

    sid, created = run_async(with_store(body, fleet=True))
    if as_json:
        print_json({"session_id": sid, "created": created})
        return
    print(sid)
