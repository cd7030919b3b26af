"""`durable`: the command line. Tables for people, --json for scripts, exit codes that
mean something (0 ok, 1 failed/not found, 2 bad input, 3 paused, 124 timed out).

One module per family of commands; each registers its commands on the Typer app of
`common.py` when imported here."""

from __future__ import annotations

import sys

import typer
from typer.exceptions import TyperException

from strands_durable.api.cli import (
    access,
    capacity,
    control,
    run,
    schedules,
    serve,
    sessions,
    submit,
    transfer,
    upgrade,
    validate,
    views,
    webhooks,
)
from strands_durable.api.cli.common import app
from strands_durable.api.cli.output import MODE, error_doc, print_json, wants_json

__all__ = ["app", "main"]
_COMMAND_MODULES = (access, capacity, control, run, submit, schedules, serve, sessions,
                    transfer, upgrade, validate, views, webhooks)


def main() -> None:
    if not wants_json(sys.argv[1:]):
        app()
        return
    # click reports a bad option or argument itself, as text; with --json it is ours to.
    MODE.json = True
    try:
        code = app(standalone_mode=False)
    except TyperException as exc:  # click's own errors (typer vendors click)
        print_json(error_doc("invalid_input", exc.format_message()))
        code = exc.exit_code
    except typer.Abort:
        code = 130
    sys.exit(code if isinstance(code, int) else 0)
