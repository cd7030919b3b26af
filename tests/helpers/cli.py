"""`durable` run in this process (click's CliRunner): typer's app made a click command
once, not at every invoke as typer's CliRunner does (a third of the CPU of a `durable run
--ephemeral` test)."""

from __future__ import annotations

from functools import cache

import click
import typer.main

from strands_durable.api.cli import app


@cache
def durable() -> click.Command:
    return typer.main.get_command(app)
