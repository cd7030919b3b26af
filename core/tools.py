"""The native tools, by name: strands-cli's registry of built-in tools (its
`strands_cli/tools/<name>.py` modules), the names a spec's `tools.python` and an
agent's `tools:` list may use without an import path.

Names only, no implementation: the scheduler and the API import this to check a spec;
the worker builds each from strands_durable/worker/tools/native/<name>.py.
"""

from __future__ import annotations

__all__ = ["NATIVE_MODULE_PREFIX", "NATIVE_TOOLS", "native_name"]

NATIVE_TOOLS: tuple[str, ...] = (
    "calculator",
    "current_time",
    "duckduckgo_search",
    "file_read",
    "file_write",
    "grep",
    "head",
    "http_request",
    "python_exec",
    "search",
    "spec_verify",
    "tail",
    "tavily_search",
    "web_fetch",
)

# strands-cli's full form of a native tool: `strands_cli.tools.<name>`.
NATIVE_MODULE_PREFIX = "strands_cli.tools."


def native_name(reference: str) -> str | None:
    """The native tool a `tools.python` entry names (short id or strands-cli's full
    path), or None when it is an import path of someone else's tool."""
    name = reference.removeprefix(NATIVE_MODULE_PREFIX)
    return name if name in NATIVE_TOOLS else None
