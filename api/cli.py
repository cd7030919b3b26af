"""`durable`: the command line. Tables for people, --json for scripts, exit codes that
mean something (0 ok, 1 failed/not found, 2 bad input, 3 paused, 124 timed out)."""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import ValidationError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from strands_durable.errors import (
    DurableError,
    IdempotencyConflict,
    InvalidId,
    RedisUrlError,
    SessionNotFound,
    SpecError,
    TemplateError,
)
from strands_durable.models import SessionStatus, StepResult
from strands_durable.scheduler.operations.history import event_docs
from strands_durable.scheduler.operations.status import session_status, summary
from strands_durable.scheduler.spec.loader import (
    LoadedSpec,
    load_script_file,
    load_spec_file,
    parse_var_args,
)
from strands_durable.settings import (
    DEFAULT_REDIS_URL,
    DurableSettings,
    Limits,
    describe_settings_error,
)
from strands_durable.store.connect import open_store
from strands_durable.store.keys import check_name, check_session_id, check_token
from strands_durable.store.redis_url import redact
from strands_durable.store.store import Store

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_PAUSED, EXIT_TIMEOUT = 0, 1, 2, 3, 124

app = typer.Typer(help="Durable Strands Agents workflows on Redis Streams.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
sessions_app = typer.Typer(help="List, show and delete sessions.", no_args_is_help=True)
app.add_typer(sessions_app, name="sessions")

out = Console(emoji=False)  # step keys like node:ship:1 are data, not emoji codes
err = Console(stderr=True, emoji=False)
T = TypeVar("T")

VarOpt = Annotated[list[str] | None, typer.Option("--var", help="Input variable K=V.")]
ProviderOpt = Annotated[str | None, typer.Option(help="Override runtime.provider.")]
ScriptOpt = Annotated[Path | None, typer.Option(help="Rules for the scripted provider.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def checked(check: Callable[[str], str]) -> Callable[[str | None], str | None]:
    """A typer callback: an id not of its documented form is a usage error (exit 2)
    naming it, before anything is read or written."""

    def callback(value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return check(value)
        except InvalidId as exc:
            raise fail(str(exc), EXIT_USAGE) from None

    return callback


SessionIdArg = Annotated[str, typer.Argument(
    help="A session id (a UUID, as `durable submit` prints).",
    callback=checked(check_session_id))]


def exit_code(status: SessionStatus) -> int:
    """Of a session no longer running: 0 completed, 3 paused, 1 failed or cancelled."""
    if status == SessionStatus.COMPLETED:
        return EXIT_OK
    return EXIT_PAUSED if status == SessionStatus.PAUSED else EXIT_FAILED


def fail(message: str, code: int = EXIT_FAILED) -> typer.Exit:
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command body; map expected failures to a message and an exit code."""
    try:
        return asyncio.run(coro)
    except (SpecError, TemplateError, InvalidId, IdempotencyConflict) as exc:
        # A template that cannot render when the session starts (refused by the
        # sandbox, over a limit) is a bad spec, like any other.
        raise fail(str(exc), EXIT_USAGE) from None
    except ValidationError as exc:
        if exc.title not in (DurableSettings.__name__, Limits.__name__):
            raise
        raise settings_error(exc) from None
    except SessionNotFound as exc:
        raise fail(str(exc), EXIT_FAILED) from None
    except (RedisConnectionError, RedisTimeoutError) as exc:
        raise fail(redis_unreachable(exc), EXIT_FAILED) from None
    except RedisUrlError as exc:
        raise fail(str(exc), EXIT_USAGE) from None
    except DurableError as exc:
        raise fail(str(exc), EXIT_FAILED) from None


def settings_error(exc: ValidationError) -> typer.Exit:
    return fail(describe_settings_error(exc), EXIT_USAGE)


def redis_unreachable(exc: Exception) -> str:
    """Where we tried (the password masked), what went wrong, and a hint for the usual
    mistake: a TLS URL against a plain-text port answers nothing until the timeout."""
    url = os.environ.get("DURABLE_REDIS_URL", DEFAULT_REDIS_URL)
    hint = ""
    if isinstance(exc, RedisTimeoutError) and url.lower().startswith("rediss"):
        hint = "; is that port TLS? a plain-text Redis never answers a TLS handshake"
    return f"cannot reach Redis at {redact(url)} ({exc}){hint}; check DURABLE_REDIS_URL"


def env_settings() -> DurableSettings:
    """DURABLE_* settings; a bad value is a usage error naming the variable."""
    try:
        return DurableSettings()
    except ValidationError as exc:
        raise settings_error(exc) from None


async def with_store(body: Callable[[Store], Awaitable[T]]) -> T:
    store = open_store(env_settings())
    try:
        return await body(store)
    finally:
        await store.close()


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
    auto_resume: Annotated[bool, typer.Option(
        "--auto-resume", help="Continue the latest failed or paused session of this spec "
        "(same hash) instead of starting anew; needs DURABLE_REDIS_URL.")] = False,
) -> None:
    """Run a workflow in this process (no server needed) and print its final response."""
    from strands_durable.api.run_resume import latest_resumable, persistent, resume_embedded
    from strands_durable.scheduler.planning.artifacts import (
        ArtifactPathError,
        safe_target,
        write_artifacts,
    )
    from strands_durable.worker.embedded import embedded_settings, run_embedded

    async def body() -> int:
        loaded = load(spec, var, provider, script)
        if out_dir is not None and loaded.spec.outputs:
            for i, artifact in enumerate(loaded.spec.outputs.artifacts):
                if "{" not in artifact.path:
                    try:  # refuse before any work is done
                        safe_target(out_dir, artifact.path)
                    except ArtifactPathError as exc:
                        raise SpecError(str(spec), f"outputs.artifacts[{i}].path",
                                        str(exc)) from None
        started = time.perf_counter()

        def on_step(result: StepResult) -> None:
            tokens = result.input_tokens + result.output_tokens
            out.print(f"[green]✓[/green] {result.key:<12} {result.agent:<16} "
                      f"{tokens:>6} tokens {result.duration_ms / 1000:>7.2f}s",
                      highlight=False)

        def print_notes(notes: list[str]) -> None:
            for note in notes:
                err.print(note, highlight=False, soft_wrap=True)

        def on_earlier_step(result: StepResult, before: bool) -> None:
            if not before:
                on_step(result)
                return
            out.print(f"[dim]· {result.key:<12} {result.agent:<16} {result.tokens:>6} tokens"
                      f"  (committed before)[/dim]", highlight=False)

        settings = embedded_settings()
        resumable = await latest_resumable(settings, loaded) if auto_resume else None
        if auto_resume and not persistent(settings):
            err.print("--auto-resume: the embedded store keeps nothing between runs; set "
                      "DURABLE_REDIS_URL to resume across runs. Starting a new session.",
                      highlight=False, soft_wrap=True)
        elif auto_resume and resumable is None:
            err.print(f"--auto-resume: no failed or paused session of this spec "
                      f"({loaded.spec_hash[:12]}); starting a new one", highlight=False,
                      soft_wrap=True)
        if resumable is not None:
            out.print(f"resuming session {resumable} ({loaded.spec.name}, "
                      f"{loaded.spec.pattern.type})", highlight=False, soft_wrap=True)
            outcome = await resume_embedded(
                settings, resumable, on_earlier_step, parse_var_args(var or []),
                on_notes=print_notes)
        else:
            outcome = await run_embedded(
                loaded, on_step, settings=settings,
                on_start=lambda sid: out.print(f"session {sid} ({loaded.spec.name}, "
                                               f"{loaded.spec.pattern.type})",
                                               highlight=False))
        record = outcome.record
        usage = record.token_usage
        out.print(f"{record.status.value} in {time.perf_counter() - started:.2f}s, "
                  f"{record.steps_committed} steps, {usage.total_input_tokens} in / "
                  f"{usage.total_output_tokens} out tokens", highlight=False)
        if record.status != SessionStatus.COMPLETED:
            err.print(f"[red]{record.status.value}:[/red] "
                      f"{record.error or record.paused_reason or ''}", highlight=False)
            return exit_code(record.status)
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
        help="Same key, same request, same session: a repeated submit prints the first "
        "one; the key with a different spec or variables is refused (exit 2).",
        callback=checked(lambda v: check_token("idempotency key", v)))] = None,
) -> None:
    """Submit a workflow to the fleet; prints the session id alone."""
    from strands_durable.scheduler.operations.start import new_session

    async def body(store: Store) -> str:
        # Loaded and planned before Redis is touched: a refused spec writes no key.
        planned = new_session(load(spec, var, provider, script), idempotency_key)
        await store.prepare()
        sid, _created = await store.create_session(planned)
        return sid

    print(run_async(with_store(body)))


# -- inspect -------------------------------------------------------------------------
@app.command()
def status(session_id: SessionIdArg, as_json: JsonOpt = False) -> None:
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


def _timeout_s(value: float | None) -> float | None:
    """`nan` or `inf` would wait forever and a negative time out at once: refused."""
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise typer.BadParameter(f"{value} is not a finite number of seconds, 0 or more")
    return value


def _interval_s(value: float) -> float:
    if not (math.isfinite(value) and 0.01 <= value <= 3600):
        raise typer.BadParameter(f"{value} is not a number of seconds from 0.01 to 3600")
    return value


TimeoutOption = Annotated[float | None, typer.Option(help="Give up after S seconds.",
                                                     callback=_timeout_s)]


@app.command()
def wait(
    session_id: SessionIdArg,
    timeout: TimeoutOption = None,
    poll: Annotated[float, typer.Option(help="Seconds between checks.",
                                        callback=_interval_s)] = 0.2,
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


@app.command()
def history(session_id: SessionIdArg, as_json: JsonOpt = False) -> None:
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
def pause(session_id: SessionIdArg) -> None:
    """Pause at the next step boundary: running steps finish and commit."""
    from strands_durable.scheduler.operations.control import pause as do_pause

    new = run_async(with_store(lambda store: do_pause(store, session_id)))
    out.print(f"{session_id} {new}", highlight=False)


@app.command()
def cancel(session_id: SessionIdArg) -> None:
    """Stop scheduling and mark the session cancelled."""
    from strands_durable.scheduler.operations.control import cancel as do_cancel

    new = run_async(with_store(lambda store: do_cancel(store, session_id)))
    out.print(f"{session_id} {new}", highlight=False)


@app.command()
def resume(
    session_id: SessionIdArg,
    hitl_response: Annotated[str | None, typer.Option(
        help="The answer to the human-in-the-loop step the session waits for.")] = None,
    var: VarOpt = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="Raise a budget (budgets.max_tokens=20000) or set an input "
        "variable (topic=x).")] = None,
    spec: Annotated[Path | None, typer.Option(
        help="Continue with this spec; a changed hash is reported.")] = None,
    from_checkpoint: Annotated[int | None, typer.Option(
        "--from-checkpoint", metavar="N",
        help="Fork a NEW session from checkpoint N (see `durable checkpoints`) with "
             "--var/--set applied; prints its id. The original is kept.")] = None,
) -> None:
    """Continue a paused or failed session: failed steps run again, nothing committed
    re-runs, token usage keeps accumulating."""
    from strands_durable.scheduler.operations.control import resume as do_resume

    if from_checkpoint is not None:
        fork_checkpoint(session_id, from_checkpoint, var, set_,
                        other_flags=[flag for flag, given in (
                            ("--hitl-response", hitl_response is not None),
                            ("--spec", spec is not None)) if given])
        return

    variables, budgets = resume_inputs(var, set_)

    async def body(store: Store) -> str:
        new_spec = load_spec_file(spec) if spec else None
        outcome = await do_resume(
            store, session_id, hitl_response=hitl_response, variables=variables,
            budget_sets=budgets, new_spec=new_spec)
        for note in outcome.notes:
            err.print(note, highlight=False)
        return outcome.status

    new = run_async(with_store(body))
    out.print(f"{session_id} {new}", highlight=False)


def resume_inputs(var: list[str] | None, set_: list[str] | None
                  ) -> tuple[dict[str, Any], dict[str, int]]:
    """Variables (`--var`, and `--set` of a non-budget) and budgets (`--set`) of a
    resume or fork; a malformed one is a usage error."""
    from strands_durable.scheduler.operations.control import parse_sets

    try:
        set_variables, budgets = parse_sets(parse_var_args(set_ or [], "--set"))
        return {**set_variables, **parse_var_args(var or [])}, budgets
    except DurableError as exc:
        raise fail(str(exc), EXIT_USAGE) from None


# -- operator: requeue, checkpoints, watch, fleet -------------------------------------
def fork_checkpoint(session_id: str, n: int, var: list[str] | None, set_: list[str] | None,
                    other_flags: list[str]) -> None:
    """`durable resume SID --from-checkpoint N`: print the new session's id alone."""
    from strands_durable.scheduler.operations.checkpoints import fork_from_checkpoint

    if other_flags:
        raise fail(f"--from-checkpoint forks a new session; it cannot be combined with "
                   f"{' or '.join(other_flags)}", EXIT_USAGE)
    if n < 1:
        raise fail(f"--from-checkpoint {n}: checkpoints are numbered from 1", EXIT_USAGE)
    variables, budgets = resume_inputs(var, set_)

    new = run_async(with_store(lambda store: fork_from_checkpoint(
        store, session_id, n, variables=variables, budget_sets=budgets)))
    err.print(f"forked {session_id} at checkpoint {n}", highlight=False, soft_wrap=True)
    print(new)


@app.command()
def requeue(
    session_id: Annotated[str | None, typer.Argument(
        help="The session whose failed or dead-lettered steps to requeue.",
        callback=checked(check_session_id))] = None,
    step: Annotated[str | None, typer.Option(
        "--step", metavar="KEY", help="Only this step (e.g. step:2).",
        callback=checked(lambda v: check_name("step key", v)))] = None,
    dead: Annotated[bool, typer.Option(
        "--dead", help="Dead-lettered entries only; without a session id, every one.")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Show what would move; change nothing.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Put failed or dead-lettered steps back on the stream: attempts reset, a
    step_requeued event recorded, the session running again."""
    from strands_durable.scheduler.operations.requeue import report_lines
    from strands_durable.scheduler.operations.requeue import requeue as do_requeue

    if session_id is None and not dead:
        raise fail("requeue: give a session id, or --dead for every dead-lettered entry",
                   EXIT_USAGE)
    if session_id is None and step is not None:
        raise fail("requeue: --step needs a session id", EXIT_USAGE)
    report = run_async(with_store(lambda store: do_requeue(
        store, session_id, step=step, dead=dead, dry_run=dry_run)))
    if as_json:
        print_json(report.to_dict())
        return
    lines = report_lines(report)
    if not lines:
        out.print("no dead-lettered entries", highlight=False)
    for line in lines:
        out.print(line, highlight=False, markup=False, soft_wrap=True)


@app.command()
def checkpoints(
    session_id: SessionIdArg,
    n: Annotated[int | None, typer.Argument(
        help="Show this checkpoint in full, with its pattern_state.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """A session's checkpoints (one per commit): type, step, time, clean or not."""
    from strands_durable.scheduler.operations.checkpoints import get_checkpoint, list_checkpoints

    if n is not None and n < 1:
        raise fail(f"checkpoint {n}: checkpoints are numbered from 1", EXIT_USAGE)
    if n is not None:
        doc = run_async(with_store(lambda store: get_checkpoint(store, session_id, n)))
        if as_json:
            print_json(doc)
            return
        table = Table(show_header=False, box=None)
        for key in ("n", "type", "step", "attempt", "agent", "at", "status", "clean",
                    "tokens_total", "steps_committed"):
            table.add_row(f"[bold]{key}[/bold]", escape(str(doc[key])))
        out.print(table)
        out.print_json(data=doc["pattern_state"])
        return
    docs = run_async(with_store(lambda store: list_checkpoints(store, session_id)))
    if as_json:
        print_json(docs)
        return
    table = Table("n", "at", "type", "step", "agent", "attempt", "status", "clean", "tokens")
    for d in docs:
        table.add_row(str(d["n"]), d["at"], d["type"], d["step"], d["agent"],
                      str(d["attempt"]), d["status"], "yes" if d["clean"] else "no",
                      str(d["tokens_total"]))
    out.print(table)


@app.command()
def watch(
    session_id: SessionIdArg,
    timeout: TimeoutOption = None,
    poll: Annotated[float, typer.Option(help="Seconds between reads.",
                                        callback=_interval_s)] = 0.2,
) -> None:
    """Live progress of a session until it stops running; exit codes as `wait`."""
    from strands_durable.api.watch import watch as do_watch

    record, timed_out = run_async(with_store(
        lambda store: do_watch(store, session_id, out, poll_s=poll, timeout_s=timeout)))
    if timed_out:
        err.print(f"timed out after {timeout}s; session is {record.status.value}")
        raise typer.Exit(EXIT_TIMEOUT)
    raise typer.Exit(exit_code(record.status))


@app.command()
def workers(
    alive: Annotated[bool, typer.Option("--alive", help="Only live workers.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """The workers: consumer name, host/pid, running steps, pending entries, heartbeat."""
    from strands_durable.store.fleet import list_workers

    infos = [w for w in run_async(with_store(list_workers)) if w.alive or not alive]
    if as_json:
        print_json([w.to_dict() for w in infos])
        return
    table = Table("consumer", "host", "pid", "alive", "last seen", "running", "pending")
    for w in infos:
        seen = f"{w.last_seen_age_s:.1f}s ago" if w.last_seen_age_s is not None else "never"
        table.add_row(w.consumer, w.host, str(w.pid or ""),
                      "[green]yes[/green]" if w.alive else "[red]no[/red]", seen,
                      escape("\n".join(w.running)) or "-", str(w.pending))
    out.print(table)


@app.command()
def queue(as_json: JsonOpt = False) -> None:
    """Per shard and in total: stream length, lag, pending, dead letters, timers due."""
    from strands_durable.store.fleet import queue_stats

    stats = run_async(with_store(queue_stats))
    if as_json:
        print_json(stats.to_dict())
        return
    table = Table("shard", "length", "lag", "pending", "consumers", "dead letters", "timers",
                  "due now")
    for sh in stats.shards:
        table.add_row(str(sh.shard), str(sh.length), str(sh.lag), str(sh.pending),
                      str(sh.consumers), str(sh.dead_letters), str(sh.timers),
                      str(sh.timers_due))
    total = stats.total
    table.add_row("[bold]total[/bold]", str(total["length"]), str(total["lag"]),
                  str(total["pending"]), "", str(total["dead_letters"]), str(total["timers"]),
                  str(total["timers_due"]))
    out.print(table)


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
def sessions_show(session_id: SessionIdArg) -> None:
    """Everything about one session, as JSON."""
    doc = run_async(with_store(lambda store: session_status(store, session_id)))
    print_json(doc)


@sessions_app.command("delete")
def sessions_delete(session_id: SessionIdArg) -> None:
    """Delete a session and everything it stored."""
    from strands_durable.scheduler.operations.deletion import delete_session

    run_async(with_store(lambda store: delete_session(store, session_id)))
    out.print(f"deleted {session_id}", highlight=False)


@sessions_app.command("cleanup")
def sessions_cleanup(
    max_age_days: Annotated[float, typer.Option(
        "--max-age-days", help="Delete ended sessions last updated more than N days ago.")],
    keep_completed: Annotated[bool, typer.Option(
        "--keep-completed", help="Only failed and cancelled ones.")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="List what would be deleted; delete nothing.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Delete completed, failed and cancelled sessions older than N days (never running
    or paused ones)."""
    import math

    from strands_durable.scheduler.operations.cleanup import cleanup_sessions

    if not math.isfinite(max_age_days) or max_age_days < 0:
        raise fail(f"--max-age-days {max_age_days}: must be a number of days >= 0", EXIT_USAGE)
    ids = run_async(with_store(lambda store: cleanup_sessions(
        store, max_age_days=max_age_days, keep_completed=keep_completed, dry_run=dry_run)))
    if as_json:
        print_json({"dry_run": dry_run, "deleted": [] if dry_run else ids,
                    "would_delete": ids if dry_run else []})
        return
    for sid in ids:
        out.print(f"{'would delete' if dry_run else 'deleted'} {sid}", highlight=False,
                  soft_wrap=True)
    out.print(f"{len(ids)} session(s) {'would be ' if dry_run else ''}deleted",
              highlight=False)


# -- HTTP API ------------------------------------------------------------------------
@app.command("api")
def api_serve(
    host: Annotated[str | None, typer.Option(help="Default DURABLE_API_HOST.")] = None,
    port: Annotated[int | None, typer.Option(help="Default DURABLE_API_PORT.",
                                             min=1, max=65535)] = None,
) -> None:
    """Serve the HTTP API with uvicorn (OpenAPI at /docs)."""
    import uvicorn

    from strands_durable.api.app import create_app

    settings = env_settings()
    # Live event streams would hold a graceful shutdown open: give them 5 s.
    uvicorn.run(create_app(settings), host=host or settings.api_host,
                port=port or settings.api_port, timeout_graceful_shutdown=5)


# -- scheduler role ------------------------------------------------------------------
@app.command("scheduler")
def scheduler_serve(
    metrics_port: Annotated[int | None, typer.Option(
        help="Serve /metrics here (0: off). Default DURABLE_METRICS_PORT.")] = None,
) -> None:
    """Run the scheduler role: promote due timers, enforce max_duration_s, flag stuck
    sessions. Any number of replicas; one leads. Stops on SIGTERM."""
    from strands_durable.scheduler.role.service import run_scheduler

    settings = env_settings()
    if metrics_port is not None and not 0 <= metrics_port <= 65535:
        raise fail(f"--metrics-port {metrics_port}: not a port (0-65535)", EXIT_USAGE)
    run_async(run_scheduler(settings, metrics_port))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
