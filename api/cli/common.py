"""What every `durable` command shares: the Typer apps, consoles, options, exit codes
(0 ok, 1 failed/not found, 2 bad input, 3 paused, 124 timed out) and how a command body
runs and fails."""

from __future__ import annotations

import asyncio
import math
import os
import re
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import ValidationError
from redis.exceptions import TimeoutError as RedisTimeoutError

from strands_durable.access import NAMESPACE_FORM, is_namespace
from strands_durable.api.cli.output import MODE, err, out, print_error, print_json, set_json
from strands_durable.errors import (
    DurableError,
    IdempotencyConflict,
    InvalidId,
    InvalidInput,
    RedisUrlError,
    SpecError,
)
from strands_durable.models import PRIORITY_DEFAULT, PRIORITY_MAX, PRIORITY_MIN, SessionStatus
from strands_durable.redis_targets import redact
from strands_durable.settings import (
    DEFAULT_REDIS_URL,
    DurableSettings,
    Limits,
    describe_settings_error,
)
from strands_durable.spec.grants import Grants, parse_grants
from strands_durable.spec.loader import (
    LoadedSpec,
    load_script_file,
    load_spec_file,
    parse_var_args,
)
from strands_durable.spec.script import ScriptConfig
from strands_durable.store.connect import open_store, session_settings
from strands_durable.store.export import SessionExists
from strands_durable.store.format_version import DataFormatTooNew, DataFormatUpgradeNeeded
from strands_durable.store.keys import check_session_id
from strands_durable.store.outage import REDIS_DOWN
from strands_durable.store.store import ShardCountChanged, Store

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_PAUSED, EXIT_TIMEOUT = 0, 1, 2, 3, 124

app = typer.Typer(help="Durable Strands Agents workflows on Redis Streams.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
sessions_app = typer.Typer(help="List, show and delete sessions.", no_args_is_help=True)
app.add_typer(sessions_app, name="sessions")


def show_version(value: bool) -> None:
    if value:
        # Our own module, not the installed metadata: an editable install keeps the
        # version it was installed at until it is installed again.
        from strands_durable.version import DATA_FORMAT, __version__

        print(f"durable (strands-durable) {__version__}, data format {DATA_FORMAT}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def root(version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=show_version,
        help="Print the version and exit.")] = False) -> None:
    """Durable Strands Agents workflows on Redis Streams."""
    # Each command starts in text: `--json` (an eager option of the command, parsed after
    # this) sets it again. A process that runs several commands (tests, an embedding
    # program) otherwise printed JSON for every command after the first `--json`.
    MODE.json = False

T = TypeVar("T")
__all__ = ["err", "out", "print_json"]  # re-exported for the command modules

VarOpt = Annotated[list[str] | None, typer.Option("--var", help="Input variable K=V.")]
ProviderOpt = Annotated[str | None, typer.Option(help="Override runtime.provider.")]
ScriptOpt = Annotated[Path | None, typer.Option(
    help="Rules for the scripted provider, merged into the spec's runtime.script: its "
    "rules are tried first, its delay_s replaces.")]
ScriptReplaceOpt = Annotated[bool, typer.Option(
    "--script-replace", help="--script replaces the spec's runtime.script instead.")]
PriorityOpt = Annotated[int | None, typer.Option(
    min=PRIORITY_MIN, max=PRIORITY_MAX,
    help=f"The session's share of a busy provider key ({PRIORITY_MIN}-{PRIORITY_MAX}, "
    f"default {PRIORITY_DEFAULT}): sessions waiting for a key have turns in proportion "
    "to their priority.")]
def checked_namespace(label: str) -> Callable[[str | None], str | None]:
    """A typer callback: a namespace not of its form is a usage error (exit 2) naming
    `label` (the option or argument) and what it takes."""
    def callback(value: str | None) -> str | None:
        if value is not None and not is_namespace(value):
            raise fail(f"{label} {value[:80]!r} is not {NAMESPACE_FORM}", EXIT_USAGE)
        return value
    return callback


NamespaceOpt = Annotated[str, typer.Option(
    "--namespace", envvar="DURABLE_NAMESPACE", callback=checked_namespace("--namespace"),
    help="The tenant's namespace (docs/tenants.md).")]
JsonOpt = Annotated[bool, typer.Option(
    "--json", is_eager=True, callback=set_json,
    help="Machine-readable output on stdout, errors included: "
    '{"error": {"code", "message"}}.')]


def _checked_grants(values: list[str] | None) -> list[str] | None:
    from strands_durable.spec.provider_hosts import parse_base_url, shown

    for value in values or []:
        problem = parse_base_url(value)
        if isinstance(problem, str):
            raise fail(f"--allow-host {shown(value)!r}: {problem}", EXIT_USAGE)
    return values


