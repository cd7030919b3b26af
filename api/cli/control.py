"""Commands that change a session: pause, cancel, resume (and fork), requeue."""

from __future__ import annotations

import os
from collections.abc import Awaitable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from strands_durable.api.cli.common import (
    EXIT_USAGE,
    AllowHostOpt,
    JsonOpt,
    SessionIdArg,
    VarOpt,
    app,
    checked,
    env_settings,
    err,
    fail,
    out,
    print_json,
    run_async,
    with_store,
)
from strands_durable.errors import DurableError
from strands_durable.sessions.access import local_actor, record_action
from strands_durable.spec.loader import load_spec_file, parse_var_args
from strands_durable.store.keys import check_name, check_session_id
from strands_durable.store.store import Store

T = TypeVar("T")


async def audited(action: Awaitable[T], store: Store, name: str, session_id: str) -> T:
    """`action` done, then recorded in the session's namespace's audit trail."""
    done = await action
    await record_action(store, name, session_id, actor=local_actor("cli"), source="cli")
    return done


def print_new_status(session_id: str, new: str, as_json: bool) -> None:
    if as_json:
        print_json({"session_id": session_id, "status": new})
    else:
        out.print(f"{session_id} {new}", highlight=False)


@app.command()
def pause(session_id: SessionIdArg, as_json: JsonOpt = False) -> None:
    """Pause at the next step boundary: running steps finish and commit."""
    from strands_durable.sessions.control import pause as do_pause

    new = run_async(with_store(lambda store: audited(do_pause(store, session_id), store,
                                                     "pause", session_id)))
    print_new_status(session_id, new, as_json)


@app.command()
def cancel(session_id: SessionIdArg, as_json: JsonOpt = False) -> None:
    """Stop scheduling and mark the session cancelled."""
    from strands_durable.sessions.control import cancel as do_cancel

    new = run_async(with_store(lambda store: audited(do_cancel(store, session_id), store,
                                                     "cancel", session_id)))
    print_new_status(session_id, new, as_json)


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
    allow_host: AllowHostOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Continue a paused or failed session: failed steps run again, nothing committed
    re-runs, token usage keeps accumulating. Without DURABLE_REDIS_URL (no fleet) it
    runs here to its end, as `durable run --resume` does (also a killed run's session)."""
    from strands_durable.sessions.control import resume as do_resume

    if from_checkpoint is not None:
        fork_checkpoint(session_id, from_checkpoint, var, set_,
                        other_flags=[flag for flag, given in (
                            ("--hitl-response", hitl_response is not None),
                            ("--spec", spec is not None)) if given], as_json=as_json)
        return

    variables, budgets = resume_inputs(var, set_)
    if allow_host and not no_fleet():
        raise fail("--allow-host grants a host to steps run in this process; with "
                   "DURABLE_REDIS_URL set the fleet runs them (its operator lists hosts in "
                   "DURABLE_<PROVIDER>_HOSTS)", EXIT_USAGE)
    if no_fleet():
        # Nobody else would run it: continue it here, as `durable run --resume` does.
        from strands_durable.api.cli.run import ResumeArgs, resume_here

        raise typer.Exit(resume_here(session_id, ResumeArgs(
            variables=variables, hitl_response=hitl_response, budget_sets=budgets,
            spec=spec, allow_host=allow_host), out_dir=None))

    async def body(store: Store) -> str:
        new_spec = load_spec_file(spec) if spec else None
        outcome = await do_resume(
            store, session_id, hitl_response=hitl_response, variables=variables,
            budget_sets=budgets, new_spec=new_spec)
        for note in [] if as_json else outcome.notes:
            err.print(note, highlight=False)
        await record_action(store, "signal" if hitl_response is not None else "resume",
                            session_id, actor=local_actor("cli"), source="cli")
        return outcome.status

    new = run_async(with_store(body))
    print_new_status(session_id, new, as_json)


def no_fleet() -> bool:
    """No DURABLE_REDIS_URL: the sessions are the local store's, and no worker runs them."""
    return "DURABLE_REDIS_URL" not in os.environ and not env_settings().ephemeral


def resume_inputs(var: list[str] | None, set_: list[str] | None
                  ) -> tuple[dict[str, Any], dict[str, int]]:
    """Variables (`--var`, and `--set` of a non-budget) and budgets (`--set`) of a
    resume or fork; a malformed one is a usage error."""
    from strands_durable.sessions.control import parse_sets

    try:
        set_variables, budgets = parse_sets(parse_var_args(set_ or [], "--set"))
        return {**set_variables, **parse_var_args(var or [])}, budgets
    except DurableError as exc:
        raise fail(str(exc), EXIT_USAGE, exc.code) from None


# -- operator: requeue, checkpoints, watch, fleet -------------------------------------
def fork_checkpoint(session_id: str, n: int, var: list[str] | None, set_: list[str] | None,
                    other_flags: list[str], as_json: bool = False) -> None:
    """`durable resume SID --from-checkpoint N`: print the new session's id alone."""
    from strands_durable.sessions.checkpoints import fork_from_checkpoint

    if other_flags:
        raise fail(f"--from-checkpoint forks a new session; it cannot be combined with "
                   f"{' or '.join(other_flags)}", EXIT_USAGE)
    if n < 1:
        raise fail(f"--from-checkpoint {n}: checkpoints are numbered from 1", EXIT_USAGE)
    variables, budgets = resume_inputs(var, set_)

    async def body(store: Store) -> str:
        new = await fork_from_checkpoint(store, session_id, n, variables=variables,
                                         budget_sets=budgets)
        await record_action(store, "fork", session_id, actor=local_actor("cli"),
                            source="cli", detail=f"checkpoint {n} -> {new}")
        return new

    new = run_async(with_store(body))
    if as_json:
        print_json({"session_id": new, "forked_from": session_id, "checkpoint": n})
        return
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
    from strands_durable.sessions.requeue import report_lines
    from strands_durable.sessions.requeue import requeue as do_requeue

    if session_id is None and not dead:
        raise fail("requeue: give a session id, or --dead for every dead-lettered entry",
                   EXIT_USAGE)
    if session_id is None and step is not None:
        raise fail("requeue: --step needs a session id", EXIT_USAGE)
    report = run_async(with_store(lambda store: do_requeue(
        store, session_id, step=step, dead=dead, dry_run=dry_run)
        if dry_run or session_id is None else audited(do_requeue(
            store, session_id, step=step, dead=dead, dry_run=dry_run), store, "requeue",
            session_id)))
    if as_json:
        print_json(report.to_dict())
        return
    lines = report_lines(report)
    if not lines:
        out.print("no dead-lettered entries", highlight=False)
    for line in lines:
        out.print(line, highlight=False, markup=False, soft_wrap=True)
