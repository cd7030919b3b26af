"""`durable`: the command line. Tables for people, --json for scripts, exit codes that
mean something (0 ok, 1 failed/not found, 2 bad input, 3 paused, 124 timed out)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from redis.exceptions import ConnectionError as RedisConnectionError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from scheduler.loader import LoadedSpec, load_script_file, load_spec_file, parse_var_args
from scheduler.status import session_status, summary
from sessions.connect import open_store
from sessions.errors import DurableError, SessionNotFound, SpecError
from sessions.models import SessionStatus, StepResult
from sessions.settings import DurableSettings
from sessions.store import Store

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_PAUSED, EXIT_TIMEOUT = 0, 1, 2, 3, 124

app = typer.Typer(help="Durable Strands Agents workflows on Redis Streams.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
sessions_app = typer.Typer(help="List, show and delete sessions.", no_args_is_help=True)
app.add_typer(sessions_app, name="sessions")

out = Console()
err = Console(stderr=True)
T = TypeVar("T")

VarOpt = Annotated[list[str] | None, typer.Option("--var", help="Input variable K=V.")]
ProviderOpt = Annotated[str | None, typer.Option(help="Override runtime.provider.")]
ScriptOpt = Annotated[Path | None, typer.Option(help="Rules for the scripted provider.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def fail(message: str, code: int = EXIT_FAILED) -> typer.Exit:
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command body; map expected failures to a message and an exit code."""
    try:
        return asyncio.run(coro)
    except SpecError as exc:
        raise fail(str(exc), EXIT_USAGE) from None
    except SessionNotFound as exc:
        raise fail(str(exc), EXIT_FAILED) from None
    except RedisConnectionError as exc:
        raise fail(f"cannot reach Redis ({exc}); set DURABLE_REDIS_URL", EXIT_FAILED) from None
    except DurableError as exc:
        raise fail(str(exc), EXIT_FAILED) from None


async def with_store(body: Callable[[Store], Awaitable[T]]) -> T:
    store = open_store(DurableSettings())
    try:
        return await body(store)
    finally:
        await store.redis.aclose()


def load(spec: Path, var: list[str] | None, provider: str | None,
         script: Path | None) -> LoadedSpec:
    return load_spec_file(spec, parse_var_args(var or []), provider=provider,
                          script=load_script_file(script) if script else None)


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, default=str) + "\n")


# -- run / submit ---------------------------------------------------------------------
@app.command()
def run(
    spec: Annotated[Path, typer.Argument(help="Workflow spec (strands-cli YAML).")],
    var: VarOpt = None,
    provider: ProviderOpt = None,
    script: ScriptOpt = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Write artifacts here.")] = None,
) -> None:
    """Run a workflow in this process (no server needed) and print its final response."""
    from scheduler.artifacts import safe_target, write_artifacts
    from worker.embedded import run_embedded

    async def body() -> int:
        loaded = load(spec, var, provider, script)
        if out_dir is not None and loaded.spec.outputs:
            for artifact in loaded.spec.outputs.artifacts:
                if "{" not in artifact.path:
                    safe_target(out_dir, artifact.path)  # refuse before any work is done
        started = time.perf_counter()

        def on_step(result: StepResult) -> None:
            tokens = result.input_tokens + result.output_tokens
            out.print(f"[green]✓[/green] {result.key:<12} {result.agent:<16} "
                      f"{tokens:>6} tokens {result.duration_ms / 1000:>7.2f}s",
                      highlight=False)

        outcome = await run_embedded(
            loaded, on_step,
            on_start=lambda sid: out.print(f"session {sid} ({loaded.spec.name}, "
                                           f"{loaded.spec.pattern.type})", highlight=False))
        record = outcome.record
        usage = record.token_usage
        out.print(f"{record.status.value} in {time.perf_counter() - started:.2f}s, "
                  f"{record.steps_committed} steps, {usage.total_input_tokens} in / "
                  f"{usage.total_output_tokens} out tokens", highlight=False)
        if record.status != SessionStatus.COMPLETED:
            err.print(f"[red]{record.status.value}:[/red] "
                      f"{record.error or record.paused_reason or ''}", highlight=False)
            return EXIT_PAUSED if record.status == SessionStatus.PAUSED else EXIT_FAILED
        if out_dir is not None:
            for path in write_artifacts(outcome.artifacts, out_dir):
                out.print(f"wrote {path}", highlight=False)
        out.rule("final response")
        out.print(outcome.final_response, markup=False, highlight=False)
        return EXIT_OK

    raise typer.Exit(run_async(body()))


