"""`durable`: the command line. Tables for people, --json for scripts, exit codes that
mean something (0 ok, 1 failed/not found, 2 bad input, 3 paused, 124 timed out).

One module per family of commands; each registers its commands on the Typer app of
`common.py` when imported here."""

from __future__ import annotations

from strands_durable.api.cli import control, run, serve, sessions, views
from strands_durable.api.cli.common import app

__all__ = ["app", "main"]
_COMMAND_MODULES = (control, run, serve, sessions, views)


def main() -> None:
    app()
