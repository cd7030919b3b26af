"""`durable tokens create|list|revoke` and `durable audit`: scoped API tokens and the
audit trail, read and written in the fleet's Redis (an operator's commands: whoever runs
them can reach Redis, which is more than any token grants)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from strands_durable.access import (
    DEFAULT_NAMESPACE,
    MAX_QUOTA_SESSIONS,
    MAX_QUOTA_STEPS,
    MAX_QUOTA_TOKENS,
    MAX_WEIGHT,
    AuditEntry,
    NamespaceQuota,
    Role,
)
from strands_durable.api.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    JsonOpt,
    app,
    checked_namespace,
    fail,
    out,
    print_json,
    run_async,
    with_store,
)
from strands_durable.api.cli.output import err, new_table, print_table
from strands_durable.api.schemas_access import TokenCreated, TokenOut
from strands_durable.models import now_ms, utc_text
from strands_durable.sessions import access, quotas
from strands_durable.sessions.token_quota import utc_day
from strands_durable.store.store import Store

tokens_app = typer.Typer(help="Scoped API tokens: create, list, revoke.", no_args_is_help=True)
app.add_typer(tokens_app, name="tokens")
quotas_app = typer.Typer(help="Namespaces' quotas of sessions not yet ended: set, list, "
                         "delete.", no_args_is_help=True)
app.add_typer(quotas_app, name="quotas")

DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


def cli_actor() -> str:
    """Who runs this command, as the audit trail names them (no token is involved)."""
    return access.local_actor("cli")


def parse_duration(text: str) -> float:
    """`90s`, `15m`, `12h`, `30d` (or plain seconds) as seconds; exit 2 otherwise."""
    unit = text[-1:].lower()
    number = text[:-1] if unit in DURATION_UNITS else text
    try:
        value = float(number) * DURATION_UNITS.get(unit, 1)
    except ValueError:
        raise fail(f"--expires-in {text[:40]!r}: expected a duration such as 90s, 15m, 12h "
                   "or 30d", EXIT_USAGE) from None
    if not 0 < value < float("inf"):
        raise fail(f"--expires-in {text[:40]!r}: must be more than 0", EXIT_USAGE)
    return value


@tokens_app.command("create")
def tokens_create(
    role: Annotated[Role, typer.Option(help="read, submit, operate or admin.")],
    namespace: Annotated[list[str], typer.Option(
        "--namespace", "-n", help="A namespace the token may use (repeatable); '*' for "
        "every one.")],
    name: Annotated[str, typer.Option(help="What the token is for (shown in lists).")] = "",
    expires_in: Annotated[str | None, typer.Option(
        "--expires-in", help="Expire after this long: 90s, 15m, 12h, 30d.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a token and print it: this once, it is kept nowhere (Redis holds its
    digest)."""
    expires_s = parse_duration(expires_in) if expires_in is not None else None

    async def body(store: Store) -> TokenCreated:
        issued = await access.create_token(store, role, namespace, name=name,
                                           expires_in_s=expires_s, actor=cli_actor(),
                                           source="cli")
        return TokenCreated(token=issued.token, info=TokenOut.of(issued.record, now_ms()))

    created = run_async(with_store(body, fleet=True))
    if as_json:
        print_json(created)
        return
    err.print(f"token {created.info.id}: {created.info.role.value} on "
              f"{', '.join(created.info.namespaces)}"
              + (f", expires {utc_text(created.info.expires_ms)}" if created.info.expires_ms
                 else "") + "; it is shown this once")
    print(created.token)


@tokens_app.command("list")
def tokens_list(as_json: JsonOpt = False) -> None:
    """Every token (never its text): id, name, role, namespaces, state."""

    async def body(store: Store) -> list[TokenOut]:
        now = now_ms()
        return [TokenOut.of(r, now) for r in await access.list_tokens(store)]

    items = run_async(with_store(body, fleet=True))
    if as_json:
        print_json(items)
        return
    table = new_table("id", "name", "role", "namespaces", "state", "created", "expires")
    for t in items:
        table.add_row(t.id, escape(t.name), t.role.value, escape(", ".join(t.namespaces)),
                      t.state, utc_text(t.created_ms, ""), utc_text(t.expires_ms, ""))
    print_table(table)


@tokens_app.command("revoke")
def tokens_revoke(token_id: Annotated[str, typer.Argument(help="The token's id.")],
                  as_json: JsonOpt = False) -> None:
    """Revoke a token: every API replica refuses it within a second."""

    async def body(store: Store) -> TokenOut:
        record = await access.revoke_token(store, token_id, actor=cli_actor(), source="cli")
        return TokenOut.of(record, now_ms())

    revoked = run_async(with_store(body, fleet=True))
    if as_json:
        print_json(revoked)
        return
    out.print(f"token {revoked.id} revoked")


