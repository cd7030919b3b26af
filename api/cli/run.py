"""`durable run`: a workflow in this process (`durable submit` sends one to the fleet:
submit.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from strands_durable.api.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    AllowHostOpt,
    AllowMcpCommandOpt,
    AllowOpt,
    AllowSecretOpt,
    AllowToolModuleOpt,
    JsonOpt,
    ProviderOpt,
    ScriptOpt,
    ScriptReplaceOpt,
    VarOpt,
    app,
    budget_hint,
    checked,
    err,
    exit_code,
    fail,
    load,
    local_grants,
    out,
    print_json,
    refuse_together,
    run_async,
)
from strands_durable.api.cli.output import MODE, print_error
from strands_durable.api.cli.progress import progress_line
from strands_durable.errors import SpecError
from strands_durable.models import SessionStatus, StepResult
from strands_durable.spec.grants import NO_GRANTS, Grants, grant
from strands_durable.spec.loader import load_spec_file, parse_var_args
from strands_durable.spec.provider_hosts import grant_hosts
from strands_durable.store.keys import check_session_id
from strands_durable.store.store import SessionRecord

EXIT_INTERRUPTED = 130  # a shell's code for a command stopped by Ctrl-C

if TYPE_CHECKING:
    from strands_durable.spec.loader import LoadedSpec
    from strands_durable.worker.embedded import RunOutcome
    from strands_durable.worker.runner import Interrupts


@app.command()
def run(
    spec: Annotated[Path | None, typer.Argument(
        help="Workflow spec (strands-cli YAML); none with --resume.")] = None,
    var: VarOpt = None,
    provider: ProviderOpt = None,
    script: ScriptOpt = None,
    script_replace: ScriptReplaceOpt = False,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Write artifacts here.")] = None,
    auto_resume: Annotated[bool, typer.Option(
        "--auto-resume", help="Continue the latest failed or paused session of this spec "
        "(same hash), or one whose runner died, instead of starting anew.")] = False,
    resume_id: Annotated[str | None, typer.Option(
        "--resume", metavar="ID", help="Continue session ID here from its last commit "
        "(killed, interrupted, failed or paused).",
        callback=checked(check_session_id))] = None,
    ephemeral: Annotated[bool, typer.Option(
        "--ephemeral", help="Keep the session in memory only: nothing survives this "
        "process.")] = False,
    keep_completed: Annotated[bool, typer.Option(
        "--keep-completed", help="Keep completed local sessions older than "
        "DURABLE_RETENTION_DAYS (the others still go).")] = False,
    allow_host: AllowHostOpt = None,
    allow: AllowOpt = None,
    allow_mcp_command: AllowMcpCommandOpt = None,
    allow_secret: AllowSecretOpt = None,
    allow_tool_module: AllowToolModuleOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run a workflow in this process (no server needed) and print its final response.
    Without DURABLE_REDIS_URL its session is kept in the local store: if this process
    dies, `durable run --resume ID` continues it from the last committed step."""
    grants = local_grants(allow, allow_mcp_command, allow_secret, allow_tool_module, ephemeral)
    if resume_id is not None:
        refuse_together("--resume continues a stored session", {"SPEC": spec is not None,
            "--auto-resume": auto_resume, "--provider": bool(provider), "--script": bool(script),
            "--script-replace": script_replace, "--ephemeral": ephemeral})
        raise typer.Exit(resume_here(resume_id, ResumeArgs(
            var=var, allow_host=allow_host, grants=grants), out_dir, keep_completed))
    if spec is None:
        raise fail("give a workflow SPEC to run, or --resume ID", EXIT_USAGE)
    spec_path = spec

    async def body(interrupts: Interrupts, current: list[str]) -> int:
        from strands_durable.worker.embedded import honour_spec_telemetry
        from strands_durable.worker.providers.credentials import check_credentials

        honour_spec_telemetry()  # before loading: the spec's endpoint is checked there
        grant_hosts(tuple(allow_host or ()))  # likewise its runtime.host, and on each step
        grant(grants)  # --allow*: its tools, checked at load and run by this process
        loaded = load(spec_path, var, provider, script, script_replace)
        check_credentials(loaded.spec, str(spec_path))  # this process runs the steps
        if out_dir is not None:
            refuse_unsafe_artifact_paths(loaded, out_dir, spec_path)  # before any work
        started = time.perf_counter()
        outcome = await run_or_resume(loaded, var, RunFlags(auto_resume, ephemeral,
                                                            keep_completed),
                                      interrupts, current)
        return report(outcome, out_dir, time.perf_counter() - started)

    raise typer.Exit(run_async(interruptible_body(body)))


@dataclass(frozen=True)
class RunFlags:
    auto_resume: bool = False
    ephemeral: bool = False
    keep_completed: bool = False


@dataclass(frozen=True)
class ResumeArgs:
    """`durable resume`'s options, applied when the session continues here."""

    var: list[str] | None = None
    variables: dict[str, Any] = field(default_factory=dict)
    hitl_response: str | None = None
    budget_sets: dict[str, int] = field(default_factory=dict)
    spec: Path | None = None
    allow_host: list[str] | None = None  # --allow-host: model hosts granted here
    grants: Grants = NO_GRANTS  # --allow*: tool policy granted here


