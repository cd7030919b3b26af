"""`durable run` (in this process) and `durable submit` (to the fleet)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from strands_durable.api.cli.common import (
    EXIT_OK,
    ProviderOpt,
    ScriptOpt,
    VarOpt,
    app,
    budget_hint,
    checked,
    err,
    exit_code,
    load,
    out,
    run_async,
    with_store,
)
from strands_durable.errors import SpecError
from strands_durable.models import SessionStatus, StepResult
from strands_durable.scheduler.spec.loader import parse_var_args
from strands_durable.store.keys import check_token
from strands_durable.store.store import Store

if TYPE_CHECKING:
    from strands_durable.scheduler.spec.loader import LoadedSpec
    from strands_durable.worker.embedded import RunOutcome


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

    async def body() -> int:
        from strands_durable.worker.embedded import honour_spec_telemetry
        from strands_durable.worker.providers.credentials import check_credentials

        honour_spec_telemetry()  # before loading: the spec's endpoint is checked there
        loaded = load(spec, var, provider, script)
        check_credentials(loaded.spec, str(spec))  # this process runs the steps
        if out_dir is not None:
            refuse_unsafe_artifact_paths(loaded, out_dir, spec)  # before any work is done
        started = time.perf_counter()
        outcome = await run_or_resume(loaded, var, auto_resume)
        return report(outcome, out_dir, time.perf_counter() - started)

    raise typer.Exit(run_async(body()))


def refuse_unsafe_artifact_paths(loaded: LoadedSpec, out_dir: Path, spec: Path) -> None:
    """A literal artifact path that would land outside `out_dir` is a bad spec."""
    from strands_durable.scheduler.planning.artifacts import ArtifactPathError, safe_target

    if not loaded.spec.outputs:
        return
    for i, artifact in enumerate(loaded.spec.outputs.artifacts):
        if "{" not in artifact.path:
            try:
                safe_target(out_dir, artifact.path)
            except ArtifactPathError as exc:
                raise SpecError(str(spec), f"outputs.artifacts[{i}].path", str(exc)) from None


def print_step(result: StepResult) -> None:
    out.print(f"[green]✓[/green] {result.key:<12} {result.agent:<16} "
              f"{result.tokens:>6} tokens {result.duration_ms / 1000:>7.2f}s", highlight=False)


def print_earlier_step(result: StepResult, before: bool) -> None:
    if not before:
        print_step(result)
        return
    out.print(f"[dim]· {result.key:<12} {result.agent:<16} {result.tokens:>6} tokens"
              f"  (committed before)[/dim]", highlight=False)


def print_notes(notes: list[str]) -> None:
    for note in notes:
        err.print(note, highlight=False, soft_wrap=True)


async def run_or_resume(loaded: LoadedSpec, var: list[str] | None,
                        auto_resume: bool) -> RunOutcome:
    """Start a session of `loaded` here, or with --auto-resume continue its latest
    failed or paused one."""
    from strands_durable.api.run_resume import latest_resumable, persistent, resume_embedded
    from strands_durable.worker.embedded import embedded_settings, run_embedded

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
    name = f"{loaded.spec.name}, {loaded.spec.pattern.type}"
    if resumable is not None:
        out.print(f"resuming session {resumable} ({name})", highlight=False, soft_wrap=True)
        return await resume_embedded(settings, resumable, print_earlier_step,
                                     parse_var_args(var or []), on_notes=print_notes)
    return await run_embedded(
        loaded, print_step, settings=settings,
        on_start=lambda sid: out.print(f"session {sid} ({name})", highlight=False))


def report(outcome: RunOutcome, out_dir: Path | None, elapsed_s: float) -> int:
    """The run's last lines, its artifacts written, and its exit code."""
    from strands_durable.scheduler.planning.artifacts import write_artifacts

    record = outcome.record
    usage = record.token_usage
    out.print(f"{record.status.value} in {elapsed_s:.2f}s, "
              f"{record.steps_committed} steps, {usage.total_input_tokens} in / "
              f"{usage.total_output_tokens} out tokens", highlight=False)
    if record.status != SessionStatus.COMPLETED:
        err.print(f"[red]{record.status.value}:[/red] "
                  f"{record.error or record.paused_reason or ''}", highlight=False)
        hint = budget_hint(record.session_id, record.paused_reason or "")
        if hint:
            err.print(hint, highlight=False, soft_wrap=True)
        return exit_code(record.status)
    if out_dir is not None:
        for path in write_artifacts(outcome.artifacts, out_dir):
            out.print(f"wrote {path}", highlight=False)
    out.rule("final response")
    out.print(outcome.final_response, markup=False, highlight=False)
    return EXIT_OK


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