@app.command()
def submit(
    spec: Annotated[Path, typer.Argument(help="Workflow spec (strands-cli YAML).")],
    var: VarOpt = None,
    provider: ProviderOpt = None,
    script: ScriptOpt = None,
    idempotency_key: Annotated[str | None, typer.Option(
        help="Same key, same session: a repeated submit returns the first one.")] = None,
) -> None:
    """Submit a workflow to the fleet; prints the session id alone."""
    from scheduler.start import start_session

    async def body(store: Store) -> str:
        await store.prepare()
        sid, _created = await start_session(store, load(spec, var, provider, script),
                                            idempotency_key)
        return sid

    print(run_async(with_store(body)))


# -- inspect -------------------------------------------------------------------------
@app.command()
def status(session_id: str, as_json: JsonOpt = False) -> None:
    """A session's status, token usage and pattern_state."""
    doc = run_async(with_store(lambda store: session_status(store, session_id)))
    if as_json:
        print_json(doc)
        return
    table = Table(show_header=False, box=None)
    for key in ("session_id", "status", "workflow_name", "pattern_type", "created_at",
                "updated_at", "steps_committed", "error", "paused_reason"):
        if doc.get(key) not in (None, ""):
            table.add_row(f"[bold]{key}[/bold]", str(doc[key]))
    usage = doc["token_usage"]
    table.add_row("[bold]tokens[/bold]", f"{usage['total_input_tokens']} in / "
                  f"{usage['total_output_tokens']} out  {usage['by_agent']}")
    out.print(table)
    out.print_json(data=doc["pattern_state"])


@app.command()
def wait(
    session_id: str,
    timeout: Annotated[float | None, typer.Option(help="Give up after S seconds.")] = None,
    poll: Annotated[float, typer.Option(help="Seconds between checks.")] = 0.2,
) -> None:
    """Wait for a session to stop running: exit 0 completed, 1 failed or cancelled,
    3 paused, 124 timed out."""

    async def body(store: Store) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            record = await store.get_session(session_id)
            if record.status == SessionStatus.COMPLETED:
                return EXIT_OK
            if record.status == SessionStatus.PAUSED:
                err.print(f"paused: {record.paused_reason or ''}", highlight=False)
                return EXIT_PAUSED
            if record.status.is_terminal:
                err.print(f"{record.status.value}: {record.error or ''}", highlight=False)
                return EXIT_FAILED
            if deadline is not None and time.monotonic() >= deadline:
                err.print(f"timed out after {timeout}s; session is {record.status.value}")
                return EXIT_TIMEOUT
            await asyncio.sleep(poll)

    raise typer.Exit(run_async(with_store(body)))


def event_docs(entries: list[tuple[str, dict[str, str]]]) -> list[dict[str, Any]]:
    docs = []
    for entry_id, f in entries:
        doc: dict[str, Any] = {"id": entry_id, "type": f.get("type", ""),
                               "step": f.get("step", ""), "attempt": int(f.get("attempt") or 0),
                               "worker": f.get("worker", ""), "at": f.get("at", "")}
        if f.get("detail"):
            doc["detail"] = f["detail"]
        docs.append(doc)
    return docs