@app.command("audit")
def audit(
    namespace: Annotated[str, typer.Option(
        "--namespace", "-n", envvar="DURABLE_NAMESPACE", help="Whose trail.",
        callback=checked_namespace("--namespace"))] = DEFAULT_NAMESPACE,
    limit: Annotated[int, typer.Option(min=1, max=access.MAX_AUDIT_PAGE,
                                       help="At most this many, newest first.")] = 50,
    as_json: JsonOpt = False,
) -> None:
    """The audit trail of a namespace: control actions and token changes, newest first."""

    async def body(store: Store) -> list[AuditEntry]:
        return await access.audit_page(store, namespace, limit)

    entries = run_async(with_store(body, fleet=True))
    if as_json:
        print_json(entries)
        return
    table = new_table("when", "actor", "action", "target", "from", "detail")
    for e in entries:
        table.add_row(utc_text(e.at_ms), escape(e.actor), e.action, escape(e.target),
                      escape(e.source), escape(e.detail))
    print_table(table)


NamespaceArg = Annotated[str, typer.Argument(help="The namespace.",
                                             callback=checked_namespace("namespace"))]


@quotas_app.command("set")
def quotas_set(
    namespace: NamespaceArg,
    running_sessions: Annotated[int | None, typer.Option(
        min=1, max=MAX_QUOTA_SESSIONS, help="Sessions not yet ended (running or paused) at "
        "once.")] = None,
    tokens_per_day: Annotated[int | None, typer.Option(
        min=1, max=MAX_QUOTA_TOKENS, help="Model tokens (input + output) of the "
        "namespace's steps per UTC day (checked at submit, until the next UTC day).")] = None,
    over: Annotated[str, typer.Option(
        help="Over the quota: refuse the submit (HTTP 429, exit 1), or queue its session "
        "(created paused, resumed by the scheduler as places free up).")] = "refuse",
    weight: Annotated[int | None, typer.Option(
        min=1, max=MAX_WEIGHT, help="The namespace's share of the workers' takes against "
        "other namespaces with steps waiting (fair dispatch; default 1).")] = None,
    steps_in_flight: Annotated[int | None, typer.Option(
        min=1, max=MAX_QUOTA_STEPS, help="The namespace's steps running at once; over it, "
        "its steps wait their turn at dispatch (never failed).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Set a namespace's quota (replacing the one it had)."""
    if over not in ("refuse", "queue"):
        raise fail(f"--over {over[:40]!r}: expected refuse or queue", EXIT_USAGE)
    if (running_sessions, tokens_per_day, weight, steps_in_flight) == (None,) * 4:
        raise fail("give --running-sessions, --tokens-per-day, --weight, --steps-in-flight "
                   "or more", EXIT_USAGE)
    quota = NamespaceQuota(namespace=namespace, running_sessions=running_sessions,
                           tokens_per_day=tokens_per_day, over=over, weight=weight,
                           steps_in_flight=steps_in_flight)

    async def body(store: Store) -> None:
        await quotas.set_quota(store, quota, actor=cli_actor(), source="cli")

    run_async(with_store(body, fleet=True))
    if as_json:
        print_json(quota)
        return
    limits = [f"at most {running_sessions} session(s) not yet ended"] if running_sessions else []
    limits += [f"{tokens_per_day} model token(s) a day"] if tokens_per_day else []
    said = f"{' and '.join(limits)}; over that, {over}" if limits else ""
    # Steps over their quota and a weight only order dispatch: nothing is refused.
    said += f"; at most {steps_in_flight} step(s) in flight" if steps_in_flight else ""
    said += f"; weight {weight}" if weight else ""
    out.print(f"namespace {namespace}: {said.removeprefix('; ')}")


@quotas_app.command("list")
def quotas_list(as_json: JsonOpt = False) -> None:
    """Every namespace's quota, and the model tokens its steps used today (UTC)."""

    async def body(store: Store) -> list[tuple[NamespaceQuota, int]]:
        day = utc_day(now_ms())
        return [(q, await store.tokens_used(q.namespace, day)) for q in await store.quotas()]

    found = run_async(with_store(body, fleet=True))
    if as_json:
        print_json([{**q.model_dump(), "tokens_today": used} for q, used in found])
        return
    table = new_table("namespace", "running sessions", "tokens today / per day", "over",
                      "weight", "steps in flight")
    for q, used in found:
        tokens = f"{used} / {q.tokens_per_day}" if q.tokens_per_day else f"{used} / -"
        table.add_row(q.namespace, str(q.running_sessions or "-"), tokens, q.over,
                      str(q.weight or 1), str(q.steps_in_flight or "-"))
    print_table(table)


@quotas_app.command("delete")
def quotas_delete(namespace: NamespaceArg, as_json: JsonOpt = False) -> None:
    """Remove a namespace's quota (its sessions are no longer counted)."""

    async def body(store: Store) -> bool:
        return await quotas.drop_quota(store, namespace, actor=cli_actor(), source="cli")

    dropped = run_async(with_store(body, fleet=True))
    if not dropped:
        raise fail(f"namespace {namespace} has no quota", EXIT_FAILED, "not_found")
    if as_json:
        print_json({"namespace": namespace, "deleted": True})
        return
    out.print(f"namespace {namespace}: quota removed")
