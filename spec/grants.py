"""Grants for a run on the user's own machine, as Deno's `--allow-*` flags.

The fleet's tool policy (core/settings.py ToolPolicy: DURABLE_TOOL_PYTHON_EXEC,
DURABLE_MCP_COMMANDS, DURABLE_TOOL_SECRETS, DURABLE_TOOL_MODULES) is safe by default and
stays the default everywhere. The person who runs a spec on their own machine may widen
exactly that policy, by name, for that one run:

    --allow python_exec          DURABLE_TOOL_PYTHON_EXEC=true
    --allow-mcp-command CMD      CMD added to DURABLE_MCP_COMMANDS
    --allow-secret NAME          NAME added to DURABLE_TOOL_SECRETS
    --allow-tool-module PREFIX   PREFIX added to DURABLE_TOOL_MODULES

A grant lives in the command's own context (a ContextVar, as `--allow-host` does): the
spec check and the in-process worker that runs the steps read it; `durable api` and
`arq worker` never set it, so their policy is the operator's alone.

`surveying()` lets `durable validate` list what a spec needs instead of refusing it.
Pure but for those two ContextVars.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

from strands_durable.settings import ToolPolicy

__all__ = ["ALLOW_NAMES", "FLAGS", "Grant", "Grants", "grant", "granted", "parse_grants",
           "record_needs", "surveying", "widen"]

# What `--allow` takes (a switch of the policy, not a list).
ALLOW_NAMES: tuple[str, ...] = ("python_exec",)
ALLOW, MCP_COMMAND, SECRET, TOOL_MODULE = (
    "--allow", "--allow-mcp-command", "--allow-secret", "--allow-tool-module")
FLAGS: tuple[str, ...] = (ALLOW, MCP_COMMAND, SECRET, TOOL_MODULE)

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,31}")
# A command as a spec's `command:` names it: a program name or path, no list separator
# (the policy is a comma-separated list), no whitespace or control characters.
_COMMAND = re.compile(r"[^\s,\x00-\x1f\x7f]{1,200}")
SHOWN = 60  # characters of a refused value quoted back


@dataclass(frozen=True, order=True)
class Grant:
    """One grant: the flag and its value (`--allow-secret GITHUB_TOKEN`)."""

    flag: str
    value: str

    def __str__(self) -> str:
        return f"{self.flag} {self.value}"


@dataclass(frozen=True)
class Grants:
    python_exec: bool = False
    mcp_commands: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    tool_modules: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.python_exec or self.mcp_commands or self.secrets
                    or self.tool_modules)

    def listed(self) -> list[Grant]:
        return ([Grant(ALLOW, "python_exec")] if self.python_exec else []) + \
            [Grant(MCP_COMMAND, c) for c in self.mcp_commands] + \
            [Grant(SECRET, s) for s in self.secrets] + \
            [Grant(TOOL_MODULE, m) for m in self.tool_modules]


NO_GRANTS = Grants()


def _shown(value: str) -> str:
    return repr(value[:SHOWN] + ("..." if len(value) > SHOWN else ""))


def parse_grants(allow: list[str] | None = None, mcp_commands: list[str] | None = None,
                 secrets: list[str] | None = None,
                 tool_modules: list[str] | None = None) -> Grants:
    """The grants of a command line; ValueError naming the flag, the value and what it
    takes when one is not of its form (an unknown `--allow` names the valid ones)."""
    for name in allow or []:
        if name not in ALLOW_NAMES:
            raise ValueError(f"{ALLOW} {_shown(name)}: not a grant; {ALLOW} takes "
                             f"{', '.join(ALLOW_NAMES)} (and see {MCP_COMMAND}, {SECRET}, "
                             f"{TOOL_MODULE})")
    checks = ((MCP_COMMAND, mcp_commands, _COMMAND, "a command name or path, without "
               "spaces or commas"),
              (SECRET, secrets, _ENV_NAME, "an environment variable name"),
              (TOOL_MODULE, tool_modules, _MODULE, "a dotted module path (mypkg.tools)"))
    for flag, values, form, what in checks:
        for value in values or []:
            if form.fullmatch(value) is None:
                raise ValueError(f"{flag} {_shown(value)}: not {what}")
    return Grants(python_exec=bool(allow), mcp_commands=_unique(mcp_commands),
                  secrets=_unique(secrets), tool_modules=_unique(tool_modules))


def _unique(values: list[str] | None) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values or []))


P = TypeVar("P", bound=ToolPolicy)


def widen(policy: P, grants: Grants | None = None) -> P:
    """`policy` with `grants` (default: this context's) added: never narrower."""
    grants = granted() if grants is None else grants
    if grants.empty:
        return policy
    return policy.model_copy(update={
        "tool_python_exec": policy.tool_python_exec or grants.python_exec,
        "mcp_commands": _joined(policy.commands, grants.mcp_commands),
        "tool_secrets": _joined(policy.secrets, grants.secrets),
        "tool_modules": _joined(policy.module_prefixes, grants.tool_modules),
    })


def _joined(listed: tuple[str, ...], more: tuple[str, ...]) -> str:
    return ",".join(dict.fromkeys(listed + more))


_GRANTED: ContextVar[Grants] = ContextVar("durable_tool_grants", default=NO_GRANTS)
_SURVEY: ContextVar[list[Grant] | None] = ContextVar("durable_grant_survey", default=None)


def grant(grants: Grants) -> None:
    """Widen this context's tool policy (`durable run`'s own; its steps inherit it)."""
    _GRANTED.set(grants)


def granted() -> Grants:
    return _GRANTED.get()


@contextmanager
def surveying() -> Iterator[list[Grant]]:
    """While open, a spec check records the grants a spec needs (`record_needs`)
    instead of refusing it: `durable validate`, which runs nothing."""
    needs: list[Grant] = []
    token = _SURVEY.set(needs)
    try:
        yield needs
    finally:
        _SURVEY.reset(token)


def record_needs(needs: list[Grant]) -> bool:
    """Record `needs` when surveying (True), else False: the caller refuses."""
    survey = _SURVEY.get()
    if survey is None:
        return False
    survey.extend(need for need in needs if need not in survey)
    return True