def on_first_interrupt() -> None:
    err.print("stopping at the next step boundary (Ctrl-C again stops now; the running "
              "step then runs again on resume)", highlight=False, soft_wrap=True)


async def interruptible_body(
        body: Callable[[Interrupts, list[str]], Awaitable[int]]) -> int:
    """Run `body` with Ctrl-C handled (worker/runner.py); `current` gets the session id
    as soon as there is one, for the message of a second Ctrl-C, which stops at once."""
    from strands_durable.worker.runner import Interrupts

    interrupts = Interrupts(on_first_interrupt)
    current: list[str] = []
    try:
        with interrupts.installed():
            return await body(interrupts, current)
    except asyncio.CancelledError:
        if not current:
            err.print("stopped", highlight=False)
            return EXIT_INTERRUPTED
        err.print(f"stopped; the step that was running runs again on resume: "
                  f"durable run --resume {current[0]}", highlight=False, soft_wrap=True)
        return EXIT_INTERRUPTED


def resume_here(session_id: str, args: ResumeArgs, out_dir: Path | None,
                keep_completed: bool = False) -> int:
    """`durable run --resume ID`, and `durable resume ID` with no fleet: continue the
    session in this process from its last commit; exit as `durable run` does."""
    from strands_durable.api.run_resume import (
        ResumeChanges,
        local_retention,
        persistent,
        resume_embedded,
    )
    from strands_durable.worker.embedded import embedded_settings, honour_spec_telemetry

    async def body(interrupts: Interrupts, current: list[str]) -> int:
        honour_spec_telemetry()  # as the run it continues did (a --spec is checked here)
        grant_hosts(tuple(args.allow_host or ()))
        grant(args.grants)
        settings = embedded_settings()
        if not persistent(settings):
            raise fail("--resume: DURABLE_EPHEMERAL keeps nothing to resume; unset it",
                       EXIT_USAGE)
        changes = ResumeChanges(
            variables={**args.variables, **parse_var_args(args.var or [])},
            hitl_response=args.hitl_response, budget_sets=args.budget_sets,
            new_spec=load_spec_file(args.spec) if args.spec else None)
        await local_retention(settings, keep_completed)
        current.append(session_id)
        started = time.perf_counter()
        async with progress_line(settings) as follow:
            if follow:
                follow(session_id)
            outcome = await resume_embedded(settings, session_id, print_earlier_step, changes,
                                            on_notes=print_notes, interrupts=interrupts,
                                            on_resume=print_resuming)
        return report(outcome, out_dir, time.perf_counter() - started)

    return run_async(interruptible_body(body))


def print_resuming(record: SessionRecord) -> None:
    if MODE.json:
        return
    out.print(f"resuming session {record.session_id} ({record.workflow_name}, "
              f"{record.pattern_type})", highlight=False, soft_wrap=True)


def refuse_unsafe_artifact_paths(loaded: LoadedSpec, out_dir: Path, spec: Path) -> None:
    """An artifact path that would land outside `out_dir` is a bad spec (or a bad --var),
    refused before any step runs: every path that reads only variables is rendered and
    checked here. One that reads the run's results is checked when it ends (write_out)."""
    from strands_durable.planning.artifacts import (
        ArtifactPathError,
        paths_before_run,
        safe_target,
    )

    if out_dir.exists() and not out_dir.is_dir():  # else the run would end unwritten
        raise ArtifactPathError(f"--out {out_dir}: not a folder")
    artifacts = loaded.spec.outputs.artifacts if loaded.spec.outputs else []
    # A literal path as written too: rendering drops control characters, which a path
    # that names one was surely not meant to lose.
    literal = {i: a.path for i, a in enumerate(artifacts) if "{" not in a.path}
    for i, name in [*literal.items(), *paths_before_run(loaded.spec, loaded.variables).items()]:
        try:
            safe_target(out_dir, name)
        except ArtifactPathError as exc:
            raise SpecError(str(spec), f"outputs.artifacts[{i}].path", str(exc)) from None


def write_out(outcome: RunOutcome, out_dir: Path | None) -> tuple[list[Path], str | None]:
    """The completed session's artifacts written under `out_dir`, or none and why. Only a
    path that reads the run's results can be refused here; the session stays completed
    (its steps ran and committed), and the run exits 2 saying so."""
    from strands_durable.planning.artifacts import ArtifactPathError, write_artifacts

    if out_dir is None:
        return [], None
    try:
        return write_artifacts(outcome.artifacts, out_dir), None
    except ArtifactPathError as exc:
        return [], (f"session {outcome.session_id} completed, but no artifact was written "
                    f"to {out_dir}: {exc}")


def print_step(result: StepResult) -> None:
    if MODE.json:
        return
    out.print(f"[green]✓[/green] {result.key:<12} {result.agent:<16} "
              f"{result.tokens:>6} tokens {result.duration_ms / 1000:>7.2f}s", highlight=False)