@app.command()
def history(session_id: str, as_json: JsonOpt = False) -> None:
    """A session's events, oldest first."""

    async def body(store: Store) -> list[dict[str, Any]]:
        await store.get_session(session_id)  # a clear error for an unknown id
        return event_docs(await store.events(session_id))

    events = run_async(with_store(body))
    if as_json:
        print_json(events)
        return
    table = Table("at", "type", "step", "attempt", "worker", "detail")
    for e in events:
        table.add_row(e["at"], e["type"], e["step"], str(e["attempt"] or ""), e["worker"],
                      e.get("detail", ""))
    out.print(table)


# -- control -----------------------------------------------------------------------
@app.command()
def pause(session_id: str) -> None:
    """Pause at the next step boundary: running steps finish and commit."""
    from scheduler.control import pause as do_pause

    new = run_async(with_store(lambda store: do_pause(store, session_id)))
    out.print(f"{session_id} {new}", highlight=False)


@app.command()
def cancel(session_id: str) -> None:
    """Stop scheduling and mark the session cancelled."""
    from scheduler.control import cancel as do_cancel

    new = run_async(with_store(lambda store: do_cancel(store, session_id)))
    out.print(f"{session_id} {new}", highlight=False)


@app.command()
def resume(
    session_id: str,
    hitl_response: Annotated[str | None, typer.Option(
        help="The answer to the human-in-the-loop step the session waits for.")] = None,
    var: VarOpt = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="Raise a budget, e.g. budgets.max_tokens=20000.")] = None,
    spec: Annotated[Path | None, typer.Option(
        help="Continue with this spec; a changed hash is reported.")] = None,
) -> None:
    """Continue a paused or failed session: failed steps run again, nothing committed
    re-runs, token usage keeps accumulating."""
    from scheduler.control import parse_budget_sets
    from scheduler.control import resume as do_resume

    async def body(store: Store) -> str:
        new_spec = load_spec_file(spec) if spec else None
        outcome = await do_resume(
            store, session_id, hitl_response=hitl_response,
            variables=parse_var_args(var or []),
            budget_sets=parse_budget_sets(parse_var_args(set_ or [])), new_spec=new_spec)
        for note in outcome.notes:
            err.print(note, highlight=False)
        return outcome.status

    new = run_async(with_store(body))
    out.print(f"{session_id} {new}", highlight=False)


# -- sessions ------------------------------------------------------------------------
@sessions_app.command("list")
def sessions_list(
    status_filter: Annotated[SessionStatus | None, typer.Option("--status")] = None,
    limit: Annotated[int, typer.Option(help="At most this many, newest first.")] = 50,
    as_json: JsonOpt = False,
) -> None:
    """Sessions, most recently updated first."""

    async def body(store: Store) -> list[dict[str, Any]]:
        return [summary(r) for r in await store.list_sessions(status_filter, limit)]

    docs = run_async(with_store(body))
    if as_json:
        print_json(docs)
        return
    table = Table("session_id", "status", "workflow", "pattern", "steps", "tokens", "updated")
    for d in docs:
        usage = d["token_usage"]
        table.add_row(d["session_id"], d["status"], d["workflow_name"], d["pattern_type"],
                      str(d["steps_committed"]),
                      str(usage["total_input_tokens"] + usage["total_output_tokens"]),
                      d["updated_at"])
    out.print(table)


@sessions_app.command("show")
def sessions_show(session_id: str) -> None:
    """Everything about one session, as JSON."""
    doc = run_async(with_store(lambda store: session_status(store, session_id)))
    print_json(doc)


@sessions_app.command("delete")
def sessions_delete(session_id: str) -> None:
    """Delete a session and everything it stored."""
    from sessions.locks import locked

    async def body(store: Store) -> None:
        async with locked(store.redis, store.scripts,
                          store.keys.lock(f"session:{session_id}",
                                          store.keys.shard(session_id))):
            await store.delete_session(session_id)

    run_async(with_store(body))
    out.print(f"deleted {session_id}", highlight=False)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