AllowHostOpt = Annotated[list[str] | None, typer.Option(
    "--allow-host", metavar="URL", callback=_checked_grants,
    help="Let this process's model requests go to URL (its scheme, host, port and the paths "
    "under it) although the spec's runtime.host names it and no DURABLE_<PROVIDER>_HOSTS "
    "lists it: the provider's key goes there. Repeatable.")]


AllowOpt = Annotated[list[str] | None, typer.Option(
    "--allow", metavar="NAME", help="Grant this run what the fleet's policy refuses by "
    "default: python_exec (the model's code runs on this machine). Local runs only. "
    "Repeatable.")]
AllowMcpCommandOpt = Annotated[list[str] | None, typer.Option(
    "--allow-mcp-command", metavar="CMD", help="Let the spec's stdio MCP servers start "
    "CMD (exact name, as DURABLE_MCP_COMMANDS lists it). Local runs only. Repeatable.")]
AllowSecretOpt = Annotated[list[str] | None, typer.Option(
    "--allow-secret", metavar="NAME", help="Lend environment variable NAME to the spec's "
    "${NAME} headers and MCP env (as DURABLE_TOOL_SECRETS does). Local runs only. "
    "Repeatable.")]
AllowToolModuleOpt = Annotated[list[str] | None, typer.Option(
    "--allow-tool-module", metavar="PREFIX", help="Let the spec import python tools under "
    "module PREFIX (as DURABLE_TOOL_MODULES does). Local runs only. Repeatable.")]


def local_grants(allow: list[str] | None, mcp_commands: list[str] | None,
                 secrets: list[str] | None, tool_modules: list[str] | None,
                 ephemeral: bool) -> Grants:
    """The grants of `durable run`'s flags, checked (exit 2 naming the flag and what it
    takes). Only for a run whose steps this process alone runs (the local store or
    memory): with DURABLE_REDIS_URL the fleet's workers may take its steps (a session's
    entries share their shard's consumer group), and their policy is their operator's."""
    local = ephemeral or "DURABLE_REDIS_URL" not in os.environ
    try:
        grants = parse_grants(allow, mcp_commands, secrets, tool_modules)
    except ValueError as exc:
        raise fail(str(exc), EXIT_USAGE) from None
    if not grants.empty and not local:
        raise fail(f"{', '.join(sorted({g.flag for g in grants.listed()}))}: grants widen "
                   "the tool policy of a run on this machine only; with DURABLE_REDIS_URL "
                   "set the fleet's workers may run its steps under their operator's policy "
                   "(DURABLE_TOOL_PYTHON_EXEC, DURABLE_MCP_COMMANDS, DURABLE_TOOL_SECRETS, "
                   "DURABLE_TOOL_MODULES); unset it or add --ephemeral", EXIT_USAGE)
    return grants


def refuse_together(what: str, given: dict[str, bool]) -> None:
    """Exit 2 when an option that stands alone (`what`) is given with others."""
    together = [flag for flag, on in given.items() if on]
    if together:
        raise fail(f"{what}; it takes no {', '.join(together)}", EXIT_USAGE)