def print_earlier_step(result: StepResult, before: bool) -> None:
    if not before or MODE.json:
        print_step(result)
        return
    out.print(f"[dim]· {result.key:<12} {result.agent:<16} {result.tokens:>6} tokens"
              f"  (committed before)[/dim]", highlight=False)


def print_notes(notes: list[str]) -> None:
    for note in [] if MODE.json else notes:
        err.print(note, highlight=False, soft_wrap=True)


async def run_or_resume(loaded: LoadedSpec, var: list[str] | None, flags: RunFlags,
                        interrupts: Interrupts, current: list[str]) -> RunOutcome:
    """Start a session of `loaded` here, or with --auto-resume continue its latest
    resumable one (failed, paused, or running with its runner dead)."""
    from strands_durable.api.run_resume import (
        ResumeChanges,
        latest_resumable,
        local_retention,
        persistent,
        resume_embedded,
    )
    from strands_durable.worker.embedded import embedded_settings, run_embedded

    settings = embedded_settings(ephemeral=flags.ephemeral)
    await local_retention(settings, flags.keep_completed)
    resumable = await latest_resumable(settings, loaded) if flags.auto_resume else None
    if flags.auto_resume and not persistent(settings):
        err.print("--auto-resume: the embedded store keeps nothing between runs "
                  "(--ephemeral); drop it, or set DURABLE_REDIS_URL to resume across runs. "
                  "Starting a new session.", highlight=False, soft_wrap=True)
    elif flags.auto_resume and resumable is None:
        err.print(f"--auto-resume: no failed or paused session of this spec "
                  f"({loaded.spec_hash[:12]}), and none whose runner died; starting a new "
                  f"one", highlight=False, soft_wrap=True)
    async with progress_line(settings) as follow:
        if resumable is not None:
            current.append(resumable)
            if follow:
                follow(resumable)
            return await resume_embedded(
                settings, resumable, print_earlier_step,
                ResumeChanges(variables=parse_var_args(var or [])), on_notes=print_notes,
                interrupts=interrupts, on_resume=print_resuming)
        name = f"{loaded.spec.name}, {loaded.spec.pattern.type}"

        def started(sid: str) -> None:
            current.append(sid)
            if follow:
                follow(sid)
            if not MODE.json:
                out.print(f"session {sid} ({name})", highlight=False)

        return await run_embedded(loaded, print_step, settings=settings, on_start=started,
                                  interrupts=interrupts)


def report(outcome: RunOutcome, out_dir: Path | None, elapsed_s: float) -> int:
    """The run's last lines, its artifacts written, and its exit code."""
    record = outcome.record
    usage = record.token_usage
    if MODE.json:
        return report_json(outcome, out_dir, elapsed_s)
    if outcome.interrupted:
        out.print(f"interrupted after {elapsed_s:.2f}s, {record.steps_committed} steps "
                  f"committed", highlight=False)
        err.print(f"continue it: durable run --resume {record.session_id}", highlight=False,
                  soft_wrap=True)
        return EXIT_INTERRUPTED
    out.print(f"{record.status.value} in {elapsed_s:.2f}s, "
              f"{record.steps_committed} steps, {usage.total_input_tokens} in / "
              f"{usage.total_output_tokens} out tokens", highlight=False)
    if record.status != SessionStatus.COMPLETED:
        err.print(f"[red]{record.status.value}:[/red] "
                  f"{record.error or record.paused_reason or ''}", highlight=False,
                  soft_wrap=True)
        hint = budget_hint(record.session_id, record.paused_reason or "")
        if hint:
            err.print(hint, highlight=False, soft_wrap=True)
        return exit_code(record.status)
    written, refused = write_out(outcome, out_dir)
    if refused:
        print_error(refused, "invalid_artifact_path")
        return EXIT_USAGE
    for path in written:
        out.print(f"wrote {path}", highlight=False)
    out.rule("final response")
    out.print(outcome.final_response, markup=False, highlight=False)
    return EXIT_OK


def report_json(outcome: RunOutcome, out_dir: Path | None, elapsed_s: float) -> int:
    """`durable run --json`: one document at the end, the exit code as without it
    (`artifact_error` says why none was written, exit 2)."""
    record = outcome.record
    completed = record.status == SessionStatus.COMPLETED and not outcome.interrupted
    written, refused = write_out(outcome, out_dir) if completed else ([], None)
    print_json({"session_id": record.session_id, "status": record.status.value,
                "interrupted": outcome.interrupted, "elapsed_s": round(elapsed_s, 3),
                "steps_committed": record.steps_committed,
                "token_usage": record.token_usage, "error": record.error,
                "paused_reason": record.paused_reason,
                "artifacts": [str(p) for p in written], "artifact_error": refused,
                "final_response": outcome.final_response if completed else None})
    if outcome.interrupted:
        return EXIT_INTERRUPTED
    if refused:
        return EXIT_USAGE
    return exit_code(record.status)
