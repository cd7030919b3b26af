"""How `durable` writes: the consoles, tables that keep ids whole, and `--json`.

With `--json` every command writes one JSON document on stdout, an error included:
`{"error": {"code", "message"}}` with the codes of core/errors.py (the HTTP API's),
and the same exit code as without it. Without it, errors go to stderr as one line."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic_core import to_jsonable_python
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from strands_durable.models import StepResult, TokenUsage

out = Console(emoji=False)  # step keys like node:ship:1 are data, not emoji codes
err = Console(stderr=True, emoji=False)

# A pipe has no width: rich would cut tables at 80 columns, and an id cut short is
# useless to the next command. Wide enough for any row we print.
PIPE_WIDTH = 100_000


# C0 and C1 control characters but newline and tab. Text a model or a spec wrote, shown
# on an operator's terminal, must not drive it (ESC and CSI sequences clear the screen,
# OSC ones set the title or write the clipboard); rich's own stripping leaves ESC in.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """`text` with each control character but newline and tab shown as U+FFFD."""
    return _CONTROL.sub("\ufffd", text)


class _Mode:
    json = False


MODE = _Mode()


def set_json(value: bool) -> bool:
    """A typer callback of `--json` (eager: it is seen before the other arguments'
    checks, so their errors come out as JSON too)."""
    if value:
        MODE.json = True
    return value


def wants_json(argv: Sequence[str]) -> bool:
    """`--json` among the arguments (before a `--`): for the errors click raises while
    parsing, before any callback runs."""
    args = list(argv)
    return "--json" in (args[:args.index("--")] if "--" in args else args)


def error_doc(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def print_error(message: str, code: str) -> None:
    if MODE.json:
        print_json(error_doc(code, message))
    else:
        err.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)


def print_json(value: Any) -> None:
    # Models (the status document, summaries) dump as the API sends them.
    sys.stdout.write(json.dumps(value, indent=2, default=jsonable) + "\n")
    sys.stdout.flush()


def jsonable(value: Any) -> Any:
    return to_jsonable_python(value, fallback=str)


def new_table(*headers: str, **options: Any) -> Table:
    """A table whose cells fold (break inside a word) rather than end in "…" when a
    terminal is too narrow: an id stays whole, over two lines if need be."""
    table = Table(**options)
    for header in headers:
        table.add_column(header, overflow="fold")
    return table


def print_table(table: Table) -> None:
    """On a terminal, its width (cells fold); piped, each row whole on one line."""
    if out.is_terminal:
        out.print(table)
        return
    # A console of its own: print(width=) cannot exceed the console's width.
    Console(width=PIPE_WIDTH, emoji=False, file=out.file).print(table, crop=False)


def usage_table(usage: TokenUsage, results: Iterable[StepResult]) -> Table:
    """Token usage by agent (in, out, total) and in all. In and out come from the
    committed steps; an agent the session counted but no committed step shows (its
    tokens spent by failed attempts) shows its total alone."""
    split: dict[str, list[int]] = {}
    for r in results:
        pair = split.setdefault(r.agent, [0, 0])
        pair[0] += r.input_tokens
        pair[1] += r.output_tokens
    table = new_table("agent", "in", "out", "total")
    for agent in sorted(set(usage.by_agent) | set(split)):
        io = split.get(agent)
        total = usage.by_agent.get(agent, sum(io) if io else 0)
        table.add_row(escape(agent), str(io[0]) if io else "-", str(io[1]) if io else "-",
                      str(total))
    table.add_row("[bold]total[/bold]", str(usage.total_input_tokens),
                  str(usage.total_output_tokens),
                  str(usage.total_input_tokens + usage.total_output_tokens))
    return table
