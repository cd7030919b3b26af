"""`durable tokens create|list|revoke` and `durable audit`: scoped API tokens and the
audit trail, read and written in the fleet's Redis (an operator's commands: whoever runs
them can reach Redis, which is more than any token grants)."""

from __future__ import annotations

import getpass
import socket
from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.markup import escape

from strands_durable.access import (
    DEFAULT_NAMESPACE,
    NAMESPACE_FORM,
    AuditEntry,
    Role,
    is_namespace,
)
from strands_durable.api.cli.common import (
    EXIT_USAGE,
    JsonOpt,
    app,
    fail,
    out,
    print_json,
    run_async,
    with_store,
)
from strands_durable.api.cli.output import err, new_table, print_table
from strands_durable.api.schemas_access import TokenCreated, TokenOut
from strands_durable.models import now_ms
from strands_durable.sessions import access
from strands_durable.store.store import Store

tokens_app = typer.Typer(help="Scoped API tokens: create, list, revoke.", no_args_is_help=True)
app.add_typer(tokens_app, name="tokens")

DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


def cli_actor() -> str:
    """Who runs this command, as the audit trail names them (no token is involved)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"cli:{user}@{socket.gethostname()}"[:200]


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


def when(ms: int | None) -> str:
    return "" if ms is None else datetime.fromtimestamp(ms / 1000, UTC).strftime(
        "%Y-%m-%d %H:%M:%SZ")


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
              + (f", expires {when(created.info.expires_ms)}" if created.info.expires_ms
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
                      t.state, when(t.created_ms), when(t.expires_ms))
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
    namespace: Annotated[str, typer.Option("--namespace", "-n", envvar="DURABLE_NAMESPACE",
                                           help="Whose trail.")] = DEFAULT_NAMESPACE,
    limit: Annotated[int, typer.Option(min=1, max=access.MAX_AUDIT_PAGE,
                                       help="At most this many, newest first.")] = 50,
    as_json: JsonOpt = False,
) -> None:
    """The audit trail of a namespace: control actions and token changes, newest first."""
    if not is_namespace(namespace):
        raise fail(f"--namespace {namespace[:80]!r} is not {NAMESPACE_FORM}", EXIT_USAGE)

    async def body(store: Store) -> list[AuditEntry]:
        return await access.audit_page(store, namespace, limit)

    entries = run_async(with_store(body, fleet=True))
    if as_json:
        print_json(entries)
        return
    table = new_table("when", "actor", "action", "target", "from", "detail")
    for e in entries:
        table.add_row(when(e.at_ms), escape(e.actor), e.action, escape(e.target),
                      escape(e.source), escape(e.detail))
    print_table(table)