def checked(check: Callable[[str], str]) -> Callable[[str | None], str | None]:
    """A typer callback: an id not of its documented form is a usage error (exit 2)
    naming it, before anything is read or written."""

    def callback(value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return check(value)
        except InvalidId as exc:
            raise fail(str(exc), EXIT_USAGE, exc.code) from None

    return callback


SessionIdArg = Annotated[str, typer.Argument(
    help="A session id (a UUID, as `durable submit` prints).",
    callback=checked(check_session_id))]


def exit_code(status: SessionStatus) -> int:
    """Of a session no longer running: 0 completed, 3 paused, 1 failed or cancelled."""
    if status == SessionStatus.COMPLETED:
        return EXIT_OK
    return EXIT_PAUSED if status == SessionStatus.PAUSED else EXIT_FAILED


def fail(message: str, code: int = EXIT_FAILED, error_code: str | None = None) -> typer.Exit:
    """Print the error (one line, or JSON with --json) and the exit to raise. Without an
    `error_code` (core/errors.py's), a usage error is invalid_input."""
    print_error(message, error_code or ("invalid_input" if code == EXIT_USAGE else "error"))
    return typer.Exit(code)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command body; map expected failures to a message and an exit code."""
    try:
        return asyncio.run(coro)
    except ValidationError as exc:
        if exc.title not in (DurableSettings.__name__, Limits.__name__):
            raise
        raise settings_error(exc) from None
    except REDIS_DOWN as exc:
        raise fail(redis_unreachable(exc), EXIT_FAILED, "redis_unavailable") from None
    except DurableError as exc:
        raise fail(exc.public_message() + flag_hint(exc), exit_for(exc), exc.code) from None


def flag_hint(exc: DurableError) -> str:
    """The command-line way to fix what the (interface-neutral) message names."""
    if isinstance(exc, SpecError) and exc.path.startswith("inputs.required."):
        name = exc.path.removeprefix("inputs.required.")
        return f" (--var {name}=VALUE)"
    return ""


def budget_hint(session_id: str, reason: str) -> str | None:
    """The command that goes on from a budget pause (the reason itself names no flag)."""
    over = re.match(r"budget (\w+) (?:reached|exceeded)", reason)
    if over is None:
        return None
    return f"raise it: durable resume {session_id} --set budgets.{over.group(1)}=N"


def exit_for(exc: DurableError) -> int:
    """The CLI's reading of the error kinds: the caller's own input (a spec, an id, a
    value, the Redis URL, an idempotency key reused for another request: all documented
    as exit 2) is a usage error; anything else failed (exit 1)."""
    usage = (InvalidInput, RedisUrlError, IdempotencyConflict, ShardCountChanged,
             DataFormatTooNew, DataFormatUpgradeNeeded, SessionExists)
    return EXIT_USAGE if isinstance(exc, usage) else EXIT_FAILED


def settings_error(exc: ValidationError) -> typer.Exit:
    return fail(describe_settings_error(exc), EXIT_USAGE, "misconfigured")


def redis_unreachable(exc: Exception) -> str:
    """Where we tried (the password masked), what went wrong, and a hint for the usual
    mistake: a TLS URL against a plain-text port answers nothing until the timeout."""
    if "DURABLE_REDIS_URL" not in os.environ and not env_settings().ephemeral:
        return (f"cannot reach the local session store ({exc}); its redis-server may "
                f"have been stopped: run the command again")
    url = os.environ.get("DURABLE_REDIS_URL", DEFAULT_REDIS_URL)
    hint = ""
    if isinstance(exc, RedisTimeoutError):
        # The timeout in force, so that a too-short DURABLE_REDIS_CONNECT_TIMEOUT_S shows.
        hint = f", no answer within {env_settings().redis_connect_timeout_s:g}s"
        if url.lower().startswith("rediss"):
            hint += "; is that port TLS? a plain-text Redis never answers a TLS handshake"
    return f"cannot reach Redis at {redact(url)} ({exc}){hint}; check DURABLE_REDIS_URL"


def env_settings() -> DurableSettings:
    """DURABLE_* settings; a bad value is a usage error naming the variable."""
    try:
        return DurableSettings()
    except ValidationError as exc:
        raise settings_error(exc) from None


def session_env_settings() -> DurableSettings:
    """The settings of a command that reads or controls sessions: without
    DURABLE_REDIS_URL, the user's local store (store/local_server.py, started if need
    be); DURABLE_EPHEMERAL=1 keeps the default URL instead."""
    return session_settings(env_settings())


async def with_store(body: Callable[[Store], Awaitable[T]], fleet: bool = False) -> T:
    """Run `body` on the sessions' store; `fleet` commands (submit, workers, queue) talk
    to the fleet's Redis (DURABLE_REDIS_URL, or its default) even without the variable."""
    store = open_store(env_settings() if fleet else session_env_settings())
    try:
        return await body(store)
    finally:
        await store.close()


def load(spec: Path, var: list[str] | None, provider: str | None,
         script: Path | None, script_replace: bool = False) -> LoadedSpec:
    """The spec as run and submit load it; `--script` merged into its runtime.script
    (or replacing it with --script-replace)."""
    overrides = parse_var_args(var or [])
    if script is None:
        if script_replace:
            raise fail("--script-replace needs --script FILE", EXIT_USAGE)
        return load_spec_file(spec, overrides, provider=provider)
    given = load_script_file(script)
    if not script_replace:
        own = load_spec_file(spec, overrides, provider=provider).spec.runtime.script
        given = merge_scripts(own, given)
    return load_spec_file(spec, overrides, provider=provider, script=given)


def merge_scripts(own: ScriptConfig | None, given: ScriptConfig) -> ScriptConfig:
    """`given`'s rules first (the first rule that matches answers, so a file can
    override one reply of the spec's), then the spec's; `given`'s delay_s and
    word_delay_s where it sets them."""
    if own is None:
        return given
    delay = given.delay_s if "delay_s" in given.model_fields_set else own.delay_s
    word_delay = (given.word_delay_s if "word_delay_s" in given.model_fields_set
                  else own.word_delay_s)
    return ScriptConfig(delay_s=delay, word_delay_s=word_delay, rules=given.rules + own.rules)


def timeout_s(value: float | None) -> float | None:
    """`nan` or `inf` would wait forever and a negative time out at once: refused."""
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise typer.BadParameter(f"{value} is not a finite number of seconds, 0 or more")
    return value


def interval_s(value: float) -> float:
    if not (math.isfinite(value) and 0.01 <= value <= 3600):
        raise typer.BadParameter(f"{value} is not a number of seconds from 0.01 to 3600")
    return value


TimeoutOption = Annotated[float | None, typer.Option(help="Give up after S seconds.",
                                                     callback=timeout_s)]
